package traces

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// item is one thing the builder goroutine turns into spans: a session's
// description, or a message reduced to what a span needs. OnBatch makes
// them: nothing in an item points into the batch, which the recorder
// reuses once OnBatch returns.
type item struct {
	sess *sessInfo
	msg  *msgInfo
}

// sessInfo is what spans say of a session.
type sessInfo struct {
	id       string
	era      protocol.Era
	version  string
	leg      capture.Leg
	route    string
	upstream string
	ended    bool
	end      time.Time
}

// msgInfo is a message, reduced.
type msgInfo struct {
	seq      uint64
	session  string
	dir      protocol.Direction
	kind     protocol.Kind
	method   string
	name     string // the tool's or prompt's name, or a resource's uri
	id       string // the JSON-RPC id as text ("" when none)
	at       time.Time
	links    capture.Links
	status   int // the exchange's HTTP status, 0 when none (stdio)
	version  string
	traceCtx map[string]string // traceparent, tracestate from _meta or the HTTP request

	// answers
	errCode       int64
	errMsg        string
	isErr         bool // a JSON-RPC error
	toolError     bool // an isError tool result
	inputRequired bool // a 2026-07-28 input_required result: the call goes on

	// notifications
	event map[string]string
}

// maxParse bounds how much of a message is read for a span: the fields it
// needs are small, and a 10 MiB result's isError is worth no more than
// its first bytes. A result whose top level holds isError or resultType
// past this point is read whole by ParseResult only up to this bound.
const maxParse = 1 << 20

// itemsOf reduces a batch.
func itemsOf(b *capture.Batch) []item {
	items := make([]item, 0, len(b.Sessions)+len(b.Messages))
	var ended []item
	for _, s := range b.Sessions {
		si := &sessInfo{id: s.ID, era: s.Era, version: s.Version, leg: s.Leg, route: s.Route, upstream: s.Upstream}
		items = append(items, item{sess: si})
		if s.Status != capture.StatusOpen && !s.End.IsZero() {
			// A session's record is as it stands after the batch: its end
			// comes after the batch's messages (the last answers among them).
			e := *si
			e.ended, e.end = true, s.End
			ended = append(ended, item{sess: &e})
		}
	}
	var exchanges map[uint64]*capture.Exchange
	if len(b.Exchanges) > 0 {
		exchanges = make(map[uint64]*capture.Exchange, len(b.Exchanges))
		for _, x := range b.Exchanges {
			exchanges[x.ID] = x
		}
	}
	for _, m := range b.Messages {
		if mi := reduce(m, exchanges[m.ExchangeID]); mi != nil {
			items = append(items, item{msg: mi})
		}
	}
	return append(items, ended...)
}

// reduce keeps what spans need of m; nil for what makes no span or event
// (frames that are not JSON-RPC, notifications of no request).
func reduce(m *capture.Message, x *capture.Exchange) *msgInfo {
	switch m.Kind {
	case protocol.KindRequest, protocol.KindResult, protocol.KindError:
	case protocol.KindNotification:
		if m.Links.Request == 0 {
			return nil
		}
	default:
		return nil
	}
	mi := &msgInfo{seq: m.Seq, session: m.SessionID, dir: m.Direction, kind: m.Kind, method: m.Method,
		name: m.Name, at: m.Time, links: m.Links, id: idText(m.ID)}
	if x != nil {
		mi.status = x.Status
	}
	raw := m.Raw
	if len(raw) > maxParse {
		raw = nil // too large to read again here; see below
	}
	switch m.Kind {
	case protocol.KindRequest:
		if raw != nil {
			dm := protocol.Decode(raw)
			mi.traceCtx = metaTraceContext(dm.Params)
			if p, ok := protocol.ParseParams(dm.Params); ok && p.Modern {
				mi.version = p.ProtocolVersion
			}
		}
		if mi.traceCtx == nil && x != nil && x.RequestHeader.Get("Traceparent") != "" {
			mi.traceCtx = map[string]string{"traceparent": x.RequestHeader.Get("Traceparent")}
			if ts := x.RequestHeader.Get("Tracestate"); ts != "" {
				mi.traceCtx["tracestate"] = ts
			}
		}
	case protocol.KindError:
		mi.isErr = true
		if raw != nil {
			dm := protocol.Decode(raw)
			var e struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(dm.Error, &e) == nil {
				mi.errCode, mi.errMsg = e.Code, e.Message
			}
		}
	case protocol.KindResult:
		if raw != nil {
			dm := protocol.Decode(raw)
			if r, ok := protocol.ParseResult(dm.Result); ok {
				mi.toolError = r.IsError
				mi.inputRequired = r.ResultType == "input_required"
			}
		} else if len(m.Raw) > 0 {
			// A large result: look for the two top-level members in its
			// head, where servers put them before the content, if at all.
			head := m.Raw[:maxParse]
			mi.toolError = bytes.Contains(head, []byte(`"isError":true`))
			mi.inputRequired = bytes.Contains(head, []byte(`"resultType":"input_required"`))
		}
	case protocol.KindNotification:
		if raw != nil {
			mi.event = notificationEvent(m.Method, protocol.Decode(raw).Params)
		} else {
			mi.event = map[string]string{}
		}
	}
	return mi
}

// idText is a JSON-RPC id as the conventions want it: a string's text, a
// number's digits; "" for none or null.
func idText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// metaTraceContext reads the W3C Trace Context keys from params._meta
// (SEP-414: unprefixed traceparent, tracestate, baggage).
func metaTraceContext(params json.RawMessage) map[string]string {
	if len(params) == 0 {
		return nil
	}
	meta, ok := protocol.ValidMember(params, "_meta")
	if !ok {
		return nil
	}
	var out map[string]string
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		v, ok := protocol.ValidMember(meta, k)
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil || s == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = s
	}
	if out["traceparent"] == "" {
		return nil
	}
	return out
}

// notificationEvent is what a span event says of a notification: progress
// and its total and message; a log message's level and logger; a
// cancellation's reason.
func notificationEvent(method string, params json.RawMessage) map[string]string {
	ev := map[string]string{}
	if len(params) == 0 {
		return ev
	}
	var p struct {
		Progress json.RawMessage `json:"progress"`
		Total    json.RawMessage `json:"total"`
		Message  *string         `json:"message"`
		Level    string          `json:"level"`
		Logger   string          `json:"logger"`
		Reason   string          `json:"reason"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ev
	}
	set := func(k, v string) {
		if v != "" {
			if len(v) > 256 {
				v = v[:256] + "…"
			}
			ev[k] = v
		}
	}
	switch method {
	case protocol.MethodProgress:
		set("mcp.progress", numText(p.Progress))
		set("mcp.progress.total", numText(p.Total))
		if p.Message != nil {
			set("mcp.progress.message", *p.Message)
		}
	case protocol.MethodLogMessage:
		set("mcp.log.level", p.Level)
		set("mcp.log.logger", p.Logger)
	case protocol.MethodCancelled:
		set("mcp.cancel.reason", p.Reason)
	}
	return ev
}

func numText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return ""
}
