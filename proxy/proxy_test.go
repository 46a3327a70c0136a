package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

type rig struct {
	up    *httptest.Server
	store capture.Store
	rec   *capture.Recorder
	px    *front
	p     *proxy.Proxy
}

type rigOptions struct {
	store    capture.Store
	tls      bool
	recorder *capture.RecorderOptions
	proxy    *proxy.Options
	upstream string // an upstream already running; h is then unused
}

func newRig(t *testing.T, h http.Handler, o *rigOptions) *rig {
	t.Helper()
	if o == nil {
		o = &rigOptions{}
	}
	r := &rig{}
	upstream := o.upstream
	if upstream == "" {
		if o.tls {
			r.up = httptest.NewTLSServer(h)
		} else {
			r.up = httptest.NewServer(h)
		}
		t.Cleanup(r.up.Close)
		upstream = r.up.URL
	}
	r.store = o.store
	if r.store == nil {
		r.store = memstore.New()
	}
	rec, err := capture.NewRecorder(context.Background(), r.store, o.recorder)
	if err != nil {
		t.Fatal(err)
	}
	r.rec = rec
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rec.Close(ctx)
	})
	po := proxy.Options{}
	if o.proxy != nil {
		po = *o.proxy
	}
	po.Upstream, _ = url.Parse(upstream)
	po.Recorder = rec
	if o.tls {
		pool := x509.NewCertPool()
		pool.AddCert(r.up.Certificate())
		po.TLSConfig = r.up.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		po.TLSConfig.RootCAs = pool
	}
	p, err := proxy.New(&po)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	r.px = serveProxy(t, p)
	t.Cleanup(r.px.Close)
	return r
}

// sync waits until everything sent so far is in the store.
func (r *rig) sync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitIdle waits until p has no exchange in flight: a stream whose client
// has gone ends, and is recorded, as the proxy notices.
func waitIdle(t *testing.T, p *proxy.Proxy) {
	t.Helper()
	fixtures.Eventually(t, 5*time.Second, func() error {
		if n := p.InFlight(); n != 0 {
			return fmt.Errorf("%d exchanges still in flight after every client closed", n)
		}
		return nil
	})
}

func (r *rig) sessions(t *testing.T) []*capture.Session {
	t.Helper()
	var out []*capture.Session
	for s, err := range r.store.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func (r *rig) messages(t *testing.T, session string) []*capture.Message {
	t.Helper()
	var out []*capture.Message
	for m, err := range r.store.Messages(context.Background(), session, capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// all returns every stored message of every session, in Seq order.
func (r *rig) all(t *testing.T) []*capture.Message {
	t.Helper()
	var out []*capture.Message
	for _, s := range r.sessions(t) {
		out = append(out, r.messages(t, s.ID)...)
	}
	sortSeq(out)
	return out
}

func sortSeq(ms []*capture.Message) {
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].Seq < ms[j-1].Seq; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

func (r *rig) exchanges(t *testing.T) []*capture.Exchange {
	t.Helper()
	var out []*capture.Exchange
	for _, s := range r.sessions(t) {
		for x, err := range r.store.Exchanges(context.Background(), s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, x)
		}
	}
	return out
}

type response struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func do(t *testing.T, method, u, body string, h map[string]string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(req)
	if err != nil {
		return response{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b, err: err}
}

const (
	initReq = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"raw-client","version":"1.0"}}}`
	callReq = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p-2"}}}`
)

// sseUpstream answers every POST request with an SSE stream holding a
// priming event, a comment, a progress notification, a sampling request and
// the result, and initialize with a JSON body and a session id.
func scriptedUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := protocol.Decode(body)
		switch {
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Method == http.MethodDelete:
			w.WriteHeader(200)
		case m.Kind == protocol.KindNotification || m.Kind.IsResponse():
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "secret-session-id-123")
			w.Header().Set("X-Custom", "kept")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"0.1"}}}`, m.ID)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			fmt.Fprint(w, "id: prime-1\ndata:\n\n: keep-alive\n\n")
			fmt.Fprint(w, "event: message\nid: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p-2\",\"progress\":1}}\n\n")
			fmt.Fprint(w, "event: message\nid: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[],\"maxTokens\":5}}\n\n")
			fmt.Fprintf(w, "retry: 1000\nevent: message\nid: e3\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n", m.ID)
		}
	})
}

func TestTransparentBytes(t *testing.T) {
	r := newRig(t, scriptedUpstream(), nil)
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	for _, tc := range []struct{ name, method, body string }{
		{"json", "POST", initReq},
		{"sse", "POST", callReq},
		{"202", "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"delete", "DELETE", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameResponse(t, do(t, tc.method, r.up.URL+"/mcp", tc.body, h), do(t, tc.method, r.px.URL+"/mcp", tc.body, h))
		})
	}
}

func TestRecordsSessionAndLinks(t *testing.T) {
	r := newRig(t, scriptedUpstream(), nil)
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Authorization": "Bearer sk-live-abcdefgh12345678", "Cookie": "sid=cookie-secret-value"}
	res := do(t, "POST", r.px.URL+"/mcp", initReq, h)
	sid := res.header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id through the proxy")
	}
	h["Mcp-Session-Id"] = sid
	h["Mcp-Protocol-Version"] = "2025-11-25"
	do(t, "POST", r.px.URL+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	do(t, "POST", r.px.URL+"/mcp", callReq, h)
	do(t, "POST", r.px.URL+"/mcp", `{"jsonrpc":"2.0","id":0,"result":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}}`, h)
	do(t, "DELETE", r.px.URL+"/mcp", "", h)
	r.sync(t)

	ss := r.sessions(t)
	if len(ss) != 1 {
		t.Fatalf("got %d sessions, want 1: %+v", len(ss), ss)
	}
	s := ss[0]
	if s.Era != protocol.EraLegacy || s.Version != "2025-11-25" || s.Client.Name != "raw-client" || s.Server.Name != "scripted" {
		t.Errorf("session = era %v version %q client %+v server %+v", s.Era, s.Version, s.Client, s.Server)
	}
	if s.Status != capture.StatusClosed || s.Calls != 2 || s.Exchanges != 5 {
		t.Errorf("session status %v calls %d exchanges %d, want closed 2 5", s.Status, s.Calls, s.Exchanges)
	}
	if s.Key == "" || strings.Contains(s.Key, "secret-session") {
		t.Errorf("session key %q: want a pseudonym", s.Key)
	}
	type row struct {
		dir    protocol.Direction
		kind   protocol.Kind
		method string
		id     string
	}
	want := []row{
		{protocol.ClientToServer, protocol.KindRequest, "initialize", "1"},
		{protocol.ServerToClient, protocol.KindResult, "initialize", "1"},
		{protocol.ClientToServer, protocol.KindNotification, "notifications/initialized", ""},
		{protocol.ClientToServer, protocol.KindRequest, "tools/call", "2"},
		{protocol.ServerToClient, protocol.KindFrame, "", ""},
		{protocol.ServerToClient, protocol.KindFrame, "", ""},
		{protocol.ServerToClient, protocol.KindNotification, "notifications/progress", ""},
		{protocol.ServerToClient, protocol.KindRequest, "sampling/createMessage", "0"},
		{protocol.ServerToClient, protocol.KindResult, "tools/call", "2"},
		{protocol.ClientToServer, protocol.KindResult, "sampling/createMessage", "0"},
	}
	ms := r.messages(t, s.ID)
	if len(ms) != len(want) {
		for _, m := range ms {
			t.Logf("%d %v %v %s %s %s", m.Seq, m.Direction, m.Kind, m.Method, m.ID, m.Raw)
		}
		t.Fatalf("got %d messages, want %d", len(ms), len(want))
	}
	bySeq := map[uint64]*capture.Message{}
	for i, m := range ms {
		bySeq[m.Seq] = m
		w := want[i]
		if m.Direction != w.dir || m.Kind != w.kind || m.Method != w.method || string(m.ID) != w.id {
			t.Errorf("message %d = %v %v %q id %s, want %v %v %q id %s", i, m.Direction, m.Kind, m.Method, m.ID, w.dir, w.kind, w.method, w.id)
		}
	}
	link := func(i int) *capture.Message { return bySeq[ms[i].Links.Request] }
	if l := link(1); l == nil || l.Method != "initialize" {
		t.Errorf("initialize result not linked to its request")
	}
	if l := link(6); l == nil || l.Method != "tools/call" {
		t.Errorf("progress not linked to tools/call by its token")
	}
	if p := bySeq[ms[7].Links.Parent]; p == nil || p.Method != "tools/call" {
		t.Errorf("sampling request not under the tools/call whose stream carried it")
	}
	if l := link(9); l == nil || l.Method != "sampling/createMessage" {
		t.Errorf("the client's sampling answer is not linked to the sampling request")
	}
	if ms[4].SSE == nil || ms[4].SSE.ID != "prime-1" {
		t.Errorf("priming event not kept: %+v", ms[4].SSE)
	}
	// SSE blocks rebuild exactly.
	var rebuilt bytes.Buffer
	for _, m := range ms[4:9] {
		if m.Kind == protocol.KindFrame {
			rebuilt.Write(m.Raw)
			continue
		}
		rebuilt.Write(m.SSE.Prefix)
		rebuilt.Write(m.Raw)
		rebuilt.Write(m.SSE.Suffix)
	}
	direct := do(t, "POST", r.up.URL+"/mcp", callReq, map[string]string{"Content-Type": "application/json"})
	if rebuilt.String() != string(direct.body) {
		t.Errorf("stored SSE blocks do not rebuild the stream:\n%q\nwant\n%q", rebuilt.String(), direct.body)
	}
	// Redaction at write time.
	xs := r.exchanges(t)
	for _, x := range xs {
		for k, vs := range x.RequestHeader {
			for _, v := range vs {
				if strings.Contains(v, "sk-live") || strings.Contains(v, "cookie-secret") || strings.Contains(v, "secret-session-id") {
					t.Errorf("exchange %d stored header %s: %q", x.ID, k, v)
				}
			}
		}
		for k, vs := range x.ResponseHeader {
			for _, v := range vs {
				if strings.Contains(v, "secret-session-id") {
					t.Errorf("exchange %d stored response header %s: %q", x.ID, k, v)
				}
			}
		}
	}
	if got := xs[0].RequestHeader.Get("Authorization"); got != "Bearer "+capture.Redacted {
		t.Errorf("Authorization stored as %q", got)
	}
}

func TestSSEIsNotBuffered(t *testing.T) {
	release := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	})
	r := newRig(t, up, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", r.px.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	start := time.Now()
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, "progress") {
		t.Fatalf("first event: %q, %v", line, err)
	}
	// The first event arrived while the upstream still holds the second.
	t.Logf("first event after %v with the stream still open upstream", time.Since(start))
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `"result"`) {
		t.Fatalf("rest of stream: %q", rest)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	cancelled := make(chan struct{})
	started := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": started\n\n")
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(cancelled)
	})
	r := newRig(t, up, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", r.px.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow"}}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	cancel()
	res.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled when the client went away")
	}
	if x := r.ended(t, 1)[0]; !x.Aborted {
		t.Errorf("exchange not marked aborted: %+v", x)
	}
}

// A client that gives up before the upstream sent anything (go-sdk sends a
// POST stream's headers only with its first event, and a 2026-07-28 stream
// has no priming event, so a slow stateless tool call looks like this)
// cancels the upstream request too, and the call is recorded cancelled.
func TestClientDisconnectBeforeResponseCancelsUpstream(t *testing.T) {
	cancelled := make(chan time.Time, 1)
	started := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// net/http notices a closed connection only once the body is read.
		_, _ = io.ReadAll(r.Body)
		close(started)
		select {
		case <-r.Context().Done():
			cancelled <- time.Now()
		case <-time.After(10 * time.Second):
		}
	})
	r := newRig(t, up, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", r.px.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	errc := make(chan error, 1)
	go func() {
		res, err := tr.RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	select { // then the proxy waits on the upstream's headers
	case <-started:
	case err := <-errc:
		t.Fatalf("the request ended (%v) before the upstream got it", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the upstream within 10s")
	}
	gaveUp := time.Now()
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the client's request succeeded; want it cancelled")
	}
	select {
	case at := <-cancelled:
		d := at.Sub(gaveUp)
		t.Logf("the upstream saw the cancellation %v after the client gave up", d)
		if d > time.Second {
			t.Errorf("the upstream saw the cancellation %v after the client gave up; want it at once", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled when the client went away before the response")
	}
	x := r.ended(t, 1)[0]
	if !x.Aborted || x.Status == http.StatusOK {
		t.Errorf("exchange %+v: want aborted, not a 200", x)
	}
	ss := r.sessions(t)
	if len(ss) != 1 {
		t.Fatalf("%d sessions, want 1", len(ss))
	}
	tree, err := capture.SessionTree(context.Background(), r.store, ss[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Roots) != 1 || tree.Roots[0].Status != "cancelled" {
		var b strings.Builder
		tree.WriteText(&b, &capture.TextOptions{NoTimes: true})
		t.Errorf("tree:\n%s\nwant the call cancelled", b.String())
	}
}

func TestUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	store := memstore.New()
	rec, _ := capture.NewRecorder(context.Background(), store, nil)
	defer rec.Close(context.Background())
	u, _ := url.Parse(dead)
	p, _ := proxy.New(&proxy.Options{Upstream: u, Recorder: rec})
	px := serveProxy(t, p)
	defer px.Close()
	res := do(t, "POST", px.URL+"/mcp", `{"jsonrpc":"2.0","id":"init-7","method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"c"}}}`,
		map[string]string{"Content-Type": "application/json"})
	if res.status != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", res.status)
	}
	m := protocol.Decode(res.body)
	e, _ := m.ErrorInfo()
	if m.Kind != protocol.KindError || string(m.ID) != `"init-7"` || !strings.Contains(e.Message, ln.Addr().String()) {
		t.Fatalf("body %s: want a JSON-RPC error with the request's id naming the upstream", res.body)
	}
	if err := rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var msgs []*capture.Message
	for s := range store.Sessions(context.Background(), capture.SessionQuery{}) {
		for m := range store.Messages(context.Background(), s.ID, capture.MessageQuery{}) {
			msgs = append(msgs, m)
		}
		for x := range store.Exchanges(context.Background(), s.ID) {
			if !x.Synthesized || x.Status != 502 || x.Error == "" {
				t.Errorf("exchange %+v: want synthesized 502 with the error", x)
			}
		}
	}
	if len(msgs) != 2 || msgs[0].Method != "initialize" || msgs[1].Kind != protocol.KindError {
		t.Fatalf("recorded %d messages, want the attempt and the proxy's error", len(msgs))
	}
}

func TestUpstreamResetMidStream(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\ndata: {\"jsonrpc\":\"2.0\",")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	})
	r := newRig(t, up, nil)
	res := do(t, "POST", r.px.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, map[string]string{"Content-Type": "application/json"})
	if res.err == nil {
		t.Fatalf("client saw a clean end (%q); want an abort", res.body)
	}
	r.sync(t)
	xs := r.exchanges(t)
	if len(xs) != 1 || !xs[0].Aborted || !xs[0].Truncated {
		t.Fatalf("exchange %+v: want aborted and truncated", xs)
	}
	ms := r.all(t)
	last := ms[len(ms)-1]
	if last.Kind != protocol.KindInvalid || len(last.Findings) == 0 || last.Findings[0].Kind != capture.FindingTruncated {
		t.Errorf("last message %+v: want the partial event kept with a truncated finding", last)
	}
}

func TestBadInput(t *testing.T) {
	big := strings.Repeat("x", 10<<20)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/malformed":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)
		case "/batch":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}]`)
		case "/nonjson":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: this is not json\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		case "/big":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"%s"}]}}`, big)
		}
		_ = body
	})
	r := newRig(t, up, nil)
	h := map[string]string{"Content-Type": "application/json"}
	if res := do(t, "POST", r.px.URL+"/malformed", `{"jsonrpc":"2.0","id":1,"method":`, h); res.status != 400 {
		t.Fatalf("malformed: %d", res.status)
	}
	do(t, "POST", r.px.URL+"/batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"nope"}]`, h)
	do(t, "POST", r.px.URL+"/nonjson", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, h)
	res := do(t, "POST", r.px.URL+"/big", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`, h)
	if len(res.body) < 10<<20 {
		t.Fatalf("big: got %d bytes", len(res.body))
	}
	r.sync(t)
	var findings []string
	kinds := map[protocol.Kind]int{}
	var bigStored bool
	for _, m := range r.all(t) {
		kinds[m.Kind]++
		for _, f := range m.Findings {
			findings = append(findings, string(f.Kind)+": "+f.Message)
		}
		if m.Size == len(res.body) && bytes.Equal(m.Raw, res.body) {
			bigStored = true
		}
	}
	if kinds[protocol.KindInvalid] != 2 { // the malformed request and the non-JSON event
		t.Errorf("invalid messages: %d, want 2 (findings %q)", kinds[protocol.KindInvalid], findings)
	}
	if kinds[protocol.KindError] != 2 { // null-id error, batch element
		t.Errorf("error messages: %d, want 2", kinds[protocol.KindError])
	}
	if !bigStored {
		t.Error("the 10 MiB result was not stored whole")
	}
	joined := strings.Join(findings, "\n")
	for _, want := range []string{"invalid-frame: not JSON"} {
		if !strings.Contains(joined, want) {
			t.Errorf("findings %q lack %q", joined, want)
		}
	}
}

func TestHostCheck(t *testing.T) {
	r := newRig(t, scriptedUpstream(), nil)
	res := do(t, "POST", r.px.URL+"/mcp", initReq, map[string]string{"Content-Type": "application/json", "Host": "evil.example"})
	// http.Request ignores a Host header; set it on the request itself.
	req, _ := http.NewRequest("POST", r.px.URL+"/mcp", strings.NewReader(initReq))
	req.Host = "evil.example:80"
	req.Header.Set("Content-Type", "application/json")
	got, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got.Body.Close()
	if got.StatusCode != http.StatusForbidden {
		t.Errorf("Host evil.example: status %d, want 403", got.StatusCode)
	}
	if res.status != 200 {
		t.Errorf("loopback host: status %d", res.status)
	}
	req, _ = http.NewRequest("POST", strings.Replace(r.px.URL, "127.0.0.1", "localhost", 1)+"/mcp", strings.NewReader(initReq))
	req.Header.Set("Content-Type", "application/json")
	got, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got.Body.Close()
	if got.StatusCode != 200 {
		t.Errorf("Host localhost: status %d, want 200", got.StatusCode)
	}
}

func TestOriginPassesThrough(t *testing.T) {
	var seen atomic.Value
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Origin") + "|" + r.Host)
		w.WriteHeader(202)
	})
	r := newRig(t, up, nil)
	do(t, "POST", r.px.URL+"/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Origin": "https://evil.example"})
	u, _ := url.Parse(r.up.URL)
	if got := seen.Load(); got != "https://evil.example|"+u.Host {
		t.Errorf("upstream saw %v, want the Origin unchanged and Host set to the upstream's", got)
	}
}

func TestHTTPSUpstream(t *testing.T) {
	r := newRig(t, scriptedUpstream(), &rigOptions{tls: true})
	res := do(t, "POST", r.px.URL+"/mcp", initReq, map[string]string{"Content-Type": "application/json"})
	if res.status != 200 || !strings.Contains(string(res.body), "scripted") {
		t.Fatalf("https upstream: %d %s", res.status, res.body)
	}
}

// failingStore fails writes while fail is set.
type failingStore struct {
	capture.Store
	fail atomic.Bool
}

func (f *failingStore) Write(ctx context.Context, b *capture.Batch) error {
	if f.fail.Load() {
		return errors.New("disk full (simulated)")
	}
	return f.Store.Write(ctx, b)
}

type countingHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func TestStoreFailureKeepsTrafficFlowing(t *testing.T) {
	fs := &failingStore{Store: memstore.New()}
	logs := &countingHandler{}
	r := newRig(t, scriptedUpstream(), &rigOptions{store: fs, recorder: &capture.RecorderOptions{Logger: slog.New(logs)}})
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	res := do(t, "POST", r.px.URL+"/mcp", initReq, h)
	h["Mcp-Session-Id"] = res.header.Get("Mcp-Session-Id")
	r.sync(t)
	fs.fail.Store(true)
	for i := 0; i < 5; i++ {
		res := do(t, "POST", r.px.URL+"/mcp", callReq, h)
		if res.status != 200 || !strings.Contains(string(res.body), `"result"`) {
			t.Fatalf("call %d while the store fails: %d %q", i, res.status, res.body)
		}
		r.sync(t)
	}
	fs.fail.Store(false)
	do(t, "POST", r.px.URL+"/mcp", callReq, h)
	r.sync(t)
	r.sync(t)
	st := r.rec.Stats()
	if st.Lost == 0 || st.StoreErrors == 0 || st.Messages != st.Stored+st.Lost {
		t.Errorf("stats %+v: want losses counted and messages = stored + lost", st)
	}
	errorsLogged := 0
	logs.mu.Lock()
	for _, rec := range logs.recs {
		if rec.Level == slog.LevelError {
			errorsLogged++
			if !strings.Contains(fmt.Sprint(rec.Message), "store write failed") {
				t.Errorf("log %q", rec.Message)
			}
		}
	}
	logs.mu.Unlock()
	if errorsLogged != 1 {
		t.Errorf("store failure logged %d times, want once", errorsLogged)
	}
	ss := r.sessions(t)
	if len(ss) != 1 || ss[0].Status != capture.StatusIncomplete || ss[0].Lost == 0 || !strings.Contains(ss[0].LossReason, "disk full") {
		t.Fatalf("session %+v: want it marked incomplete with the reason", ss[0])
	}
}
