package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Send and re-send: the dashboard sends a request through the recording
// proxy to the live upstream, in a session it opens itself (its own
// server/discover or initialize, recorded as the dashboard's client), and
// shows the answer. The Tools page lists the tools of the latest
// tools/list of each upstream, with the recorded calls of each.
//
//	POST /api/v1/send                 {"session", "method", "params", "raw", "malformed", "headers", "version"}
//	GET  /api/v1/tools                the latest tools/list of each upstream
//	GET  /api/v1/tools/history?upstream=URL&path=P&name=TOOL
//	                                  the recorded calls of a tool, newest first

// SendRequest is what the dashboard asks Options.Send to send.
type SendRequest struct {
	// URL is the endpoint: the recording proxy's address and the
	// session's path.
	URL string
	// Method and Params are the request; Body, when set, is sent instead
	// (not JSON when the person confirmed it).
	Method string
	Params json.RawMessage
	Body   []byte
	// Header is added to the session's requests.
	Header http.Header
	// Version is the protocol version to speak ("" negotiates).
	Version string
}

// maxSend bounds a send's body, and maxSendHeaders its headers.
const (
	maxSend        = 16 << 20
	maxSendHeaders = 50
)

func (s *Server) apiSend(w http.ResponseWriter, r *http.Request) {
	rec := s.recording()
	if rec == nil {
		writeError(w, http.StatusNotImplemented, "sending goes through a recorder, and this dashboard has none: run mcptape record, and use its dashboard", "unsupported")
		return
	}
	base := strings.TrimRight(s.proxyBase(), "/")
	if base == "" {
		writeError(w, http.StatusNotImplemented, "sending goes through the recorder, and this dashboard serves none: run mcptape record, and use its dashboard", "unsupported")
		return
	}
	var body struct {
		Session   string            `json:"session"`
		Path      string            `json:"path"`
		Method    string            `json:"method"`
		Params    json.RawMessage   `json:"params"`
		Raw       *string           `json:"raw"`
		Malformed bool              `json:"malformed"`
		Headers   map[string]string `json:"headers"`
		Version   string            `json:"version"`
	}
	if !readJSON(w, r, maxSend, &body) {
		return
	}
	req := SendRequest{Method: body.Method, Params: body.Params, Header: http.Header{}, Version: body.Version}
	path := body.Path
	if body.Session != "" {
		sess, err := s.store.Session(r.Context(), body.Session)
		if err != nil {
			storeError(w, err)
			return
		}
		switch sess.Leg {
		case capture.LegStdio:
			badRequest(w, "this session is a stdio server's (mcptape wrap): it has no address to send to; send to it with its client, or replay its tape with mcptape replay server")
			return
		case capture.LegForward, capture.LegMITM:
			badRequest(w, "this session came through the forward proxy, to the server's own URL: use Copy as curl on the message, which sends it through the recorder with -x")
			return
		}
		path = sess.Path
		if sess.Route != "" {
			// The route's prefix, as the client called it: /NAME/mcp.
			path = "/" + url.PathEscape(sess.Route) + sess.Path
		}
		if req.Version == "" && sess.Version != "" && protocol.Known(sess.Version) {
			req.Version = sess.Version
		}
	}
	if path == "" || !strings.HasPrefix(path, "/") {
		badRequest(w, "name the session whose upstream to send to, or its endpoint's path (e.g. /mcp)")
		return
	}
	req.URL = base + path
	switch {
	case body.Raw != nil:
		if !body.Malformed && !json.Valid([]byte(*body.Raw)) {
			badRequest(w, "the raw body is not JSON; to send it anyway on purpose, confirm it as malformed")
			return
		}
		req.Body = []byte(*body.Raw)
	case body.Method == "":
		badRequest(w, "give a method (and params), or a raw body")
		return
	case len(body.Params) > 0 && !isJSONObject(body.Params):
		badRequest(w, "params must be a JSON object")
		return
	}
	if len(body.Headers) > maxSendHeaders {
		badRequest(w, fmt.Sprintf("at most %d headers", maxSendHeaders))
		return
	}
	for k, v := range body.Headers {
		ck := http.CanonicalHeaderKey(strings.TrimSpace(k))
		switch {
		case !validHeaderName(ck) || strings.ContainsAny(v, "\r\n\x00"):
			badRequest(w, fmt.Sprintf("header %q: not a valid header name and value", k))
			return
		case ck == "Host" || ck == "Content-Length" || ck == "Transfer-Encoding" || ck == "Connection":
			badRequest(w, fmt.Sprintf("header %s is set by the sender itself", ck))
			return
		}
		req.Header.Set(ck, v)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	res, err := rec.Send(ctx, req)
	if err != nil {
		writeError(w, http.StatusBadGateway, "sending through the recorder: "+err.Error(), "upstream")
		return
	}
	// Recorded before the page, told it is done, reads the tool's
	// history again.
	_ = rec.Sync(ctx)
	writeJSON(w, http.StatusOK, res)
}

func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// Bounds of the tools scans.
const (
	maxToolSessions = 2000
	maxHistory      = 200
)

// toolsOf is one upstream's tools, from its latest tools/list.
type toolsOf struct {
	Upstream string          `json:"upstream"`
	Path     string          `json:"path"`
	Session  string          `json:"session"`
	Seq      uint64          `json:"seq"`
	Time     time.Time       `json:"time"`
	Version  string          `json:"version,omitempty"`
	Tools    json.RawMessage `json:"tools"`
}

// recentSessions are the sessions, newest first, at most maxToolSessions.
func (s *Server) recentSessions(ctx context.Context) ([]*capture.Session, error) {
	var all []*capture.Session
	for sess, err := range s.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			return nil, err
		}
		all = append(all, sess)
	}
	slices.SortFunc(all, func(a, b *capture.Session) int { return b.End.Compare(a.End) })
	if len(all) > maxToolSessions {
		all = all[:maxToolSessions]
	}
	return all, nil
}

func (s *Server) apiTools(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sessions, err := s.recentSessions(ctx)
	if err != nil {
		storeError(w, err)
		return
	}
	seen := map[string]bool{}
	out := []toolsOf{}
	for _, sess := range sessions {
		key := sess.Upstream + "|" + sess.Path
		if seen[key] || sess.Leg == capture.LegStdio {
			continue
		}
		var last *capture.Message
		for m, err := range s.store.Messages(ctx, sess.ID, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				storeError(w, err)
				return
			}
			if m.Direction == protocol.ServerToClient && m.Kind == protocol.KindResult && m.Method == protocol.MethodToolsList {
				last = m
			}
		}
		if last == nil {
			continue
		}
		m, err := s.store.Message(ctx, last.Seq)
		if err != nil {
			continue
		}
		res, _ := protocol.ParseResult(protocol.Decode(m.Raw).Result)
		if len(res.Tools) == 0 {
			continue
		}
		seen[key] = true
		out = append(out, toolsOf{Upstream: sess.Upstream, Path: sess.Path, Session: sess.ID, Seq: m.Seq, Time: m.Time, Version: sess.Version, Tools: res.Tools})
	}
	slices.SortFunc(out, func(a, b toolsOf) int { return cmp.Compare(a.Upstream+a.Path, b.Upstream+b.Path) })
	writeJSON(w, http.StatusOK, map[string]any{"upstreams": out, "send": s.recording() != nil && s.proxyBase() != ""})
}

// historyRow is one recorded call of a tool.
type historyRow struct {
	Session   string          `json:"session"`
	Seq       uint64          `json:"seq"`
	Time      time.Time       `json:"time"`
	Client    string          `json:"client,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Status is success, error (JSON-RPC), isError, pending or
	// input_required; Summary the result's first text, cut.
	Status   string  `json:"status"`
	Summary  string  `json:"summary,omitempty"`
	Response uint64  `json:"response,omitempty"`
	Ms       float64 `json:"ms,omitempty"`
}

func (s *Server) apiToolHistory(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	upstream, path, name := q.Get("upstream"), q.Get("path"), q.Get("name")
	if name == "" {
		badRequest(w, "name the tool: ?name=TOOL (with ?upstream= and ?path= of its server)")
		return
	}
	sessions, err := s.recentSessions(ctx)
	if err != nil {
		storeError(w, err)
		return
	}
	rows := []historyRow{}
	for _, sess := range sessions {
		if len(rows) >= maxHistory {
			break
		}
		if (upstream != "" && sess.Upstream != upstream) || (path != "" && sess.Path != path) {
			continue
		}
		calls := map[uint64]*historyRow{}
		var order []uint64
		answers := map[uint64]*capture.Message{}
		for m, err := range s.store.Messages(ctx, sess.ID, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				storeError(w, err)
				return
			}
			switch {
			case m.Direction == protocol.ClientToServer && m.Kind == protocol.KindRequest && m.Method == protocol.MethodToolsCall && m.Name == name:
				calls[m.Seq] = &historyRow{Session: sess.ID, Seq: m.Seq, Time: m.Time, Client: sess.Client.String(), Status: "pending"}
				order = append(order, m.Seq)
			case m.Direction == protocol.ServerToClient && m.Kind.IsResponse() && m.Links.Request != 0:
				answers[m.Links.Request] = m
			}
		}
		for i := len(order) - 1; i >= 0 && len(rows) < maxHistory; i-- {
			row := calls[order[i]]
			if q, err := s.store.Message(ctx, row.Seq); err == nil {
				p, _ := protocol.ParseParams(protocol.Decode(q.Raw).Params)
				row.Arguments = p.Arguments
			}
			if a := answers[row.Seq]; a != nil {
				row.Response = a.Seq
				row.Ms = float64(a.Time.Sub(row.Time).Microseconds()) / 1000
				row.Status = "success"
				if full, err := s.store.Message(ctx, a.Seq); err == nil {
					row.Status, row.Summary = summarize(full)
				}
			}
			rows = append(rows, *row)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"calls": rows})
}

// summarize is a tool answer's status and the start of its text.
func summarize(m *capture.Message) (status, summary string) {
	pm := protocol.Decode(m.Raw)
	if pm.Kind == protocol.KindError {
		e, _ := pm.ErrorInfo()
		return "error", clipText(strconv.FormatInt(e.Code, 10)+": "+e.Message, 200)
	}
	res, _ := protocol.ParseResult(pm.Result)
	status = "success"
	switch {
	case res.ResultType == "input_required":
		status = "input_required"
	case res.IsError:
		status = "isError"
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(res.Content, &blocks)
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			return status, clipText(b.Text, 200)
		}
	}
	if len(res.StructuredContent) > 0 {
		return status, clipText(string(res.StructuredContent), 200)
	}
	return status, ""
}

func clipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// validHeaderName reports whether k is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
