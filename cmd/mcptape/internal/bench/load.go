package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// The load generator speaks MCP with raw net/http: the bench measures the
// proxies, so its client should cost little and hide nothing. It checks
// every response (the right id, a result, a stream that ends with a blank
// line) and counts the JSON-RPC messages it sent and received by the same
// rules as the recorder's decoder, so the counts can be compared with what
// mcptape stored.

const (
	benchClientName = "mcptape-bench"
	versionModern   = "2026-07-28"
	versionLegacy   = "2025-11-25"
	// samplingAnswer is the model's text in every sampling answer.
	samplingAnswer = "bench answer"
)

// Kinds of failed call, as counted in the report.
const (
	errTransport = "transport" // no response: connection refused or reset
	errHTTP      = "http"      // an unexpected status
	errTruncated = "truncated" // the body or stream ended early
	errNoResult  = "no-result" // the stream ended without the call's result
	errWrongID   = "wrong-id"  // a response to another request
	errRPC       = "rpc-error" // a JSON-RPC error instead of a result
	errBad       = "bad-result"
)

// callError is a failed call and why.
type callError struct{ kind, msg string }

func (e *callError) Error() string { return e.kind + ": " + e.msg }

func failf(kind, format string, a ...any) error {
	return &callError{kind: kind, msg: fmt.Sprintf(format, a...)}
}

func errKind(err error) string {
	var ce *callError
	if errors.As(err, &ce) {
		return ce.kind
	}
	return errTransport
}

// worker is one concurrent caller against one target. Only its own
// goroutine uses it.
type worker struct {
	env     *benchEnv
	t       *target
	session string // Mcp-Session-Id on the stateful endpoint
	broken  error  // setup failed: the worker makes no calls

	// sent and recv count JSON-RPC messages (and SSE frames, which the
	// recorder stores as messages too) that crossed the target.
	sent, recv int64
	// cursor is the next call of the replay tape (replay scenario).
	cursor int

	sse protocol.SSEParser
	buf []byte
}

func (e *benchEnv) newWorker(t *target) *worker {
	return &worker{env: e, t: t}
}

// sample is what one successful call measured.
type sample struct {
	lat   time.Duration // request sent → response complete
	first time.Duration // the first progress event: the server's send → its receipt here
}

// exchange sends one HTTP request and reads the whole response, calling
// onMessage for each JSON-RPC message in it (a JSON body or an SSE message
// event). A non-nil error from onMessage fails the call, but the response is
// still read to its end so that the message counts stay exact.
func (w *worker) exchange(ctx context.Context, method, path string, hdr map[string]string, body []byte, onMessage func([]byte) error) (http.Header, error) {
	var rd io.Reader = http.NoBody
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.t.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
		w.sent += int64(countMessages(body))
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := w.t.hc.Do(req)
	if err != nil {
		return nil, failf(errTransport, "%v", err)
	}
	defer res.Body.Close()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		err := w.readSSE(res.Body, onMessage)
		if err == nil && res.StatusCode != http.StatusOK {
			err = failf(errHTTP, "%s with an SSE stream", res.Status)
		}
		return res.Header, err
	}
	b, rerr := io.ReadAll(res.Body)
	if len(b) > 0 {
		w.recv += int64(countMessages(b))
	}
	switch {
	case rerr != nil:
		return res.Header, failf(errTruncated, "reading the %s body: %v", res.Status, rerr)
	case res.StatusCode == http.StatusOK && len(b) > 0 && onMessage != nil:
		return res.Header, onMessage(b)
	case res.StatusCode/100 == 2:
		return res.Header, nil
	}
	return res.Header, failf(errHTTP, "%s: %s", res.Status, excerpt(b))
}

// countMessages is how many messages the recorder's decoder makes of a
// body or an SSE data payload: one per batch element, else one.
func countMessages(b []byte) int {
	if protocol.IsBatch(b) {
		return len(protocol.Split(b))
	}
	return 1
}

// readSSE reads an SSE stream to its end with protocol's parser, the
// recorder's own. Like the recorder, it counts every block: a message event
// as its messages, any other block (a priming event, a comment) as one
// frame.
func (w *worker) readSSE(body io.Reader, onMessage func([]byte) error) error {
	p := &w.sse
	p.Reset()
	p.MaxEventSize = maxEvent
	var cbErr error
	unterminated := false
	emit := func(e *protocol.Event) {
		if e.Unterminated {
			unterminated = true
		}
		if !e.IsMessage() || e.Unterminated || e.Oversize {
			w.recv++
			return
		}
		w.recv += int64(countMessages(e.Data))
		if cbErr == nil && onMessage != nil {
			cbErr = onMessage(e.Data)
		}
	}
	if w.buf == nil {
		w.buf = make([]byte, 32<<10)
	}
	for {
		n, err := body.Read(w.buf)
		p.Feed(w.buf[:n], emit)
		if err == nil {
			continue
		}
		p.Close(emit)
		switch {
		case unterminated:
			// The recorder stores the unterminated block as well.
			return failf(errTruncated, "the stream ended inside an SSE event (%v)", err)
		case err != io.EOF:
			return failf(errTruncated, "reading the stream: %v", err)
		}
		return cbErr
	}
}

// maxEvent bounds one SSE event the load generator reads: above any
// result size the bench asks for.
const maxEvent = 1 << 30

// rpcMsg is the part of a JSON-RPC message the checks look at.
type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	// headOnly is set when only the head of a large message was decoded:
	// Result then holds just its first byte.
	headOnly bool
}

// bigMessage is the size above which a result is checked by its head only
// (id, and that a result follows), so that checking a 10 MiB result does
// not cost the load generator more than the proxies.
const bigMessage = 64 << 10

func decodeMsg(data []byte) (*rpcMsg, error) {
	var m rpcMsg
	if len(data) > bigMessage {
		if ok, err := decodeHead(data, &m); ok || err != nil {
			return &m, err
		}
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, failf(errBad, "not a JSON-RPC message: %v: %s", err, excerpt(data))
	}
	return &m, nil
}

// decodeHead reads a large message's members up to "result" and checks
// that the message closes; m.Result is then just the value's first byte.
// ok is false when the head is not in the expected order.
func decodeHead(data []byte, m *rpcMsg) (ok bool, err error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[len(trimmed)-1] != '}' {
		return false, failf(errTruncated, "the message does not end with }")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false, nil
	}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey {
			return false, nil
		}
		if key == "result" {
			if m.ID == nil {
				return false, nil
			}
			m.Result, m.headOnly = json.RawMessage(`{`), true
			return true, nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false, nil
		}
		switch key {
		case "id":
			m.ID = v
		case "method", "error":
			return false, nil
		}
	}
	return false, nil
}

// call tracks the response stream of one request.
type call struct {
	id     string
	result *rpcMsg
	size   int
}

// response handles a message that is not a notification or a server
// request: it must be the one result for the call's id.
func (c *call) response(m *rpcMsg, size int) error {
	switch {
	case c.result != nil:
		return failf(errBad, "a second response on the stream")
	case string(m.ID) != c.id:
		return failf(errWrongID, "response id %s, want %s", m.ID, c.id)
	case m.Error != nil:
		return failf(errRPC, "%d %s", m.Error.Code, m.Error.Message)
	case m.Result == nil:
		return failf(errBad, "a response without a result")
	}
	c.result, c.size = m, size
	return nil
}

func (c *call) done(err error) error {
	if err == nil && c.result == nil {
		return failf(errNoResult, "the stream ended without the response to id %s", c.id)
	}
	return err
}

// toolResult is the part of a tools/call result the checks look at.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError       bool            `json:"isError"`
	ResultType    string          `json:"resultType"`
	RequestState  json.RawMessage `json:"requestState"`
	InputRequests map[string]struct {
		Method string `json:"method"`
	} `json:"inputRequests"`
}

func (c *call) tool() (*toolResult, error) {
	var r toolResult
	if err := json.Unmarshal(c.result.Result, &r); err != nil {
		return nil, failf(errBad, "tools/call result: %v", err)
	}
	if r.IsError {
		return nil, failf(errBad, "tool error: %+v", r.Content)
	}
	return &r, nil
}

func (r *toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func (w *worker) nextID() (int64, string) {
	n := w.env.nextID.Add(1)
	return n, strconv.FormatInt(n, 10)
}

// modernMeta is the _meta every 2026-07-28 request carries, with more
// members of it if given (each `"name":value`).
func modernMeta(caps string, progressToken string, members ...string) string {
	info, _ := json.Marshal(map[string]string{"name": benchClientName, "version": mcptapeVersion})
	s := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + versionModern + `",` +
		`"io.modelcontextprotocol/clientCapabilities":` + caps + `,` +
		`"io.modelcontextprotocol/clientInfo":` + string(info)
	if progressToken != "" {
		s += `,"progressToken":"` + progressToken + `"`
	}
	for _, m := range members {
		s += "," + m
	}
	return s + "}"
}

// toolCall is a 2026-07-28 tools/call body; extra, if not empty, is more
// members of params, each followed by a comma.
func toolCall(id, name, args, extra, meta string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name +
		`","arguments":` + args + `,` + extra + meta + `}}`)
}

func modernHeaders(tool string) map[string]string {
	return map[string]string{
		"Mcp-Protocol-Version": versionModern,
		"Mcp-Method":           "tools/call",
		"Mcp-Name":             tool,
	}
}

func (w *worker) legacyHeaders() map[string]string {
	return map[string]string{"Mcp-Protocol-Version": versionLegacy, "Mcp-Session-Id": w.session}
}

// modernCall makes one 2026-07-28 tools/call and returns its result.
// onNotify, if not nil, sees each notification on the stream.
func (w *worker) modernCall(ctx context.Context, tool string, body []byte, id string, onNotify func(*rpcMsg) error) (*call, error) {
	c := &call{id: id}
	_, err := w.exchange(ctx, http.MethodPost, pathStateless, modernHeaders(tool), body, func(data []byte) error {
		m, err := decodeMsg(data)
		if err != nil {
			return err
		}
		if m.Method != "" {
			if m.ID != nil {
				return failf(errBad, "a 2026-07-28 server sent a request (%s) on the stream", m.Method)
			}
			if onNotify != nil {
				return onNotify(m)
			}
			return nil
		}
		return c.response(m, len(data))
	})
	return c, c.done(err)
}

func (w *worker) callEcho(ctx context.Context) (sample, error) {
	_, id := w.nextID()
	return w.echo(ctx, id, "mcptape-bench-echo-"+id)
}

// echo calls the echo tool with text and checks that it comes back.
func (w *worker) echo(ctx context.Context, id, text string) (sample, error) {
	start := time.Now()
	c, err := w.modernCall(ctx, fixtures.ToolEcho, toolCall(id, fixtures.ToolEcho, `{"text":"`+text+`"}`, "", modernMeta("{}", "")), id, nil)
	lat := time.Since(start)
	if err != nil {
		return sample{}, err
	}
	r, err := c.tool()
	if err != nil {
		return sample{}, err
	}
	if got := r.text(); got != text {
		return sample{}, failf(errBad, "echo returned %q, want %q", got, text)
	}
	return sample{lat: lat}, nil
}

// callSlow calls the slow tool, which sends steps progress notifications
// spread over its run time, and times the first.
func (w *worker) callSlow(ctx context.Context) (sample, error) {
	cfg := w.env.cfg
	_, id := w.nextID()
	token := "bench-" + id
	args := fmt.Sprintf(`{"duration_ms":%d,"steps":%d}`, cfg.SSEDuration.Milliseconds(), cfg.SSESteps)
	var first time.Duration
	progress := 0
	start := time.Now()
	meta := modernMeta("{}", token, `"`+fixtures.MetaStamp+`":true`)
	c, err := w.modernCall(ctx, fixtures.ToolSlow, toolCall(id, fixtures.ToolSlow, args, "", meta), id, func(m *rpcMsg) error {
		if m.Method != "notifications/progress" {
			return nil
		}
		got := time.Now()
		var p struct {
			ProgressToken string                     `json:"progressToken"`
			Meta          map[string]json.RawMessage `json:"_meta"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.ProgressToken != token {
			return failf(errBad, "progress for token %s, want %s", m.Params, token)
		}
		if progress == 0 {
			// From the server's send to our receipt: how late the
			// server's timer fired is not the proxy's doing.
			var sent int64
			if json.Unmarshal(p.Meta[fixtures.MetaSentAt], &sent) != nil || sent <= 0 {
				return failf(errBad, "progress without %s in its _meta: %s", fixtures.MetaSentAt, m.Params)
			}
			first = got.Sub(time.Unix(0, sent))
		}
		progress++
		return nil
	})
	lat := time.Since(start)
	if err != nil {
		return sample{}, err
	}
	if _, err := c.tool(); err != nil {
		return sample{}, err
	}
	if progress != cfg.SSESteps {
		return sample{}, failf(errBad, "%d progress notifications, want %d", progress, cfg.SSESteps)
	}
	return sample{lat: lat, first: first}, nil
}

// callBig asks the big tool for n bytes.
func (w *worker) callBig(ctx context.Context, n int) (sample, error) {
	_, id := w.nextID()
	start := time.Now()
	c, err := w.modernCall(ctx, fixtures.ToolBig, toolCall(id, fixtures.ToolBig, fmt.Sprintf(`{"bytes":%d}`, n), "", modernMeta("{}", "")), id, nil)
	lat := time.Since(start)
	if err != nil {
		return sample{}, err
	}
	if c.size < n {
		return sample{}, failf(errBad, "a %d-byte result message for %d bytes of text", c.size, n)
	}
	if !c.result.headOnly {
		r, err := c.tool()
		if err != nil {
			return sample{}, err
		}
		if len(r.text()) != n {
			return sample{}, failf(errBad, "%d bytes of text, want %d", len(r.text()), n)
		}
	}
	return sample{lat: lat}, nil
}

// callMRTR is a 2026-07-28 multi round-trip call of the sample tool: the
// first round answers input_required with a sampling request, the retry
// carries the answer and the echoed requestState.
func (w *worker) callMRTR(ctx context.Context) (sample, error) {
	meta := modernMeta(`{"sampling":{}}`, "")
	_, id := w.nextID()
	start := time.Now()
	c, err := w.modernCall(ctx, fixtures.ToolSample, toolCall(id, fixtures.ToolSample, `{"prompt":"mcptape bench `+id+`"}`, "", meta), id, nil)
	if err != nil {
		return sample{}, err
	}
	r, err := c.tool()
	if err != nil {
		return sample{}, err
	}
	if r.ResultType != "input_required" || len(r.RequestState) == 0 || r.InputRequests["sample"].Method != "sampling/createMessage" {
		return sample{}, failf(errBad, "round 1: want input_required with a sampling request, got %s", excerpt(c.result.Result))
	}
	_, id2 := w.nextID()
	extra := `"inputResponses":{"sample":{"role":"assistant","content":{"type":"text","text":"` + samplingAnswer + `"},` +
		`"model":"` + benchClientName + `","stopReason":"endTurn"}},"requestState":` + string(r.RequestState) + `,`
	c, err = w.modernCall(ctx, fixtures.ToolSample, toolCall(id2, fixtures.ToolSample, `{"prompt":"mcptape bench `+id+`"}`, extra, meta), id2, nil)
	lat := time.Since(start)
	if err != nil {
		return sample{}, err
	}
	if r, err = c.tool(); err != nil {
		return sample{}, err
	}
	if r.ResultType != "complete" || r.text() != samplingAnswer {
		return sample{}, failf(errBad, "round 2: want the sampled text, got %s", excerpt(c.result.Result))
	}
	return sample{lat: lat}, nil
}

// initLegacy opens a 2025-11-25 session on the stateful endpoint for the
// sampling scenario.
func (w *worker) initLegacy(ctx context.Context) error {
	info, _ := json.Marshal(map[string]string{"name": benchClientName, "version": mcptapeVersion})
	_, id := w.nextID()
	body := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"initialize","params":{"protocolVersion":"` + versionLegacy +
		`","capabilities":{"sampling":{}},"clientInfo":` + string(info) + `}}`)
	c := &call{id: id}
	hdr, err := w.exchange(ctx, http.MethodPost, pathStateful, nil, body, func(data []byte) error {
		m, err := decodeMsg(data)
		if err != nil {
			return err
		}
		return c.response(m, len(data))
	})
	if err = c.done(err); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if w.session = hdr.Get("Mcp-Session-Id"); w.session == "" {
		return errors.New("initialize: no Mcp-Session-Id in the response")
	}
	if _, err := w.exchange(ctx, http.MethodPost, pathStateful, w.legacyHeaders(),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	return nil
}

// closeLegacy ends the worker's session.
func (w *worker) closeLegacy(ctx context.Context) error {
	if w.session == "" {
		return nil
	}
	_, err := w.exchange(ctx, http.MethodDelete, pathStateful, w.legacyHeaders(), nil, nil)
	w.session = ""
	return err
}

// callSampling is a 2025-11-25 sampling round trip: tools/call sample, the
// server's sampling/createMessage on the call's stream, the answer POSTed
// back, then the result on the same stream.
func (w *worker) callSampling(ctx context.Context) (sample, error) {
	_, id := w.nextID()
	body := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + fixtures.ToolSample +
		`","arguments":{"prompt":"mcptape bench ` + id + `"}}}`)
	c := &call{id: id}
	asked := 0
	start := time.Now()
	_, err := w.exchange(ctx, http.MethodPost, pathStateful, w.legacyHeaders(), body, func(data []byte) error {
		m, err := decodeMsg(data)
		if err != nil {
			return err
		}
		switch {
		case m.Method == "sampling/createMessage" && m.ID != nil:
			asked++
			answer := []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"` +
				samplingAnswer + `"},"model":"` + benchClientName + `","stopReason":"endTurn"}}`)
			if _, err := w.exchange(ctx, http.MethodPost, pathStateful, w.legacyHeaders(), answer, nil); err != nil {
				return fmt.Errorf("answering sampling/createMessage: %w", err)
			}
			return nil
		case m.Method != "":
			return nil
		}
		return c.response(m, len(data))
	})
	lat := time.Since(start)
	if err = c.done(err); err != nil {
		return sample{}, err
	}
	r, err := c.tool()
	if err != nil {
		return sample{}, err
	}
	if asked != 1 || r.text() != samplingAnswer {
		return sample{}, failf(errBad, "%d sampling requests and result %q, want 1 and %q", asked, r.text(), samplingAnswer)
	}
	return sample{lat: lat}, nil
}
