package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Direction is which way a message travelled.
type Direction uint8

const (
	// ClientToServer is a message the client sent (in an HTTP request body).
	ClientToServer Direction = iota + 1
	// ServerToClient is a message the server sent (in an HTTP response body or SSE event).
	ServerToClient
)

func (d Direction) String() string {
	switch d {
	case ClientToServer:
		return "c2s"
	case ServerToClient:
		return "s2c"
	}
	return "?"
}

// Arrow is a short form for tables: "->" client to server, "<-" server to client.
func (d Direction) Arrow() string {
	switch d {
	case ClientToServer:
		return "->"
	case ServerToClient:
		return "<-"
	}
	return "??"
}

// ParseDirection is the inverse of [Direction.String].
func ParseDirection(s string) Direction {
	switch s {
	case "c2s":
		return ClientToServer
	case "s2c":
		return ServerToClient
	}
	return 0
}

// MarshalText implements encoding.TextMarshaler.
func (d Direction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Direction) UnmarshalText(b []byte) error { *d = ParseDirection(string(b)); return nil }

// Kind classifies a JSON-RPC message.
type Kind uint8

const (
	// KindInvalid is a frame that is not a JSON-RPC message: bad JSON, a
	// scalar, an object with neither method nor result nor error.
	KindInvalid Kind = iota
	// KindRequest has a method and an id.
	KindRequest
	// KindNotification has a method and no id.
	KindNotification
	// KindResult is a response with a result.
	KindResult
	// KindError is a response with an error; its id may be null or absent.
	KindError
	// KindFrame is bytes that carry no message and are no fault: an SSE
	// block with a priming event (an id with empty data), comments, a
	// retry field or a stray blank line; an HTTP answer of another content
	// type (a plain-text 405).
	KindFrame
	// KindStderr is a line a stdio server wrote to its standard error: its
	// log, kept beside its messages.
	KindStderr
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResult:
		return "result"
	case KindError:
		return "error"
	case KindFrame:
		return "frame"
	case KindStderr:
		return "stderr"
	}
	return "invalid"
}

// ParseKind is the inverse of [Kind.String].
func ParseKind(s string) Kind {
	switch s {
	case "request":
		return KindRequest
	case "notification":
		return KindNotification
	case "result":
		return KindResult
	case "error":
		return KindError
	case "frame":
		return KindFrame
	case "stderr":
		return KindStderr
	}
	return KindInvalid
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error { *k = ParseKind(string(b)); return nil }

// IsRPC reports whether k is a JSON-RPC message: a request, notification,
// result or error (not an invalid frame, an SSE frame or a stderr line).
func (k Kind) IsRPC() bool { return k >= KindRequest && k <= KindError }

// IsResponse reports whether k is a result or an error.
func (k Kind) IsResponse() bool { return k == KindResult || k == KindError }

// Message is one decoded JSON-RPC message, or one frame that is not one.
// Decoding never rewrites anything: Raw holds the exact bytes, and the other
// fields are views into them.
type Message struct {
	// Raw is the exact bytes of this message: the whole body, or one element
	// of a batch. It aliases the input of [Split].
	Raw []byte
	// Kind is the classification.
	Kind Kind
	// Method is set for requests and notifications.
	Method string
	// ID is the raw JSON of the id member: nil when absent, "null" when null.
	ID json.RawMessage
	// Params, Result and Error are the raw members, nil when absent.
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
	// Batch is the element's index in a batch, or -1 when not in a batch.
	Batch int
	// Problem says what is wrong with a frame that is invalid, or with a
	// message that is classified but breaks a rule (a null request id, a
	// wrong jsonrpc member). Empty when all is well.
	Problem string
}

// HasID reports whether the message has a non-null id.
func (m *Message) HasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// IDKey is a canonical key for matching a response to its request: the id's
// raw bytes with insignificant whitespace removed. "1" and 1 differ, as they
// do in JSON-RPC. Empty when the message has no id.
func (m *Message) IDKey() string {
	if !m.HasID() {
		return ""
	}
	return IDKey(m.ID)
}

// IDKey canonicalises raw id bytes (see [Message.IDKey]).
func IDKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if plainString(raw) {
		return string(raw) // encoding/json writes it so again
	}
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			b, _ := json.Marshal(s)
			return string(b)
		}
	}
	return string(raw)
}

// plainString reports whether raw is a JSON string of printable ASCII that
// json.Marshal writes back unchanged: no escapes, and none of the
// characters it escapes for HTML.
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// ErrorInfo is the decoded error member of an error response.
type ErrorInfo struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error makes an ErrorInfo an error, for APIs that answer a request with a
// JSON-RPC error: "code N: message".
func (e *ErrorInfo) Error() string { return fmt.Sprintf("code %d: %s", e.Code, e.Message) }

// ErrorInfo decodes the error member; ok is false when there is none or it is malformed.
func (m *Message) ErrorInfo() (e ErrorInfo, ok bool) {
	if len(m.Error) == 0 {
		return e, false
	}
	if json.Unmarshal(m.Error, &e) != nil {
		return e, false
	}
	return e, true
}

type envelope struct {
	JSONRPC, ID, Method, Params, Result, Error json.RawMessage
}

// envelopeMembers is how many members an envelope holds.
const envelopeMembers = 6

// envelopeMember numbers the JSON-RPC members (see member); -1 for any
// other key.
func envelopeMember(key []byte) int {
	switch string(key) {
	case "jsonrpc":
		return 0
	case "id":
		return 1
	case "method":
		return 2
	case "params":
		return 3
	case "result":
		return 4
	case "error":
		return 5
	}
	return -1
}

// member is the member envelopeMember numbers k.
func (env *envelope) member(k int) *json.RawMessage {
	switch k {
	case 0:
		return &env.JSONRPC
	case 1:
		return &env.ID
	case 2:
		return &env.Method
	case 3:
		return &env.Params
	case 4:
		return &env.Result
	}
	return &env.Error
}

// IsBatch reports whether b (ignoring leading whitespace) is a JSON array.
func IsBatch(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// Split decodes a body or an SSE data payload into messages. A JSON array is
// a batch and yields one message per element (Batch set to the index); an
// empty array, or bytes that are not JSON, yield a single KindInvalid message
// holding all of b. Split never fails and never drops bytes: the Raw of the
// messages it returns cover every element of the input.
func Split(b []byte) []Message { return AppendSplit(nil, b) }

// AppendSplit is Split appending to dst, which a caller that splits body
// after body can reuse.
func AppendSplit(dst []Message, b []byte) []Message {
	if IsBatch(b) {
		var elems []json.RawMessage
		if err := json.Unmarshal(b, &elems); err != nil {
			return append(dst, invalid(b, -1, "malformed batch: "+jsonProblem(err)))
		}
		if len(elems) == 0 {
			return append(dst, invalid(b, -1, "empty batch"))
		}
		for i, e := range elems {
			dst = append(dst, Decode(e))
			dst[len(dst)-1].Batch = i
		}
		return dst
	}
	return append(dst, Decode(b))
}

// Decode classifies one JSON value that should be a single JSON-RPC message.
// Use [Split] when the input may be a batch.
func Decode(b []byte) Message {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return invalid(b, -1, "empty frame")
	}
	if trimmed[0] != '{' {
		if json.Valid(trimmed) {
			return invalid(b, -1, "not a JSON-RPC object: a JSON "+jsonType(trimmed[0]))
		}
		return invalid(b, -1, "not JSON")
	}
	// One pass validates and finds the members, as views into b: no copy
	// of a large result.
	var env envelope
	if !validEnvelope(trimmed, &env) {
		var v any
		return invalid(b, -1, "not JSON: "+jsonProblem(json.Unmarshal(trimmed, &v)))
	}
	m := Message{Raw: b, Batch: -1, ID: env.ID, Params: env.Params, Result: env.Result, Error: env.Error}
	var problems []string
	if v := bytes.TrimSpace(env.JSONRPC); string(v) != `"2.0"` {
		if len(v) == 0 {
			problems = append(problems, `missing "jsonrpc":"2.0"`)
		} else {
			problems = append(problems, fmt.Sprintf(`"jsonrpc" is %s, want "2.0"`, truncate(string(v), 40)))
		}
	}
	switch {
	case env.Method != nil:
		method, ok := methodString(env.Method)
		if !ok {
			m.Kind = KindInvalid
			m.Problem = "method is not a string"
			return m
		}
		m.Method = method
		if env.ID == nil {
			m.Kind = KindNotification
		} else {
			m.Kind = KindRequest
			if string(bytes.TrimSpace(env.ID)) == "null" {
				problems = append(problems, "request id is null")
			} else if !validID(env.ID) {
				problems = append(problems, "request id is neither a string nor an integer")
			}
		}
		if env.Result != nil || env.Error != nil {
			problems = append(problems, "request carries result or error")
		}
	case env.Error != nil:
		m.Kind = KindError
		if env.Result != nil {
			problems = append(problems, "response carries both result and error")
		}
		if !validErrorInfo(env.Error) {
			problems = append(problems, "error member is not {code, message}")
		}
	case env.Result != nil:
		m.Kind = KindResult
		if !m.HasID() {
			problems = append(problems, "result without an id")
		}
	default:
		m.Kind = KindInvalid
		problems = append(problems, "object has no method, result or error")
	}
	for i, p := range problems {
		if i > 0 {
			m.Problem += "; "
		}
		m.Problem += p
	}
	return m
}

// methodString decodes a method member, as encoding/json would into a
// string; a method the spec names comes back as its constant.
func methodString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		if s, ok := known[string(raw[1:len(raw)-1])]; ok {
			return s, true
		}
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// validErrorInfo reports whether raw decodes as an ErrorInfo.
func validErrorInfo(raw json.RawMessage) bool {
	var e ErrorInfo
	return json.Unmarshal(raw, &e) == nil
}

func validID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		return true
	}
	for i, c := range raw {
		if c == '-' && i == 0 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func invalid(b []byte, batch int, problem string) Message {
	return Message{Raw: b, Kind: KindInvalid, Batch: batch, Problem: problem}
}

func jsonType(c byte) string {
	switch c {
	case '"':
		return "string"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func jsonProblem(err error) string {
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	}
	return err.Error()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
