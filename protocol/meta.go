package protocol

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Method names the recorder treats specially.
const (
	MethodInitialize          = "initialize"
	MethodInitialized         = "notifications/initialized"
	MethodDiscover            = "server/discover"
	MethodPing                = "ping"
	MethodToolsList           = "tools/list"
	MethodToolsCall           = "tools/call"
	MethodPromptsGet          = "prompts/get"
	MethodResourcesRead       = "resources/read"
	MethodSubscriptionsListen = "subscriptions/listen"
	MethodSampling            = "sampling/createMessage"
	MethodElicitation         = "elicitation/create"
	MethodRootsList           = "roots/list"
	MethodProgress            = "notifications/progress"
	MethodLogMessage          = "notifications/message"
	MethodCancelled           = "notifications/cancelled"
	MethodElicitationComplete = "notifications/elicitation/complete"
	MethodSubscriptionsAck    = "notifications/subscriptions/acknowledged"
)

// `_meta` keys of the 2026-07-28 revision and the tasks utility.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	MetaRelatedTask        = "io.modelcontextprotocol/related-task"
	MetaProgressToken      = "progressToken"
)

// Implementation is clientInfo or serverInfo.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Title   string `json:"title,omitempty"`
}

// String is "name/version", or "" when the name is unknown.
func (i *Implementation) String() string {
	if i == nil || i.Name == "" {
		return ""
	}
	if i.Version == "" {
		return i.Name
	}
	return i.Name + "/" + i.Version
}

type meta struct {
	ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
	ClientInfo         *Implementation `json:"io.modelcontextprotocol/clientInfo"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	ServerInfo         *Implementation `json:"io.modelcontextprotocol/serverInfo"`
	SubscriptionID     json.RawMessage `json:"io.modelcontextprotocol/subscriptionId"`
	RelatedTask        *struct {
		TaskID string `json:"taskId"`
	} `json:"io.modelcontextprotocol/related-task"`
	ProgressToken json.RawMessage `json:"progressToken"`
}

// Params is what the recorder reads from a request's or notification's
// params. Fields are zero when absent. Nothing here is validated beyond
// JSON types: a server that breaks the rules is recorded as it is.
type Params struct {
	// ProtocolVersion is `_meta[…/protocolVersion]` (modern), or
	// initialize's protocolVersion (legacy).
	ProtocolVersion string
	// Modern reports that `_meta[…/protocolVersion]` was present.
	Modern bool
	// ClientInfo is initialize's clientInfo or `_meta[…/clientInfo]`.
	ClientInfo *Implementation
	// ClientCapabilities is initialize's capabilities or `_meta[…/clientCapabilities]`.
	ClientCapabilities json.RawMessage
	// ProgressToken is `_meta.progressToken` of a request, or the
	// progressToken of a notifications/progress.
	ProgressToken json.RawMessage
	// Name is params.name, or params.uri for resources.
	Name string
	// Arguments is tools/call's or prompts/get's arguments.
	Arguments json.RawMessage
	// SubscriptionID is `_meta[…/subscriptionId]` on a notification.
	SubscriptionID json.RawMessage
	// RequestID is notifications/cancelled's requestId.
	RequestID json.RawMessage
	// RequestState and InputResponses are the MRTR retry fields.
	RequestState   *string
	InputResponses json.RawMessage
	// TaskID is params.taskId, or the related-task's taskId.
	TaskID string
	// ElicitationID is elicitation's or elicitation/complete's elicitationId.
	ElicitationID string
	// Mode is elicitation's mode ("" means form).
	Mode string
	// Tools reports whether a sampling request offers tools.
	Tools bool
	// Messages is sampling's messages.
	Messages json.RawMessage
}

// ParseParams reads the fields of [Params] from raw params. Malformed params
// give the zero value and false. Large members (arguments, messages,
// capabilities) are views into raw, not copies.
func ParseParams(raw json.RawMessage) (Params, bool) { return (*Strings)(nil).ParseParams(raw) }

// ParseParams is [ParseParams] taking the strings it reads from c when c
// holds them already: ClientInfo may then be an Implementation it returned
// before, which the caller must not modify.
func (c *Strings) ParseParams(raw json.RawMessage) (Params, bool) {
	var p Params
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return p, true
	}
	if raw[0] != '{' {
		return p, false
	}
	var uri string
	var m meta
	hasMeta, ok := false, true
	// raw is usually a view into a message Decode validated; on anything
	// else, malformed members are skipped.
	if members(raw, func(key, v []byte) bool {
		switch string(key) {
		case "_meta":
			if m, hasMeta = parseMeta(v, c); !hasMeta {
				ok = false
			}
		case "protocolVersion":
			c.str(v, &p.ProtocolVersion)
		case "clientInfo":
			p.ClientInfo = c.impl(v)
		case "capabilities":
			p.ClientCapabilities = v
		case "progressToken":
			p.ProgressToken = v
		case "name":
			c.str(v, &p.Name)
		case "uri":
			str(v, &uri)
		case "arguments":
			p.Arguments = v
		case "requestId":
			p.RequestID = v
		case "requestState":
			var st string
			if str(v, &st) {
				p.RequestState = &st
			}
		case "inputResponses":
			p.InputResponses = v
		case "taskId":
			str(v, &p.TaskID)
		case "elicitationId":
			str(v, &p.ElicitationID)
		case "mode":
			str(v, &p.Mode)
		case "tools":
			p.Tools = string(v) != "null"
		case "messages":
			p.Messages = v
		}
		return true
	}) != nil {
		ok = false
	}
	if p.Name == "" {
		p.Name = uri
	}
	if hasMeta {
		if m.ProtocolVersion != "" {
			p.ProtocolVersion = m.ProtocolVersion
			p.Modern = true
		}
		if m.ClientInfo != nil {
			p.ClientInfo = m.ClientInfo
		}
		if m.ClientCapabilities != nil {
			p.ClientCapabilities = m.ClientCapabilities
		}
		if m.ProgressToken != nil {
			p.ProgressToken = m.ProgressToken
		}
		p.SubscriptionID = m.SubscriptionID
		if m.RelatedTask != nil && p.TaskID == "" {
			p.TaskID = m.RelatedTask.TaskID
		}
	}
	return p, ok
}

// Result is what the recorder reads from a result.
type Result struct {
	// ProtocolVersion is initialize's negotiated version.
	ProtocolVersion string
	// SupportedVersions is server/discover's list.
	SupportedVersions []string
	// ServerInfo is initialize's serverInfo or `_meta[…/serverInfo]`.
	ServerInfo *Implementation
	// Capabilities is the server's capabilities (initialize, discover).
	Capabilities json.RawMessage
	// ResultType is "complete", "input_required", "task", or "" (legacy).
	ResultType string
	// InputRequests and RequestState are the MRTR interim fields.
	InputRequests json.RawMessage
	RequestState  *string
	// IsError is a tool result's isError.
	IsError bool
	// StructuredContent is a tool result's structuredContent.
	StructuredContent json.RawMessage
	// TaskID is a task result's taskId (inline on 2026, under task on 2025-11-25).
	TaskID string
	// StopReason is a sampling result's stopReason; Model its model.
	StopReason string
	Model      string
	// Content is the content member (a tool result, a sampling result).
	Content json.RawMessage
	// Tools is tools/list's tools.
	Tools json.RawMessage
	// Action is an elicitation result's action.
	Action string
	// SubscriptionID is `_meta[…/subscriptionId]` (a listen's final response).
	SubscriptionID json.RawMessage
}

// ParseResult reads the fields of [Result]; malformed results give false.
// Content, structuredContent, tools and the other large members are views
// into raw, not copies.
func ParseResult(raw json.RawMessage) (Result, bool) { return (*Strings)(nil).ParseResult(raw) }

// ParseResult is [ParseResult] taking the strings it reads from c when c
// holds them already: ServerInfo may then be an Implementation it returned
// before, which the caller must not modify.
func (c *Strings) ParseResult(raw json.RawMessage) (Result, bool) {
	var r Result
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return r, false
	}
	var m meta
	hasMeta := false
	// raw is usually a view into a message Decode validated; on anything
	// else, malformed members are skipped.
	err := members(raw, func(key, v []byte) bool {
		switch string(key) {
		case "_meta":
			m, hasMeta = parseMeta(v, c)
		case "protocolVersion":
			c.str(v, &r.ProtocolVersion)
		case "supportedVersions":
			// Into vs, not r: that would put every Result on the heap.
			var vs []string
			if err := json.Unmarshal(v, &vs); err == nil || vs != nil {
				r.SupportedVersions = vs
			}
		case "serverInfo":
			r.ServerInfo = c.impl(v)
		case "capabilities":
			r.Capabilities = v
		case "resultType":
			c.str(v, &r.ResultType)
		case "inputRequests":
			r.InputRequests = v
		case "requestState":
			var st string
			if str(v, &st) {
				r.RequestState = &st
			}
		case "isError":
			switch string(v) { // as encoding/json: anything else leaves it
			case "true":
				r.IsError = true
			case "false":
				r.IsError = false
			}
		case "structuredContent":
			r.StructuredContent = v
		case "taskId":
			str(v, &r.TaskID)
		case "task":
			if r.TaskID == "" {
				var t struct {
					TaskID string `json:"taskId"`
				}
				_ = json.Unmarshal(v, &t)
				r.TaskID = t.TaskID
			}
		case "stopReason":
			str(v, &r.StopReason)
		case "model":
			str(v, &r.Model)
		case "content":
			r.Content = v
		case "tools":
			r.Tools = v
		case "action":
			str(v, &r.Action)
		}
		return true
	})
	if hasMeta {
		if r.ServerInfo == nil {
			r.ServerInfo = m.ServerInfo
		}
		r.SubscriptionID = m.SubscriptionID
	}
	return r, err == nil
}

// NewestModern returns the newest modern version in vs, or "".
func NewestModern(vs []string) string {
	best := ""
	for _, v := range vs {
		if EraOf(v) == EraModern && v > best {
			best = v
		}
	}
	return best
}

// str reads a JSON string: a plain one (no escapes, valid UTF-8) without
// encoding/json, which would validate and reflect for every field.
func str(v []byte, dst *string) bool {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		in := v[1 : len(v)-1]
		if bytes.IndexByte(in, '\\') < 0 && bytes.IndexByte(in, '"') < 0 && utf8.Valid(in) {
			*dst = knownString(in)
			return true
		}
		s, ok := unquote(v)
		if ok {
			*dst = s
		}
		return ok
	}
	return false
}

// unquote decodes a JSON string with encoding/json. It is a function of its
// own so that str's dst does not escape: encoding/json would take its
// address, and every Params and Result that str writes into would be
// allocated on the heap.
func unquote(v []byte) (string, bool) {
	var s string
	err := json.Unmarshal(v, &s)
	return s, err == nil
}

// parseImpl reads clientInfo or serverInfo; nil when it is not an object.
func parseImpl(v []byte, c *Strings) *Implementation {
	if len(v) == 0 || v[0] != '{' {
		return nil
	}
	impl := new(Implementation)
	if members(v, func(k, x []byte) bool {
		switch string(k) {
		case "name":
			c.str(x, &impl.Name)
		case "version":
			c.str(x, &impl.Version)
		case "title":
			c.str(x, &impl.Title)
		}
		return true
	}) != nil {
		return nil
	}
	return impl
}

// parseMeta reads a _meta object; false when it is not one.
func parseMeta(v []byte, c *Strings) (meta, bool) {
	var m meta
	if len(v) == 0 || v[0] != '{' {
		return m, false
	}
	if members(v, func(k, x []byte) bool {
		switch string(k) {
		case MetaProtocolVersion:
			c.str(x, &m.ProtocolVersion)
		case MetaClientInfo:
			m.ClientInfo = c.impl(x)
		case MetaClientCapabilities:
			m.ClientCapabilities = x
		case MetaServerInfo:
			m.ServerInfo = c.impl(x)
		case MetaSubscriptionID:
			m.SubscriptionID = x
		case MetaRelatedTask:
			var t string
			if id, ok := ValidMember(x, "taskId"); ok && str(id, &t) {
				m.RelatedTask = &struct {
					TaskID string `json:"taskId"`
				}{t}
			}
		case MetaProgressToken:
			m.ProgressToken = x
		}
		return true
	}) != nil {
		return meta{}, false
	}
	return m, true
}
