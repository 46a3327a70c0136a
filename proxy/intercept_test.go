package proxy_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

// interceptRig is the fixture server behind a recording proxy on a Badger
// store on disk, with intercept rules and, optionally, --answer.
func interceptRig(t *testing.T, h http.Handler, rules []string, ans *proxy.ClientAnswers) (*rig, *capture.Interceptor) {
	t.Helper()
	var rs []capture.InterceptRule
	for _, s := range rules {
		r, err := capture.ParseInterceptRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	icpt, err := capture.NewInterceptor(rs, &capture.InterceptorOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if h == nil {
		h = fixtures.Handler(nil)
	}
	r := newRig(t, h, &rigOptions{store: store, proxy: &proxy.Options{Intercept: icpt, Answer: ans}})
	t.Cleanup(func() { icpt.Close(); r.px.CloseClientConnections(); r.up.CloseClientConnections() })
	return r, icpt
}

// connect opens a go-sdk client session through the proxy. The client
// declares no sampling, elicitation or roots capability: it has no
// handlers. version pins the protocol ("" lets go-sdk negotiate).
func connect(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bare-client", Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// nextHeld waits for a held message.
func nextHeld(t *testing.T, icpt *capture.Interceptor) capture.HeldMessage {
	t.Helper()
	var held capture.HeldMessage
	fixtures.Eventually(t, 20*time.Second, func() error {
		h := icpt.Held()
		if len(h) == 0 {
			return errors.New("nothing was held")
		}
		held = h[0]
		return nil
	})
	return held
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

func callAsync(cs *mcp.ClientSession, name string, args map[string]any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		ch <- callResult{res, err}
	}()
	return ch
}

func resultText(r callResult) string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	var parts []string
	for _, c := range r.res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestInterceptEditRequest: a tools/call held by its rule, edited by a
// person, reaches the server edited (echo returns what it got) and the
// client gets the answer to the edit; other calls pass; the record keeps
// the call as the client sent it and as the server got it.
func TestInterceptEditRequest(t *testing.T) {
	for _, era := range []struct{ name, path, version string }{
		{"legacy", fixtures.PathStateful, protocol.V20251125},
		{"modern", fixtures.PathStateless, ""},
	} {
		t.Run(era.name, func(t *testing.T) {
			r, icpt := interceptRig(t, nil, []string{"tools/call:ech*"}, nil)
			cs := connect(t, r.px.URL+era.path, era.version)
			if res := resultText(<-callAsync(cs, "add", map[string]any{"a": 1, "b": 2})); res != "1 + 2 = 3" {
				t.Fatalf("add, which no rule holds: %q", res)
			}
			got := callAsync(cs, "echo", map[string]any{"text": "from the client"})
			h := nextHeld(t, icpt)
			if h.What != capture.HeldRequest || h.Method != "tools/call" || h.Name != "echo" || h.Rule != "tools/call:ech*" ||
				!strings.Contains(string(h.Raw), "from the client") {
				t.Fatalf("held: %+v raw %s", h, h.Raw)
			}
			select {
			case r := <-got:
				t.Fatalf("the call returned while held: %q", resultText(r))
			case <-time.After(100 * time.Millisecond):
			}
			edited := strings.Replace(string(h.Raw), "from the client", "edited by a person", 1)
			if err := icpt.Decide(h.ID, capture.Verdict{Action: capture.ActionEdit, Raw: edited}); err != nil {
				t.Fatal(err)
			}
			if res := resultText(<-got); res != "edited by a person" {
				t.Fatalf("the client got %q, want the server's answer to the edit", res)
			}
			r.sync(t)
			var call *capture.Message
			for _, m := range r.all(t) {
				if m.Kind == protocol.KindRequest && m.Method == "tools/call" && m.Name == "echo" {
					call = m
				}
			}
			if call == nil || call.Edited != 1 || !strings.Contains(string(call.Raw), "edited by a person") || !heldFinding(call, "edited by a person and forwarded") {
				t.Fatalf("the recorded call: %+v", call)
			}
			versions, err := r.store.(capture.Editor).MessageEdits(context.Background(), call.Seq)
			if err != nil || len(versions) != 2 || !strings.Contains(string(versions[0].Raw), "from the client") {
				t.Fatalf("versions: %+v, %v", versions, err)
			}
		})
	}
}

func heldFinding(m *capture.Message, text string) bool {
	for _, f := range m.Findings {
		if f.Kind == capture.FindingIntercepted && strings.Contains(f.Message, text) {
			return true
		}
	}
	return false
}

// TestInterceptAnswerAndFail: a held request answered in place of the
// server never reaches it; a held response replaced by a JSON-RPC error
// reaches the client as that error.
func TestInterceptAnswerAndFail(t *testing.T) {
	r, icpt := interceptRig(t, nil, []string{"tools/call:echo", "response:tools/call:add"}, nil)
	cs := connect(t, r.px.URL+fixtures.PathStateful, protocol.V20251125)

	got := callAsync(cs, "echo", map[string]any{"text": "never sent"})
	h := nextHeld(t, icpt)
	if err := icpt.Decide(h.ID, capture.Verdict{Action: capture.ActionAnswer, Result: json.RawMessage(`{"content":[{"type":"text","text":"answered by hand"}]}`)}); err != nil {
		t.Fatal(err)
	}
	if res := resultText(<-got); res != "answered by hand" {
		t.Fatalf("answered in place: the client got %q", res)
	}

	got = callAsync(cs, "add", map[string]any{"a": 2, "b": 3})
	h = nextHeld(t, icpt)
	if h.What != capture.HeldResponse || !strings.Contains(string(h.Raw), "2 + 3 = 5") || !strings.Contains(string(h.Request), `"add"`) {
		t.Fatalf("held response: %+v raw %s", h, h.Raw)
	}
	if err := icpt.Decide(h.ID, capture.Verdict{Action: capture.ActionFail, Error: &protocol.ErrorInfo{Code: -32001, Message: "failed by hand"}}); err != nil {
		t.Fatal(err)
	}
	if res := resultText(<-got); !strings.Contains(res, "failed by hand") {
		t.Fatalf("failed response: the client got %q", res)
	}
	r.sync(t)
	var echoCalls, answered, replaced int
	for _, m := range r.all(t) {
		if m.Kind == protocol.KindRequest && m.Method == "tools/call" && m.Name == "echo" {
			echoCalls++
			if !heldFinding(m, "answered by a person in place of the server") {
				t.Errorf("the echo call's findings: %+v", m.Findings)
			}
		}
		if m.Kind == protocol.KindResult && heldFinding(m, "in place of the server") {
			answered++
		}
		if m.Direction == protocol.ServerToClient && m.Name == "add" && heldFinding(m, "replaced by a person with JSON-RPC error -32001: failed by hand") {
			replaced++
			// As received (version 0) a result; as the client got it an error.
			if m.Kind != protocol.KindResult || m.Edited != 1 || !strings.Contains(string(m.Raw), "failed by hand") {
				t.Errorf("the replaced response: %+v raw %s", m, m.Raw)
			}
		}
	}
	if echoCalls != 1 || answered != 1 || replaced != 1 {
		t.Errorf("%d echo calls, %d answers marked as a person's, %d responses replaced", echoCalls, answered, replaced)
	}
}

// TestInterceptServerRequest: a sampling request the server sends on the
// call's SSE stream is held; answered by a person, the answer goes to the
// server (the tool returns it) and never to the client, which has no
// sampling handler at all.
func TestInterceptServerRequest(t *testing.T) {
	r, icpt := interceptRig(t, nil, []string{"sampling/createMessage"}, nil)
	cs := connect(t, r.px.URL+fixtures.PathStateful, protocol.V20251125)
	got := callAsync(cs, "sample", map[string]any{"prompt": "what is 2+2?"})
	h := nextHeld(t, icpt)
	if h.What != capture.HeldServerRequest || h.Method != protocol.MethodSampling || !strings.Contains(string(h.Raw), "what is 2+2?") {
		t.Fatalf("held: %+v", h)
	}
	if err := icpt.Decide(h.ID, capture.Verdict{Action: capture.ActionAnswer,
		Result: json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"four, by hand"},"model":"a-person"}`)}); err != nil {
		t.Fatal(err)
	}
	if res := resultText(<-got); res != "four, by hand" {
		t.Fatalf("the tool returned %q, want the person's answer", res)
	}
	r.sync(t)
	var req, answer *capture.Message
	for _, m := range r.all(t) {
		switch {
		case m.Kind == protocol.KindRequest && m.Method == protocol.MethodSampling:
			req = m
		case m.Direction == protocol.ClientToServer && m.Kind == protocol.KindResult:
			answer = m
		}
	}
	if req == nil || !heldFinding(req, "answered by a person in place of the client") {
		t.Fatalf("the sampling request: %+v", req)
	}
	if answer == nil || answer.Links.Request != req.Seq || !heldFinding(answer, "sent by mcptape, not by the client") {
		for _, m := range r.all(t) {
			t.Logf("%d %s %v %v %s %s %+v", m.Seq, m.SessionID, m.Direction, m.Kind, m.Method, m.Raw, m.Findings)
		}
		t.Fatalf("the answer: %+v", answer)
	}
}

// profileAnswers answers sampling as a testing profile would: a fixed
// text, the model picked by the request's first model hint.
func profileAnswers() *proxy.ClientAnswers {
	return &proxy.ClientAnswers{
		Methods: map[string]string{protocol.MethodSampling: "--answer sampling=profile:test"},
		Answer: func(ctx context.Context, q proxy.AnswerQuestion) (proxy.AnswerReply, error) {
			var p struct {
				Messages []struct {
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			_ = json.Unmarshal(q.Params, &p)
			if len(p.Tools) > 0 && len(p.Messages) == 1 {
				return proxy.AnswerReply{Result: json.RawMessage(`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}],"model":"mock","stopReason":"toolUse"}`)}, nil
			}
			return proxy.AnswerReply{Result: json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":{"type":"text","text":"mock answer (%s)"},"model":"mock","stopReason":"endTurn"}`, q.Key))}, nil
		},
	}
}

// TestAnswerSampling: with --answer sampling, a client that declares no
// sampling capability completes the fixture's sample and sample_tools on
// both eras: a legacy server→client request answered by a POST of the
// proxy's own, a 2026-07-28 round answered by retrying the call.
func TestAnswerSampling(t *testing.T) {
	for _, era := range []struct{ name, path, version, key string }{
		{"legacy", fixtures.PathStateful, protocol.V20251125, ""},
		{"modern", fixtures.PathStateless, "", "sample"},
	} {
		t.Run(era.name, func(t *testing.T) {
			r, _ := interceptRig(t, nil, nil, profileAnswers())
			cs := connect(t, r.px.URL+era.path, era.version)
			if res := resultText(<-callAsync(cs, "sample", map[string]any{"prompt": "hi"})); res != "mock answer ("+era.key+")" {
				t.Errorf("sample: %q", res)
			}
			if res := resultText(<-callAsync(cs, "sample_tools", map[string]any{"question": "weather in Paris?"})); !strings.HasPrefix(res, "mock answer") {
				t.Errorf("sample_tools: %q", res)
			}
			r.sync(t)
			var added, answered, sent int
			for _, m := range r.all(t) {
				// The server saw the capability mcptape added: asking for
				// sampling is no fault of the server's.
				for _, f := range m.Findings {
					if f.Kind == capture.FindingCapability {
						t.Errorf("message %d (%s): a capability finding for the capability mcptape added: %s", m.Seq, m.Method, f.Message)
					}
				}
				switch {
				case heldFinding(m, "--answer added the sampling capability"):
					added++
				case heldFinding(m, "answered by mcptape for the client"), heldFinding(m, "input_required answered by mcptape"):
					answered++
				case heldFinding(m, "sent by mcptape, not by the client"):
					sent++
				}
			}
			// sample: one round answered; sample_tools: two (one
			// input_required result answered with two retries on
			// 2026-07-28, two server→client requests on the legacy era).
			if added == 0 || answered < 2 || sent < 3 {
				t.Errorf("marked in the record: %d capability additions, %d answered, %d sent by mcptape", added, answered, sent)
			}
		})
	}
}

// TestInterceptStreamNotBuffered: a server sends 20 SSE events, each only
// once the client has read the one before; a rule holds the 5th. The other
// 19 reach the client as the server sends them (were one held back or
// batched, the server would wait for it in vain), while the 5th waits
// until the test releases it after the 20th has arrived.
func TestInterceptStreamNotBuffered(t *testing.T) {
	const n = 20
	read := make(chan int, n)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", protocol.ContentTypeSSE)
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		for i := 1; i <= n; i++ {
			method := "notifications/message"
			if i == 5 {
				method = "notifications/held"
			}
			fmt.Fprintf(w, "id: %d\ndata: {\"jsonrpc\":\"2.0\",\"method\":%q,\"params\":{\"i\":%d}}\n\n", i, method, i)
			fl.Flush()
			if i == 5 {
				continue
			}
			select {
			case <-read:
			case <-time.After(10 * time.Second):
				t.Errorf("event %d did not reach the client within 10 s of the server sending it", i)
				return
			}
		}
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	})
	r, icpt := interceptRig(t, h, []string{"notification:notifications/held"}, nil)
	req, _ := http.NewRequest(http.MethodPost, r.px.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stream"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	order := []int{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") || !strings.Contains(line, `"i":`) {
			continue
		}
		var m struct {
			Params struct{ I int } `json:"params"`
		}
		_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m)
		order = append(order, m.Params.I)
		if m.Params.I == 5 {
			continue
		}
		read <- m.Params.I
		if m.Params.I == n {
			// Event 5 is held by a goroutine of its own, which may reach
			// the queue after the stream has gone past it.
			nextHeld(t, icpt)
			held := icpt.Held()
			if len(held) != 1 || !strings.Contains(string(held[0].Raw), "notifications/held") {
				t.Fatalf("held when the 20th event arrived: %+v", held)
			}
			if err := icpt.Decide(held[0].ID, capture.Verdict{Action: capture.ActionForward}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(order) != n || order[n-1] != 5 {
		t.Fatalf("events arrived in the order %v; want 1-4, 6-20, then 5", order)
	}
}

// TestInterceptTimeout: a held request nobody decides goes on unchanged
// once the intercept timeout passes, and the record says so.
func TestInterceptTimeout(t *testing.T) {
	r, icpt := interceptRig(t, nil, []string{"tools/call:echo"}, nil)
	// The rig's queue waits a minute; this one 150 ms.
	short, err := capture.NewInterceptor(icpt.Rules(), &capture.InterceptorOptions{Timeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	up, _ := url.Parse(r.up.URL)
	p, err := proxy.New(&proxy.Options{Upstream: up, Recorder: r.rec, Intercept: short})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	t.Cleanup(px.Close)
	cs := connect(t, px.URL+fixtures.PathStateful, protocol.V20251125)
	start := time.Now()
	if res := resultText(<-callAsync(cs, "echo", map[string]any{"text": "nobody decided"})); res != "nobody decided" {
		t.Fatalf("after the timeout the client got %q", res)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("the call returned after %v, before the timeout", d)
	}
	r.sync(t)
	found := false
	for _, m := range r.all(t) {
		found = found || m.Kind == protocol.KindRequest && heldFinding(m, "forwarded unchanged: nobody decided within the intercept timeout")
	}
	if !found {
		t.Error("the record does not say the held call timed out")
	}
}

// TestInterceptStop: when the recorder stops, what is held goes on
// unchanged, and the record says the recorder stopped.
func TestInterceptStop(t *testing.T) {
	r, icpt := interceptRig(t, nil, []string{"response:tools/call:echo"}, nil)
	cs := connect(t, r.px.URL+fixtures.PathStateful, protocol.V20251125)
	got := callAsync(cs, "echo", map[string]any{"text": "held at the stop"})
	nextHeld(t, icpt)
	icpt.Close()
	if res := resultText(<-got); res != "held at the stop" {
		t.Fatalf("the client got %q", res)
	}
	r.sync(t)
	found := false
	for _, m := range r.all(t) {
		found = found || m.Kind == protocol.KindResult && heldFinding(m, "forwarded unchanged: the recorder stopped while it was held")
	}
	if !found {
		t.Error("the record does not say the recorder stopped while the answer was held")
	}
}

// TestInterceptRoute: the hold points are the policy layer's, so they
// serve a named route as they serve the single upstream: a call through
// /NAME/ is held, edited and answered by its own server, and answering
// for the client posts to that server's path.
func TestInterceptRoute(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	t.Cleanup(up.Close)
	t.Cleanup(up.CloseClientConnections)
	rules, _ := capture.ParseInterceptRule("tools/call:echo")
	icpt, err := capture.NewInterceptor([]capture.InterceptRule{rules}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(icpt.Close)
	u, _ := url.Parse(up.URL)
	rec, err := capture.NewRecorder(context.Background(), memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	p, err := proxy.New(&proxy.Options{Routes: []proxy.Route{{Name: "weather", Upstream: u}}, Recorder: rec, Intercept: icpt, Answer: profileAnswers()})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	t.Cleanup(px.Close)
	cs := connect(t, px.URL+"/weather"+fixtures.PathStateful, protocol.V20251125)
	got := callAsync(cs, "echo", map[string]any{"text": "through a route"})
	h := nextHeld(t, icpt)
	if h.Upstream != up.URL {
		t.Errorf("held from %q, want the route's upstream %q", h.Upstream, up.URL)
	}
	if err := icpt.Decide(h.ID, capture.Verdict{Action: capture.ActionEdit, Raw: strings.Replace(string(h.Raw), "through a route", "edited on a route", 1)}); err != nil {
		t.Fatal(err)
	}
	if res := resultText(<-got); res != "edited on a route" {
		t.Errorf("the client got %q", res)
	}
	if res := resultText(<-callAsync(cs, "sample", map[string]any{"prompt": "x"})); res != "mock answer ()" {
		t.Errorf("sample through the route, answered for the client: %q", res)
	}
}

// TestInterceptClientGone: the client gives up on a call while the
// server's sampling request is held: the server, which would wait for an
// answer for ever, gets an error from mcptape, so its session ends when
// the client closes it; the record says what happened.
func TestInterceptClientGone(t *testing.T) {
	r, icpt := interceptRig(t, nil, []string{"sampling/createMessage"}, nil)
	cs := connect(t, r.px.URL+fixtures.PathStateful, protocol.V20251125)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"prompt": "abandoned"}})
		done <- err
	}()
	nextHeld(t, icpt)
	cancel()
	<-done
	// The server's session closes at once: its request was answered.
	closed := make(chan error, 1)
	go func() { closed <- cs.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the session hangs: the server still waits for an answer")
	}
	// The hold ends as the proxy notices the client's stream ended, which
	// may be just after the session closed: look until both are recorded.
	fixtures.Eventually(t, 5*time.Second, func() error {
		r.sync(t)
		var req, answer bool
		for _, m := range r.all(t) {
			req = req || m.Kind == protocol.KindRequest && heldFinding(m, "the client's stream ended before anyone decided")
			answer = answer || m.Direction == protocol.ClientToServer && m.Kind == protocol.KindError && heldFinding(m, "sent by mcptape, not by the client")
		}
		if !req || !answer {
			return fmt.Errorf("the record: the request marked %v, mcptape's error to the server marked %v", req, answer)
		}
		return nil
	})
}

// gzipJSON compresses the JSON and SSE responses of h for clients that
// accept gzip, as a server behind a compressing front end does (an SSE
// stream is flushed event by event).
func gzipJSON(h http.Handler, asked *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.ServeHTTP(w, r)
			return
		}
		asked.Add(1)
		gw := &gzipWriter{ResponseWriter: w}
		h.ServeHTTP(gw, r)
		if gw.zw != nil {
			gw.zw.Close()
		}
	})
}

type gzipWriter struct {
	http.ResponseWriter
	zw    *gzip.Writer
	wrote bool
}

func (g *gzipWriter) WriteHeader(code int) {
	if g.wrote {
		return
	}
	g.wrote = true
	if ct := g.Header().Get("Content-Type"); strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "text/event-stream") {
		g.Header().Set("Content-Encoding", "gzip")
		g.Header().Del("Content-Length")
		g.zw = gzip.NewWriter(g.ResponseWriter)
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	if g.zw != nil {
		return g.zw.Write(b)
	}
	return g.ResponseWriter.Write(b)
}

func (g *gzipWriter) Flush() {
	if g.zw != nil {
		g.zw.Flush()
	}
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestAnswerBehindACompressingServer: on 2026-07-28 --answer must read the
// input_required result to answer it; a server that compresses its JSON
// for a client that accepts gzip (go-sdk's client does, through Go's
// transport) is asked for an uncompressed answer instead, the change is in
// the record, and the call completes with the profile's answer.
func TestAnswerBehindACompressingServer(t *testing.T) {
	var compressed atomic.Int32
	r, _ := interceptRig(t, gzipJSON(fixtures.Handler(nil), &compressed), nil, profileAnswers())
	cs := connect(t, r.px.URL+fixtures.PathStateless, "")
	if res := resultText(<-callAsync(cs, "sample", map[string]any{"prompt": "hi"})); res != "mock answer (sample)" {
		t.Errorf("sample behind a compressing server: %q", res)
	}
	r.sync(t)
	var marked bool
	for _, m := range r.all(t) {
		marked = marked || heldFinding(m, "uncompressed answer")
	}
	if !marked {
		t.Error("the record does not say that the client's Accept-Encoding was removed")
	}
	t.Logf("the server compressed %d answers (requests other than the answered calls keep Accept-Encoding)", compressed.Load())
}
