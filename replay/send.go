package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// Send: one request to a live MCP server, in a session of its own — what
// `mcptape send` and the dashboard's "Send again" do. It opens the
// session as a client would (server/discover, falling back to initialize
// and notifications/initialized), sends the request (or a raw body,
// malformed on purpose if need be), answers what the server asks on the
// way (sampling, elicitation, roots; a 2026-07-28 input_required round by
// retrying) from a testing profile, and closes the session. Pointed at a
// recording proxy, all of it is recorded as that client's session.

// SendOptions says what to send where.
type SendOptions struct {
	// URL is the MCP endpoint, e.g. http://127.0.0.1:7411/mcp.
	URL string
	// Method and Params are the request; its id is mcptape's own.
	Method string
	Params json.RawMessage
	// Body, when set, is sent as it is instead of a request built from
	// Method and Params: bytes that are not JSON are allowed (the server's
	// answer to them is the point). Method, when set too, still names it
	// in the 2026-07-28 routing headers.
	Body []byte
	// Header is added to every request of the session (it wins over
	// mcptape's own headers, Content-Type and Mcp-Session-Id aside).
	Header http.Header
	// Version is the protocol version to speak: "" tries 2026-07-28
	// (server/discover) and falls back to initialize with 2025-11-25.
	Version string
	// Client is the clientInfo the session declares. The zero value is
	// mcptape-send.
	Client protocol.Implementation
	// Profile answers the server's sampling, elicitation and roots
	// requests (the client declares those capabilities). Nil declares
	// none, and a server that asks anyway gets an error.
	Profile *Profile
	// HTTPClient sends the requests. Nil means a client without an
	// environment proxy.
	HTTPClient *http.Client
	// Timeout bounds the whole exchange. Zero means one minute.
	Timeout time.Duration
}

// SendResult is what came back.
type SendResult struct {
	// Version is the protocol version the session spoke.
	Version string `json:"version"`
	// Status and ContentType are the HTTP answer to the request (the
	// last round's on 2026-07-28).
	Status      int    `json:"status"`
	ContentType string `json:"contentType,omitempty"`
	// Response is the JSON-RPC response to the request; nil when none
	// came (a body the server refused outright: see Body).
	Response json.RawMessage `json:"response,omitempty"`
	// Body is the answer's body when it holds no JSON-RPC response
	// (an HTTP error page, say), cut at 64 KiB.
	Body string `json:"body,omitempty"`
	// Events is everything in order: the request, what the server sent
	// on its stream, the answers mcptape gave, the retries.
	Events []SendEvent `json:"events"`
	// Rounds counts the 2026-07-28 rounds (1 without input_required).
	Rounds int `json:"rounds"`
	// Ms is how long the request took, session opening aside.
	Ms float64 `json:"ms"`
}

// SendEvent is one message of the exchange.
type SendEvent struct {
	// Dir is "c2s" or "s2c".
	Dir string `json:"dir"`
	// Message is the JSON-RPC message; Text holds instead what was sent
	// that is not JSON (a body sent malformed on purpose).
	Message json.RawMessage `json:"message,omitempty"`
	Text    string          `json:"text,omitempty"`
	// Note says what mcptape made of it ("answered from the testing
	// profile", …).
	Note string `json:"note,omitempty"`
}

// Send errors callers branch on.
var (
	// ErrSendSession is a session that could not be opened: the server
	// refused initialize (or is not an MCP server).
	ErrSendSession = errors.New("could not open a session")
)

// sendBound bounds one answer Send reads.
const sendBound = 64 << 20

type sender struct {
	o       *SendOptions
	hc      *http.Client
	sid     string
	version string
	modern  bool
	res     *SendResult
	next    int
}

// Send sends one request as SendOptions say and returns what came back.
// A server that answers the request with a JSON-RPC error, or a malformed
// body with an HTTP error, is a result, not an error; the error is for a
// session that could not be opened or a transport that failed.
func Send(ctx context.Context, o *SendOptions) (*SendResult, error) {
	if o == nil || o.URL == "" {
		return nil, errors.New("send: no URL")
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s := &sender{o: o, hc: o.HTTPClient, res: &SendResult{Events: []SendEvent{}}}
	if s.hc == nil {
		s.hc = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	defer s.close()
	s.res.Version = s.version
	start := time.Now()
	err := s.request(ctx)
	s.res.Ms = float64(time.Since(start).Microseconds()) / 1000
	return s.res, err
}

func (s *sender) client() protocol.Implementation {
	if s.o.Client.Name == "" {
		return protocol.Implementation{Name: "mcptape-send", Version: "1"}
	}
	return s.o.Client
}

func (s *sender) capabilities() map[string]any {
	caps := map[string]any{}
	if s.o.Profile != nil {
		caps["sampling"] = map[string]any{"tools": map[string]any{}}
		caps["elicitation"] = map[string]any{"form": map[string]any{}, "url": map[string]any{}}
		caps["roots"] = map[string]any{}
	}
	return caps
}

func (s *sender) id() json.RawMessage {
	s.next++
	b, _ := json.Marshal(fmt.Sprintf("mcptape-send-%d", s.next))
	return b
}

// open opens the session: server/discover (2026-07-28), else initialize.
func (s *sender) open(ctx context.Context) error {
	if s.o.Version == "" || protocol.EraOf(s.o.Version) == protocol.EraModern {
		v := s.o.Version
		if v == "" {
			v = protocol.V20260728
		}
		params := map[string]any{"_meta": s.meta(v)}
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.id(), "method": protocol.MethodDiscover, "params": params})
		s.version = v
		s.modern = true
		res, err := s.post(ctx, msg, protocol.MethodDiscover, "")
		if err == nil {
			if r := res.response(); r != nil && r.Kind == protocol.KindResult {
				pr, _ := protocol.ParseResult(r.Result)
				if slices.Contains(pr.SupportedVersions, v) {
					return nil
				}
			}
		}
		if s.o.Version != "" {
			return fmt.Errorf("%w: the server does not speak %s (server/discover: %v)", ErrSendSession, s.o.Version, errOr(err, "not offered"))
		}
	}
	s.modern = false
	s.version = s.o.Version
	if s.version == "" {
		s.version = protocol.V20251125
	}
	v := s.version
	s.version = "" // no version header on initialize itself
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.id(), "method": protocol.MethodInitialize,
		"params": map[string]any{"protocolVersion": v, "capabilities": s.capabilities(), "clientInfo": s.client()}})
	res, err := s.post(ctx, msg, protocol.MethodInitialize, "")
	if err != nil {
		return fmt.Errorf("%w: initialize: %v", ErrSendSession, err)
	}
	r := res.response()
	if r == nil || r.Kind != protocol.KindResult {
		return fmt.Errorf("%w: initialize was answered %d %s", ErrSendSession, res.status, clipBytes(res.body, 300))
	}
	pr, _ := protocol.ParseResult(r.Result)
	s.version = cmpOrStr(pr.ProtocolVersion, v)
	s.sid = res.header.Get(protocol.HeaderSessionID)
	note, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": protocol.MethodInitialized})
	_, _ = s.post(ctx, note, protocol.MethodInitialized, "")
	return nil
}

func errOr(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}

func cmpOrStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func (s *sender) meta(version string) map[string]any {
	return map[string]any{protocol.MetaProtocolVersion: version, protocol.MetaClientInfo: s.client(),
		protocol.MetaClientCapabilities: s.capabilities()}
}

// close ends a legacy session with DELETE.
func (s *sender) close() {
	if s.sid == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.o.URL, nil)
	if err != nil {
		return
	}
	s.headers(req.Header, "", "")
	if res, err := s.hc.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
	}
}

// request sends the request and answers what the server asks on the way.
func (s *sender) request(ctx context.Context) error {
	body := s.o.Body
	var id json.RawMessage
	if body == nil {
		id = s.id()
		params := json.RawMessage(bytes.TrimSpace(s.o.Params))
		if len(params) == 0 {
			params = json.RawMessage("{}")
		}
		if s.modern {
			var err error
			if params, err = withMeta(params, s.meta(s.version)); err != nil {
				return fmt.Errorf("params: %w", err)
			}
		}
		body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": s.o.Method, "params": params})
	} else if m := protocol.Decode(body); m.Kind == protocol.KindRequest {
		id = m.ID
	}
	method, name := s.o.Method, ""
	if m := protocol.Decode(body); m.Kind == protocol.KindRequest {
		method = m.Method
		p, _ := protocol.ParseParams(m.Params)
		name = p.Name
	}
	for round := 1; ; round++ {
		s.res.Rounds = round
		s.res.Events = append(s.res.Events, event("c2s", body, roundNote(round)))
		res, err := s.postAnswering(ctx, body, method, name, id)
		if err != nil {
			return err
		}
		s.res.Status, s.res.ContentType = res.status, res.contentType
		r := res.find(id)
		if r == nil {
			if res.body != nil {
				s.res.Body = clipBytes(res.body, 64<<10)
			}
			return nil
		}
		s.res.Response = r.Raw
		pr, _ := protocol.ParseResult(r.Result)
		if r.Kind != protocol.KindResult || pr.ResultType != "input_required" || s.o.Profile == nil || round >= 10 {
			return nil
		}
		// 2026-07-28: answer the input requests and retry.
		answers := map[string]json.RawMessage{}
		var ins map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(pr.InputRequests, &ins)
		for _, k := range slices.Sorted(maps.Keys(ins)) {
			a, rpcErr := s.answer(ins[k].Method, ins[k].Params)
			if rpcErr != nil {
				return nil // the input_required result is the answer
			}
			answers[k] = a
		}
		id = s.id()
		if body, err = retryRequest(body, id, answers, pr.RequestState); err != nil {
			return err
		}
	}
}

// event is a SendEvent of raw, which may not be JSON.
func event(dir string, raw []byte, note string) SendEvent {
	if json.Valid(raw) {
		return SendEvent{Dir: dir, Message: raw, Note: note}
	}
	return SendEvent{Dir: dir, Text: string(raw), Note: cmpOrStr(note, "not JSON: sent as it is")}
}

func roundNote(round int) string {
	if round == 1 {
		return ""
	}
	return fmt.Sprintf("round %d: the call retried with the answers to its input requests", round)
}

// retryRequest is the request again, under a new id, with inputResponses
// and the echoed requestState.
func retryRequest(body []byte, id json.RawMessage, answers map[string]json.RawMessage, state *string) ([]byte, error) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, err
	}
	var params map[string]json.RawMessage
	_ = json.Unmarshal(msg["params"], &params)
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	params["inputResponses"], _ = json.Marshal(answers)
	delete(params, "requestState")
	if state != nil {
		params["requestState"], _ = json.Marshal(*state)
	}
	msg["params"], _ = json.Marshal(params)
	msg["id"] = id
	return json.Marshal(msg)
}

// withMeta adds the 2026-07-28 _meta fields params lacks.
func withMeta(params json.RawMessage, meta map[string]any) (json.RawMessage, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if p == nil {
		p = map[string]json.RawMessage{}
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(p["_meta"], &m)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	for k, v := range meta {
		if _, ok := m[k]; !ok {
			m[k], _ = json.Marshal(v)
		}
	}
	p["_meta"], _ = json.Marshal(m)
	return json.Marshal(p)
}

// answer answers a server's request from the profile.
func (s *sender) answer(method string, params json.RawMessage) (json.RawMessage, *protocol.ErrorInfo) {
	p := s.o.Profile
	if p == nil {
		return nil, &protocol.ErrorInfo{Code: -32601, Message: "mcptape send: no testing profile answers " + method + " (give --profile)"}
	}
	var res json.RawMessage
	var err error
	switch method {
	case protocol.MethodSampling:
		res, err = p.AnswerSampling(params)
	case protocol.MethodElicitation:
		res, err = p.AnswerElicitation(params)
	case protocol.MethodRootsList:
		res = p.AnswerRoots()
	case protocol.MethodPing:
		res = json.RawMessage("{}")
	default:
		return nil, &protocol.ErrorInfo{Code: -32601, Message: "mcptape send does not answer " + method}
	}
	if err != nil {
		return nil, &protocol.ErrorInfo{Code: -32603, Message: "mcptape send: " + err.Error()}
	}
	return res, nil
}

// sendResponse is one HTTP answer, its messages decoded.
type sendResponse struct {
	status      int
	contentType string
	header      http.Header
	msgs        []protocol.Message
	body        []byte // when no message decoded
}

func (r *sendResponse) response() *protocol.Message {
	for i := range r.msgs {
		if r.msgs[i].Kind.IsResponse() {
			return &r.msgs[i]
		}
	}
	return nil
}

func (r *sendResponse) find(id json.RawMessage) *protocol.Message {
	for i := range r.msgs {
		m := &r.msgs[i]
		if m.Kind.IsResponse() && (id == nil || protocol.IDKey(m.ID) == protocol.IDKey(id)) {
			return m
		}
	}
	return nil
}

// headers sets a request's headers: mcptape's, then the user's.
func (s *sender) headers(h http.Header, method, name string) {
	h.Set("Content-Type", protocol.ContentTypeJSON)
	h.Set("Accept", protocol.ContentTypeJSON+", "+protocol.ContentTypeSSE)
	if s.version != "" {
		h.Set(protocol.HeaderProtocolVersion, s.version)
	}
	if s.modern && method != "" {
		h.Set(protocol.HeaderMethod, method)
		if name != "" {
			h.Set(protocol.HeaderName, protocol.EncodeHeaderValue(name))
		}
	}
	for k, vs := range s.o.Header {
		ck := http.CanonicalHeaderKey(k)
		if ck == "Content-Type" || ck == protocol.HeaderSessionID {
			continue
		}
		h[ck] = slices.Clone(vs)
	}
	if s.sid != "" {
		h.Set(protocol.HeaderSessionID, s.sid)
	}
}

func (s *sender) post(ctx context.Context, body []byte, method, name string) (*sendResponse, error) {
	return s.do(ctx, body, method, name, nil)
}

// postAnswering posts body, answering the server's requests on its stream
// until the response to id.
func (s *sender) postAnswering(ctx context.Context, body []byte, method, name string, id json.RawMessage) (*sendResponse, error) {
	return s.do(ctx, body, method, name, func(m *protocol.Message) {
		switch {
		case m.Kind == protocol.KindRequest:
			res, rpcErr := s.answer(m.Method, m.Params)
			var reply []byte
			note := "answered from the testing profile"
			if rpcErr != nil {
				reply, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": rpcErr})
				note = "answered with an error: " + rpcErr.Message
			} else {
				reply, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
			}
			s.res.Events = append(s.res.Events, SendEvent{Dir: "s2c", Message: m.Raw, Note: note}, SendEvent{Dir: "c2s", Message: reply})
			// The server waits for it before it goes on with the stream.
			if _, err := s.post(ctx, reply, "", ""); err != nil {
				s.res.Events[len(s.res.Events)-1].Note = "sending it failed: " + err.Error()
			}
		case m.Kind.IsResponse() && protocol.IDKey(m.ID) == protocol.IDKey(id):
			s.res.Events = append(s.res.Events, SendEvent{Dir: "s2c", Message: m.Raw})
		default:
			s.res.Events = append(s.res.Events, SendEvent{Dir: "s2c", Message: m.Raw})
		}
	})
}

// do posts body and reads the answer; each message of an SSE answer goes
// to each as it comes.
func (s *sender) do(ctx context.Context, body []byte, method, name string, each func(*protocol.Message)) (*sendResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	s.headers(req.Header, method, name)
	res, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out := &sendResponse{status: res.StatusCode, contentType: res.Header.Get("Content-Type"), header: res.Header}
	mt, _, _ := mime.ParseMediaType(out.contentType)
	rd := io.LimitReader(res.Body, sendBound)
	if mt == protocol.ContentTypeSSE {
		var ps protocol.SSEParser
		done := false
		emit := func(e *protocol.Event) {
			if done || !e.IsMessage() {
				return
			}
			for _, m := range protocol.Split(bytes.Clone(e.Data)) {
				out.msgs = append(out.msgs, m)
				if each != nil {
					each(&out.msgs[len(out.msgs)-1])
				}
				if m.Kind.IsResponse() {
					done = true // the stream's answer: the server closes it next
				}
			}
		}
		buf := make([]byte, 32<<10)
		for !done {
			n, err := rd.Read(buf)
			if n > 0 {
				ps.Feed(buf[:n], emit)
			}
			if err != nil {
				break
			}
		}
		ps.Close(emit)
		return out, nil
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if mt == protocol.ContentTypeJSON && len(bytes.TrimSpace(b)) > 0 {
		out.msgs = protocol.Split(b)
		if out.msgs[0].Kind == protocol.KindInvalid {
			out.msgs, out.body = nil, b
		}
		for i := range out.msgs {
			if each != nil {
				each(&out.msgs[i])
			}
		}
	} else if len(b) > 0 {
		out.body = b
	}
	return out, nil
}

// FormatSend writes a result as `mcptape send` prints it: each message,
// one per line, with its direction and mcptape's note.
func FormatSend(w io.Writer, r *SendResult) {
	fmt.Fprintf(w, "# %s, HTTP %d", r.Version, r.Status)
	if r.Rounds > 1 {
		fmt.Fprintf(w, ", %d rounds", r.Rounds)
	}
	fmt.Fprintf(w, ", %.1f ms\n", r.Ms)
	for _, e := range r.Events {
		arrow := "->"
		if e.Dir == "s2c" {
			arrow = "<-"
		}
		msg := string(e.Message)
		if e.Message == nil {
			msg = e.Text
		}
		fmt.Fprintf(w, "%s %s", arrow, strings.TrimSpace(msg))
		if e.Note != "" {
			fmt.Fprintf(w, "   # %s", e.Note)
		}
		fmt.Fprintln(w)
	}
	if r.Response == nil && r.Body != "" {
		fmt.Fprintf(w, "<- (HTTP body) %s\n", strings.TrimSpace(r.Body))
	}
}
