package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Intercepting and answering for the client, in the one policy layer every
// HTTP leg shares. Two hold points:
//
//   - a client's request (or notification), held before it is forwarded
//     (ServeHTTP calls holdRequest with the buffered body);
//   - what the server sends on an exchange a rule or --answer can concern:
//     a JSON body is read whole (it is one message, bounded by maxHold)
//     and held before its headers go out; an SSE stream is split into
//     events, and only the events that are held wait, each in a goroutine
//     of its own, while every other event goes on as it arrives (sseHold).
//
// An exchange nothing can concern takes the plain tee path, at the cost of
// a few nil checks.

// inbound is what the hold points keep of a request as received.
type inbound struct {
	upTarget string // the path and query as forwarded upstream
	remote   string
	recv     []byte // the body as received (the forwarded one may differ)
}

func inboundOf(r *http.Request, t target, recv []byte) inbound {
	u := url.URL{Path: t.path, RawPath: t.rawPath, RawQuery: r.URL.RawQuery}
	return inbound{upTarget: u.RequestURI(), remote: r.RemoteAddr, recv: recv}
}

// maxHold bounds a message the proxy holds: a larger one goes on as it is
// (and streams, for an SSE event), with a note in the log.
const maxHold = 4 << 20

// examines reports whether any response could be held or answered.
func (p *Proxy) examines() bool {
	return p.ans != nil || p.icpt.Wants(capture.InterceptResponse) || p.icpt.Wants(capture.InterceptRequest) ||
		p.icpt.Wants(capture.InterceptNotification)
}

// holdsRequests reports whether a client's message could be held or
// changed before it is forwarded.
func (p *Proxy) holdsRequests() bool {
	return p.ans != nil || p.icpt.Wants(capture.InterceptRequest) || p.icpt.Wants(capture.InterceptNotification)
}

// serverRequests are the requests a server sends a client (sampling,
// elicitation, roots, ping), which request rules may hold.
var serverRequests = []string{protocol.MethodSampling, protocol.MethodElicitation, protocol.MethodRootsList, protocol.MethodPing}

// mayHoldServerRequests reports whether a rule could hold a request a
// server sends.
func (p *Proxy) mayHoldServerRequests() bool {
	for _, m := range serverRequests {
		if _, ok := p.icpt.Match(capture.InterceptRequest, m, ""); ok {
			return true
		}
	}
	return false
}

// mrtrMethods are the methods whose result may be input_required
// (2026-07-28).
func mrtrMethod(m string) bool {
	return m == protocol.MethodToolsCall || m == protocol.MethodPromptsGet || m == protocol.MethodResourcesRead
}

// heldRequest is what holdRequest decided about a client's message.
type heldRequest struct {
	fwd    []byte               // what to forward
	note   *capture.Intercepted // what became of the received message, nil when nothing
	header http.Header          // the received header, for the record, when the forwarded one differs
	done   bool                 // answered (or the client left): do not forward
}

// holdRequest applies --answer's capabilities and the request rules to a
// client's message before it is forwarded. body is the whole body.
func (p *Proxy) holdRequest(w http.ResponseWriter, r *http.Request, t target, body []byte) heldRequest {
	out := heldRequest{fwd: body}
	if protocol.IsBatch(body) {
		return out
	}
	m := protocol.Decode(body)
	if m.Kind != protocol.KindRequest && m.Kind != protocol.KindNotification {
		return out
	}
	params, _ := protocol.ParseParams(m.Params)
	var notes []string
	if p.ans != nil {
		if b, added := p.ans.addCapabilities(m.Method, body); added != "" {
			out.fwd = b
			notes = append(notes, added)
		}
		// mcptape answers a 2026-07-28 input_required result itself, which
		// it cannot read compressed: it asks for the answer uncompressed.
		if m.Kind == protocol.KindRequest && mrtrMethod(m.Method) && r.Header.Get("Accept-Encoding") != "" &&
			protocol.EraOf(requestVersion(r.Header, params)) == protocol.EraModern {
			orig := r.Header
			r.Header = orig.Clone()
			r.Header.Del("Accept-Encoding")
			out.header = orig
			notes = append(notes, "asked the server for an uncompressed answer (the client's Accept-Encoding removed), so that mcptape can answer its input_required rounds (--answer)")
		}
	}
	kind := capture.InterceptRequest
	what := capture.HeldRequest
	if m.Kind == protocol.KindNotification {
		kind, what = capture.InterceptNotification, capture.HeldNotification
	}
	rule, ok := p.icpt.Match(kind, m.Method, params.Name)
	if !ok {
		if len(notes) > 0 {
			out.note = &capture.Intercepted{Note: strings.Join(notes, "; "), Sent: out.fwd}
		}
		return out
	}
	held := time.Now()
	v, err := p.icpt.Hold(r.Context(), capture.HeldMessage{
		What: what, Direction: protocol.ClientToServer, Method: m.Method, Name: params.Name, Raw: out.fwd,
		Rule: rule.String(), Upstream: t.rt.up.Redacted(), Version: requestVersion(r.Header, params),
		MCPSession: r.Header.Get(protocol.HeaderSessionID), Client: clientName(params),
	})
	if err != nil {
		notes = append(notes, heldText(rule.String(), time.Since(held))+"; the client went away before anyone decided, so it was not forwarded")
		tap := p.beginHeld(r, t, body, &capture.Intercepted{Note: strings.Join(notes, "; ")}, nil)
		tap.End("the client went away while its request was held", true)
		out.done = true
		return out
	}
	notes = append(notes, verdictText(rule.String(), time.Since(held), v, what))
	switch v.Action {
	case capture.ActionEdit:
		out.fwd = []byte(v.Raw)
		if !v.Malformed {
			if h := editHeaders(r, out.fwd); h != nil && out.header == nil {
				out.header = h
			}
		}
	case capture.ActionAnswer, capture.ActionFail:
		resp := responseBody(m.ID, v)
		p.answerInPlace(w, r, t, body, &capture.Intercepted{Note: strings.Join(notes, "; ")}, resp,
			"the answer a person gave in place of the server")
		out.done = true
		return out
	}
	out.note = &capture.Intercepted{Note: strings.Join(notes, "; ")}
	if !bytes.Equal(out.fwd, body) {
		out.note.Sent = out.fwd
	}
	return out
}

// requestVersion is the protocol version a request speaks, when it says.
func requestVersion(h http.Header, params protocol.Params) string {
	if v := h.Get(protocol.HeaderProtocolVersion); v != "" {
		return v
	}
	return params.ProtocolVersion
}

// editHeaders brings the 2026-07-28 routing headers in line with an
// edited request (a server refuses a mismatch); it returns the received
// header, for the record, when it changed any.
func editHeaders(r *http.Request, body []byte) http.Header {
	m := protocol.Decode(body)
	params, _ := protocol.ParseParams(m.Params)
	orig := r.Header
	var h http.Header
	set := func(k, v string) {
		if cur := orig.Get(k); cur == "" || cur == v {
			return
		}
		if h == nil {
			h = orig.Clone()
		}
		h.Set(k, v)
	}
	if m.Method != "" {
		set(protocol.HeaderMethod, m.Method)
	}
	if params.Name != "" {
		set(protocol.HeaderName, protocol.EncodeHeaderValue(params.Name))
	}
	if h == nil {
		return nil
	}
	r.Header = h
	return orig
}

// beginHeld reports a request to the recorder as beginTarget does, as
// received (body, and header when the forwarded one differs), with what
// became of it.
func (p *Proxy) beginHeld(r *http.Request, t target, body []byte, note *capture.Intercepted, header http.Header) *capture.Tap {
	if p.rec == nil {
		return nil
	}
	if header != nil {
		r = r.Clone(r.Context())
		r.Header = header
	}
	return p.rec.Begin(heldRequestOf(r, t, body, note))
}

// heldRequestOf is beginTarget's description of a request, with what
// became of it.
func heldRequestOf(r *http.Request, t target, body []byte, note *capture.Intercepted) *capture.Request {
	req := capture.RequestFrom(r, body, true)
	req.Leg, req.Route, req.Upstream = t.rt.leg, t.rt.name, t.rt.base
	if t.rt.prefix != "" || r.URL.IsAbs() {
		u := url.URL{Path: t.path, RawPath: t.rawPath, RawQuery: r.URL.RawQuery}
		req.Target = u.RequestURI()
	}
	req.Intercepted = note
	return req
}

// answerInPlace answers a held client request itself, as a person said,
// and records both.
func (p *Proxy) answerInPlace(w http.ResponseWriter, r *http.Request, t target, recv []byte, note *capture.Intercepted, resp []byte, respNote string) {
	tap := p.beginHeld(r, t, recv, note, nil)
	x := &exchange{tap: tap, rt: t.rt}
	x.mx.begin(p.m, t.rt, r, recv, true, time.Time{})
	defer x.mx.end()
	tw := &teeWriter{ResponseWriter: w, x: x, synthesized: true}
	h := tw.Header()
	h.Set("Content-Type", protocol.ContentTypeJSON)
	h.Set("Cache-Control", "no-store")
	tw.WriteHeader(http.StatusOK)
	tap.Intercepted(protocol.ServerToClient, &capture.Intercepted{Note: respNote})
	_, _ = tw.Write(resp)
	tap.End("", false)
}

// responseBody is the JSON-RPC response a verdict answers a request with.
func responseBody(id json.RawMessage, v capture.Verdict) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	var b []byte
	if v.Action == capture.ActionFail && v.Error != nil {
		b, _ = json.Marshal(struct {
			JSONRPC string              `json:"jsonrpc"`
			ID      json.RawMessage     `json:"id"`
			Error   *protocol.ErrorInfo `json:"error"`
		}{"2.0", id, v.Error})
		return b
	}
	b, _ = json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", id, v.Result})
	return b
}

func heldText(rule string, d time.Duration) string {
	return fmt.Sprintf("held %s by the intercept rule %s", d.Round(time.Millisecond), rule)
}

// verdictText says what became of a held message, for the record.
func verdictText(rule string, d time.Duration, v capture.Verdict, what capture.HeldWhat) string {
	s := heldText(rule, d)
	by := v.By
	if by == "" {
		by = "a person"
	}
	other := "the server"
	if what == capture.HeldServerRequest || what == capture.HeldAnswer {
		other = "the client"
	}
	switch {
	case v.Stopped:
		return s + ", then forwarded unchanged: the recorder stopped while it was held"
	case v.TimedOut:
		return s + ", then forwarded unchanged: nobody decided within the intercept timeout (--intercept-timeout)"
	}
	switch v.Action {
	case capture.ActionEdit:
		s += ", then edited by " + by + " and forwarded"
		if v.Malformed {
			s += " (not JSON, on purpose)"
		}
	case capture.ActionAnswer:
		s += ", then answered by " + by + " in place of " + other + "; it went no further"
	case capture.ActionFail:
		if what == capture.HeldResponse {
			s += fmt.Sprintf(", then replaced by %s with JSON-RPC error %d: %s", by, v.Error.Code, v.Error.Message)
		} else {
			s += fmt.Sprintf(", then failed by %s with JSON-RPC error %d: %s; it went no further", by, v.Error.Code, v.Error.Message)
		}
	default:
		s += ", then forwarded unchanged by " + by
	}
	return s
}

// callInfo is what the hold points know of an exchange's client request.
type callInfo struct {
	p      *Proxy
	x      *exchange
	header http.Header // the request's header as forwarded
	target string      // its path and query, as forwarded upstream
	remote string
	// the client's single request, when the body was one
	method, name string
	id           json.RawMessage
	fwd, recv    []byte // the body as forwarded, and as received
	version      string
	modern       bool
}

func (p *Proxy) callInfo(x *exchange, out *http.Request) *callInfo {
	c := &callInfo{p: p, x: x, header: out.Header, target: x.upTarget, remote: x.remote, recv: x.recv, version: out.Header.Get(protocol.HeaderProtocolVersion)}
	if x.complete && !protocol.IsBatch(x.body) {
		m := protocol.Decode(x.body)
		if m.Kind == protocol.KindRequest {
			params, _ := protocol.ParseParams(m.Params)
			c.method, c.name, c.id, c.fwd = m.Method, params.Name, m.ID, x.body
			if c.version == "" {
				c.version = params.ProtocolVersion
			}
		}
	}
	c.modern = protocol.EraOf(c.version) == protocol.EraModern
	return c
}

// mcpSession and client say whose exchange it is, for the Intercept page
// to find the held message's session: the Mcp-Session-Id, and the
// clientInfo a 2026-07-28 request gives.
func (c *callInfo) mcpSession() string { return c.header.Get(protocol.HeaderSessionID) }

func (c *callInfo) client() string {
	if c.fwd == nil {
		return ""
	}
	params, _ := protocol.ParseParams(protocol.Decode(c.fwd).Params)
	return clientName(params)
}

func clientName(p protocol.Params) string {
	if p.ClientInfo == nil {
		return ""
	}
	return p.ClientInfo.Name
}

// interceptResponse, from ModifyResponse, takes over the body of a
// response a rule or --answer may concern; took reports that the body
// now reports its bytes to the recorder itself.
func (p *Proxy) interceptResponse(res *http.Response, x *exchange) (took bool, _ error) {
	if enc := res.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return false, nil // compressed: nothing to read without decoding the stream
	}
	c := p.callInfo(x, res.Request)
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	respRule := c.method != "" && p.icpt.Wants(capture.InterceptResponse)
	if respRule {
		_, respRule = p.icpt.Match(capture.InterceptResponse, c.method, c.name)
	}
	mrtr := c.modern && mrtrMethod(c.method) && (p.ans != nil || p.mayHoldInputs())
	switch mt {
	case protocol.ContentTypeJSON:
		if respRule || mrtr {
			return c.holdJSON(res)
		}
	case protocol.ContentTypeSSE:
		if respRule || mrtr || p.ans != nil || p.mayHoldServerRequests() || p.icpt.Wants(capture.InterceptNotification) {
			res.Body = newSSEHold(c, res.Body)
			return true, nil
		}
	}
	return false, nil
}

// mayHoldInputs reports whether a request rule could hold an
// input_required result's input requests.
func (p *Proxy) mayHoldInputs() bool {
	for _, m := range serverRequests[:3] {
		if _, ok := p.icpt.Match(capture.InterceptRequest, m, ""); ok {
			return true
		}
	}
	return false
}

// errClientGone ends an exchange whose client left while its response was
// held.
var errClientGone = errors.New("the client went away while its response was held")

// holdJSON reads a JSON response whole and settles its message before a
// byte of it goes out; took reports that the body reports itself.
func (c *callInfo) holdJSON(res *http.Response) (took bool, _ error) {
	x := c.x
	b, err := io.ReadAll(io.LimitReader(res.Body, maxHold+1))
	if err != nil || len(b) > maxHold {
		res.Body = &readCloser{Reader: io.MultiReader(bytes.NewReader(b), errOrRest(res.Body, err)), Closer: res.Body}
		return false, nil
	}
	res.Body = &readCloser{Reader: bytes.NewReader(b), Closer: res.Body}
	if protocol.IsBatch(b) {
		return false, nil
	}
	m := protocol.Decode(b)
	if !c.concerns(&m) {
		return false, nil
	}
	out, note, after := c.settle(x.ctx, &m)
	if after != nil {
		defer after() // a response carries no server request; safe all the same
	}
	if note == nil {
		return false, nil
	}
	if out == nil {
		// The client went away: nothing goes out, the record says why.
		x.tap.Response(res.StatusCode, res.Header, false)
		x.tap.Intercepted(protocol.ServerToClient, note)
		x.tap.ResponseBody(b)
		return true, errClientGone
	}
	res.Body = &tappedBody{Reader: bytes.NewReader(out), Closer: res.Body, x: x, note: note, recv: b}
	res.ContentLength = int64(len(out))
	res.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return true, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errOrRest is the rest of a body, or a reader failing with err.
func errOrRest(body io.Reader, err error) io.Reader {
	if err != nil {
		return &errReader{err}
	}
	return body
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// tappedBody is a settled JSON response: the recorder hears what came in
// and what became of it, the client gets what went on.
type tappedBody struct {
	io.Reader
	io.Closer
	x        *exchange
	note     *capture.Intercepted
	recv     []byte
	reported bool
}

func (b *tappedBody) Read(p []byte) (int, error) {
	if !b.reported {
		b.reported = true
		b.x.tap.Intercepted(protocol.ServerToClient, b.note)
		b.x.tap.ResponseBody(b.recv)
	}
	return b.Reader.Read(p)
}

// concerns reports whether a message the server sent on this exchange is
// for a rule or --answer: a cheap test, before anything waits.
func (c *callInfo) concerns(m *protocol.Message) bool {
	p := c.p
	switch m.Kind {
	case protocol.KindRequest:
		if p.ans.handles(m.Method) {
			return true
		}
		_, ok := p.icpt.Match(capture.InterceptRequest, m.Method, "")
		return ok
	case protocol.KindNotification:
		params, _ := protocol.ParseParams(m.Params)
		_, ok := p.icpt.Match(capture.InterceptNotification, m.Method, params.Name)
		return ok
	case protocol.KindResult, protocol.KindError:
		if c.method == "" || protocol.IDKey(m.ID) != protocol.IDKey(c.id) {
			return false
		}
		if _, ok := p.icpt.Match(capture.InterceptResponse, c.method, c.name); ok {
			return true
		}
		if m.Kind == protocol.KindResult && c.modern && mrtrMethod(c.method) {
			r, _ := protocol.ParseResult(m.Result)
			return r.ResultType == "input_required" && (p.ans.handlesAll(r.InputRequests) || p.holdsAnInput(r.InputRequests))
		}
	}
	return false
}

// inputRequests decodes an input_required result's inputRequests.
func inputRequests(raw json.RawMessage) map[string]inputRequest {
	var in map[string]inputRequest
	_ = json.Unmarshal(raw, &in)
	return in
}

type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// holdsAnInput reports whether a request rule holds one of the input
// requests.
func (p *Proxy) holdsAnInput(raw json.RawMessage) bool {
	for _, ir := range inputRequests(raw) {
		if _, ok := p.icpt.Match(capture.InterceptRequest, ir.Method, ""); ok {
			return true
		}
	}
	return false
}

// settle decides what becomes of a message the server sent, waiting for
// a person or answering for the client as needed. It returns the message
// to pass on to the client (nil: none), what the record says (nil: the
// message goes on untouched), and what to do once the recorder has heard
// of the message (post an answer to the server, so that the record has
// the question before its answer), or nil.
func (c *callInfo) settle(ctx context.Context, m *protocol.Message) (out []byte, note *capture.Intercepted, after func()) {
	p := c.p
	switch m.Kind {
	case protocol.KindRequest:
		var left *capture.Intercepted
		if p.ans.handles(m.Method) {
			out, note, after, ok := c.answerForClient(ctx, m)
			if ok {
				return out, note, after
			}
			left = note
		}
		rule, ok := p.icpt.Match(capture.InterceptRequest, m.Method, "")
		if !ok {
			return m.Raw, left, nil
		}
		return c.holdServerRequest(ctx, m, rule.String())
	case protocol.KindNotification:
		params, _ := protocol.ParseParams(m.Params)
		rule, _ := p.icpt.Match(capture.InterceptNotification, m.Method, params.Name)
		out, note := c.hold(ctx, m, capture.HeldNotification, rule.String())
		return out, note, nil
	}
	if m.Kind == protocol.KindResult && c.modern && mrtrMethod(c.method) {
		r, _ := protocol.ParseResult(m.Result)
		if r.ResultType == "input_required" {
			if p.ans.handlesAll(r.InputRequests) {
				out, note := c.answerRounds(ctx, m)
				return out, note, nil
			}
			for _, ir := range inputRequests(r.InputRequests) {
				if rule, ok := p.icpt.Match(capture.InterceptRequest, ir.Method, ""); ok {
					out, note := c.hold(ctx, m, capture.HeldResponse, rule.String())
					return out, note, nil
				}
			}
		}
	}
	rule, ok := p.icpt.Match(capture.InterceptResponse, c.method, c.name)
	if !ok {
		return m.Raw, nil, nil
	}
	out, note = c.hold(ctx, m, capture.HeldResponse, rule.String())
	return out, note, nil
}

// hold holds a message the server sent (a notification or a response)
// until a person decides.
func (c *callInfo) hold(ctx context.Context, m *protocol.Message, what capture.HeldWhat, rule string) ([]byte, *capture.Intercepted) {
	held := time.Now()
	hm := capture.HeldMessage{What: what, Direction: protocol.ServerToClient, Method: m.Method, Raw: m.Raw,
		Rule: rule, Upstream: c.x.rt.up.Redacted(), Version: c.version, MCPSession: c.mcpSession(), Client: c.client()}
	if what == capture.HeldResponse {
		hm.Method, hm.Name, hm.Request = c.method, c.name, c.fwd
	}
	v, err := c.p.icpt.Hold(ctx, hm)
	if err != nil {
		return nil, &capture.Intercepted{Note: heldText(rule, time.Since(held)) + "; the client went away before anyone decided, so it went nowhere"}
	}
	note := &capture.Intercepted{Note: verdictText(rule, time.Since(held), v, what)}
	switch v.Action {
	case capture.ActionEdit:
		note.Sent = []byte(v.Raw)
	case capture.ActionFail:
		note.Sent = responseBody(m.ID, v)
	default:
		return m.Raw, note
	}
	return note.Sent, note
}

// holdServerRequest holds a server's request to the client until a person
// decides: forwarded to the client (as is or edited), or answered or
// failed in the client's place, the answer posted to the server.
func (c *callInfo) holdServerRequest(ctx context.Context, m *protocol.Message, rule string) ([]byte, *capture.Intercepted, func()) {
	held := time.Now()
	v, err := c.p.icpt.Hold(ctx, capture.HeldMessage{What: capture.HeldServerRequest, Direction: protocol.ServerToClient,
		Method: m.Method, Raw: m.Raw, Rule: rule, Upstream: c.x.rt.up.Redacted(), Version: c.version, MCPSession: c.mcpSession(), Client: c.client()})
	if err != nil {
		// The client's stream ended while it was held: nobody will answer
		// the server, which would wait for ever. It gets an error saying so.
		v := capture.Verdict{Action: capture.ActionFail, Error: &protocol.ErrorInfo{Code: -32603,
			Message: "mcptape: the client's stream ended while this request was held on the Intercept page; nobody answered it"}}
		return nil, &capture.Intercepted{Note: heldText(rule, time.Since(held)) + "; the client's stream ended before anyone decided, so mcptape answered the server with an error"},
			func() {
				c.postAnswer(context.WithoutCancel(ctx), responseBody(m.ID, v), "an error: the client's stream ended while the request was held")
			}
	}
	note := &capture.Intercepted{Note: verdictText(rule, time.Since(held), v, capture.HeldServerRequest)}
	switch v.Action {
	case capture.ActionEdit:
		note.Sent = []byte(v.Raw)
		return note.Sent, note, nil
	case capture.ActionAnswer, capture.ActionFail:
		by := v.By
		if by == "" {
			by = "a person"
		}
		note.Note += "; mcptape sent the answer to the server"
		return nil, note, func() {
			c.postAnswer(context.WithoutCancel(ctx), responseBody(m.ID, v), "the answer "+by+" gave on the Intercept page, in place of the client")
		}
	}
	return m.Raw, note, nil
}
