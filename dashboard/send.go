package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Send and re-send: the dashboard sends a request through the recording
// proxy to the live upstream, in a session it opens itself (its own
// server/discover or initialize, recorded as the dashboard's client), and
// shows the answer. A session's request goes to the upstream that
// session spoke to, through the recorder's route that reaches it
// (sendTarget), or not at all, with the reason.
//
//	POST /api/v1/send                 {"session", "method", "params", "raw", "malformed", "headers", "version"}

// ClientName is the clientInfo name [Recording.Send] declares: the
// dashboard knows its own sessions by it.
const ClientName = "mcptape-dashboard"

// SendRequest is what the dashboard asks [Recording.Send] to send.
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
		to := s.sendTarget(sess)
		if !to.OK {
			writeError(w, http.StatusConflict, to.Reason, "unsupported")
			return
		}
		path = to.Path
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
	began := time.Now()
	res, err := rec.Send(ctx, req)
	if err != nil {
		msg := sendError(err)
		if strings.HasPrefix(msg, "Sending through the recorder: ") {
			// What the recorder answered, as it recorded it.
			_ = rec.Sync(ctx)
			if why := s.sendFailure(ctx, began); why != "" {
				msg = sendError(errors.New(why))
			}
		}
		writeError(w, http.StatusBadGateway, msg, "upstream")
		return
	}
	// Recorded before the page, told it is done, reads the tool's
	// history again.
	_ = rec.Sync(ctx)
	writeJSON(w, http.StatusOK, res)
}

// rpcMessage finds a JSON-RPC error's message in an error's text (the
// body the recorder answered with, quoted, perhaps cut).
var rpcMessage = regexp.MustCompile(`"message"\s*:\s*"((?:[^"\\]|\\.)*)`)

// sendError says why a send failed, in the words of the recorder when it
// answered for an upstream it could not reach ("connection refused"),
// rather than its status code.
func sendError(err error) string {
	text := err.Error()
	if m := rpcMessage.FindStringSubmatch(text); m != nil {
		var msg string
		if json.Unmarshal([]byte(`"`+m[1]+`"`), &msg) != nil {
			msg = m[1]
		}
		msg = strings.TrimPrefix(msg, "mcptape: ")
		switch {
		case strings.Contains(msg, "connection refused"):
			return "The recorder could not reach the upstream: " + msg + ". Nothing listens at its address: start the server (or check its port), then send again."
		case strings.Contains(msg, "no such host"):
			return "The recorder could not reach the upstream: " + msg + ". Check the upstream's host name."
		case msg != "":
			return "The recorder answered for the upstream: " + msg
		}
	}
	return "Sending through the recorder: " + text
}

// sendFailure is the JSON-RPC error the recorder recorded for the
// dashboard's own session begun since: its words for what went wrong
// ("upstream … did not answer: … connection refused"), quoted as the
// body was; "" when there is none.
func (s *Server) sendFailure(ctx context.Context, since time.Time) string {
	n := 0
	for x, err := range s.store.Sessions(ctx, capture.SessionQuery{Since: since.Add(-time.Second)}) {
		if err != nil || n == 20 {
			return ""
		}
		n++
		if x.Client.Name != ClientName {
			continue
		}
		for m, err := range s.store.Messages(ctx, x.ID, capture.MessageQuery{}) {
			if err != nil {
				return ""
			}
			if m.Kind == protocol.KindError && m.Direction == protocol.ServerToClient {
				return string(m.Raw)
			}
		}
	}
	return ""
}

func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// sendTarget is where a request of a session goes: the recording proxy's
// path that reaches the session's upstream (its route's, or the single
// upstream's), or why nothing can be sent there.
type sendTarget struct {
	OK bool `json:"ok"`
	// Path is the proxy's path to send to; Route the route's name ("" for
	// the single upstream).
	Path  string `json:"path,omitempty"`
	Route string `json:"route,omitempty"`
	// Reason says why not, and what to do instead.
	Reason string `json:"reason,omitempty"`
}

func (s *Server) sendTarget(sess *capture.Session) sendTarget {
	rec := s.recording()
	if rec == nil || s.proxyBase() == "" {
		return sendTarget{Reason: "Sending goes through a running recorder, and this dashboard has none: run mcptape record --upstream URL and use the dashboard it prints."}
	}
	switch sess.Leg {
	case capture.LegStdio:
		return sendTarget{Reason: "These tools are a stdio server's (mcptape wrap): mcptape has no address to send to. Call them from the client that starts the server, or replay the session's tape with mcptape replay server --stdio."}
	case capture.LegForward, capture.LegMITM:
		return sendTarget{Reason: "This session came through the forward proxy, to the server's own URL: use Copy as curl on one of its messages, which sends through the recorder with -x."}
	}
	routes := rec.Routes()
	pick := -1
	for i, rt := range routes {
		if !rt.serves(sess.Upstream) {
			continue
		}
		if rt.Name == sess.Route {
			pick = i
			break
		}
		if pick < 0 {
			pick = i
		}
	}
	if pick < 0 {
		up := sess.Upstream + sess.Path
		return sendTarget{Reason: fmt.Sprintf("This recorder does not reach %s (these tools were listed in a session recorded elsewhere, or by another recorder): "+
			"to send to it, run mcptape record --upstream %s, or add a route to it (mcptape record --route NAME=%s).", up, up, up)}
	}
	rt := routes[pick]
	path := sess.Path
	if rt.Name != "" {
		// The route's prefix, as a client calls it: /NAME/mcp.
		path = "/" + url.PathEscape(rt.Name) + sess.Path
	}
	if path == "" {
		path = "/"
	}
	return sendTarget{OK: true, Path: path, Route: rt.Name}
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
