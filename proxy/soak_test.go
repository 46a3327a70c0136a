//lint:file-ignore SA1019 the soak drives sampling, which the 2026-07-28 revision deprecates but mcptape still records

package proxy_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

var soak = flag.Bool("soak", false, "TestSoak: the full soak, 200 sessions × at least 500 mixed calls each, for at least 2 minutes (default: 200 sessions for 20s, paced)")

// TestSoak drives 200 go-sdk client sessions at once through the recording
// proxy (Badger on disk) to the fixture server, half on 2025-11-25, half on
// 2026-07-28, each making mixed calls in a loop: echo, add, a slow tool that
// streams progress over SSE, and sampling (a server→client request on
// 2025-11-25, a multi round-trip request on 2026-07-28). It checks that no
// call failed and the proxy made no answer of its own, that the JSON-RPC
// messages the clients sent and received equal those stored, and that the
// goroutines and file descriptors are back to where they were once it is
// all closed; it prints the process's RSS every second.
//
// By default it runs 20 seconds with each session pausing 1s between
// calls (the suite runs it beside everything else on a small machine);
// -soak runs the full soak: no pauses, until every session made 500 calls
// and 2 minutes passed:
//
//	go test -run TestSoak -timeout 30m -v ./proxy/ -soak
func TestSoak(t *testing.T) {
	sessions, minCalls, minTime, pace := 200, 0, 20*time.Second, time.Second
	if *soak {
		minCalls, minTime, pace = 500, 2*time.Minute, 0
	} else if testing.Short() {
		t.Skip("a 20s soak")
	}
	baseG, baseFD := runtime.NumGoroutine(), openFDs()

	up := httptest.NewServer(fixtures.Handler(nil))
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := capture.NewRecorder(context.Background(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(up.URL)
	p, err := proxy.New(&proxy.Options{Upstream: u, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	f := serveProxy(t, p)
	counts := &wireCounts{}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4 * sessions}
	hc := &http.Client{Transport: &countingTransport{base: tr, c: counts}}

	stopRSS := make(chan struct{})
	rssDone := make(chan []string)
	go func() { rssDone <- rssCurve(stopRSS, counts) }()

	ctx, cancel := context.WithTimeout(context.Background(), minTime+20*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	results := make([]soakResult, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = soakSession(ctx, i, f.URL, hc, start.Add(minTime), minCalls, pace)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stopRSS)
	curve := <-rssDone

	var calls, sampled, progress int64
	failed := 0
	for i, r := range results {
		calls += r.calls
		sampled += r.sampling
		progress += r.progress
		if r.err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("session %d after %d calls: %v", i, r.calls, r.err)
			}
		}
		if r.calls < int64(minCalls) {
			t.Errorf("session %d made %d calls, want at least %d", i, r.calls, minCalls)
		}
	}
	t.Logf("%d sessions, %d calls (%d sampling, %d progress notifications) in %v: %.0f calls/s",
		sessions, calls, sampled, progress, took.Round(time.Millisecond), float64(calls)/took.Seconds())
	t.Logf("RSS of the whole test process (clients, proxy, recorder, Badger, fixture server), every second:\n%s", strings.Join(curve, "\n"))

	// What the clients exchanged is what was stored.
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := rec.Sync(sctx); err != nil {
		t.Fatal(err)
	}
	// A closed client's GET stream ends as the proxy notices the close.
	waitIdle(t, p)
	var storedC2S, storedS2C, exchanges, synthesized int64
	clients := map[string]bool{}
	for s, err := range store.Sessions(sctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		clients[s.Client.Name] = true
		for x, err := range store.Exchanges(sctx, s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			exchanges++
			if x.Synthesized || x.Status >= 500 {
				synthesized++
				if synthesized <= 5 {
					t.Errorf("exchange %d %s: %d %s (the proxy answered itself)", x.ID, x.Method, x.Status, x.Error)
				}
			}
		}
		for m, err := range store.Messages(sctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind == protocol.KindFrame || m.Kind == protocol.KindInvalid {
				continue
			}
			if m.Direction == protocol.ClientToServer {
				storedC2S++
			} else {
				storedS2C++
			}
		}
	}
	st := rec.Stats()
	sent, got := counts.c2s.Load(), counts.s2c.Load()
	t.Logf("clients sent %d and received %d JSON-RPC messages; stored %d and %d, in %d exchanges; recorder: %d lost, %d dropped",
		sent, got, storedC2S, storedS2C, exchanges, st.Lost, st.Dropped)
	if sent != storedC2S || got != storedS2C || st.Lost != 0 || st.Dropped != 0 {
		t.Errorf("client counts (%d sent, %d received) differ from stored counts (%d, %d), or something was lost (%d) or dropped (%d)",
			sent, got, storedC2S, storedS2C, st.Lost, st.Dropped)
	}
	if len(clients) != sessions {
		t.Errorf("%d distinct clients stored, want %d", len(clients), sessions)
	}

	// Everything closed: goroutines and descriptors are back.
	tr.CloseIdleConnections()
	f.Close()
	up.Close()
	if err := rec.Close(sctx); err != nil {
		t.Error(err)
	}
	if err := store.Close(); err != nil {
		t.Error(err)
	}
	fixtures.Eventually(t, 15*time.Second, func() error {
		g, fd := runtime.NumGoroutine(), openFDs()
		if g <= baseG+2 && fd <= baseFD+2 {
			t.Logf("goroutines %d (before: %d), open files %d (before: %d)", g, baseG, fd, baseFD)
			return nil
		}
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		return fmt.Errorf("after closing everything: %d goroutines (before: %d), %d open files (before: %d)\n%.6000s", g, baseG, fd, baseFD, b.String())
	})
}

type soakResult struct {
	calls, sampling, progress int64
	err                       error
}

// soakSession is one client: it connects, calls in a loop until both
// until has passed and it made minCalls calls, and closes.
func soakSession(ctx context.Context, i int, base string, hc *http.Client, until time.Time, minCalls int, pace time.Duration) (r soakResult) {
	var sampling, progress atomic.Int64
	client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("soak-%03d", i), Version: "1"}, &mcp.ClientOptions{
		CreateMessageWithToolsHandler: func(_ context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			sampling.Add(1)
			return &mcp.CreateMessageWithToolsResult{Model: "soak", Role: "assistant", StopReason: "endTurn",
				Content: []mcp.Content{&mcp.TextContent{Text: "sampled"}}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	path := fixtures.PathStateful
	if i%2 == 1 {
		path = fixtures.PathStateless
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + path, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return soakResult{err: fmt.Errorf("connect: %w", err)}
	}
	defer func() {
		if err := cs.Close(); err != nil && r.err == nil {
			r.err = fmt.Errorf("close: %w", err)
		}
		r.sampling, r.progress = sampling.Load(), progress.Load()
	}()
	for n := 0; time.Now().Before(until) || n < minCalls; n++ {
		var p *mcp.CallToolParams
		switch n % 4 {
		case 0:
			p = &mcp.CallToolParams{Name: fixtures.ToolEcho, Arguments: map[string]any{"text": "soak " + strconv.Itoa(n)}}
		case 1:
			p = &mcp.CallToolParams{Name: fixtures.ToolAdd, Arguments: map[string]any{"a": n, "b": i}}
		case 2:
			p = &mcp.CallToolParams{Name: fixtures.ToolSlow, Arguments: map[string]any{"duration_ms": 20, "steps": 2},
				Meta: mcp.Meta{"progressToken": fmt.Sprintf("p-%d-%d", i, n)}}
		case 3:
			p = &mcp.CallToolParams{Name: fixtures.ToolSample, Arguments: map[string]any{"prompt": "soak"}}
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		res, err := cs.CallTool(cctx, p)
		cancel()
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		if err != nil {
			r.err = fmt.Errorf("call %d (%s): %w", n, p.Name, err)
			return r
		}
		r.calls++
		if pace > 0 {
			select {
			case <-time.After(pace):
			case <-ctx.Done():
				r.err = ctx.Err()
				return r
			}
		}
	}
	return r
}

// wireCounts are the JSON-RPC messages the clients put on the wire and
// read from it.
type wireCounts struct{ c2s, s2c atomic.Int64 }

// countingTransport counts the JSON-RPC messages of every request body,
// and of every response body as the client reads it (SSE events or JSON).
type countingTransport struct {
	base http.RoundTripper
	c    *wireCounts
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		t.c.c2s.Add(int64(rpcMessages(b)))
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	cb := &countingBody{ReadCloser: res.Body, c: t.c}
	if strings.HasPrefix(res.Header.Get("Content-Type"), protocol.ContentTypeSSE) {
		cb.sse = &protocol.SSEParser{MaxEventSize: 16 << 20}
	}
	res.Body = cb
	return res, nil
}

type countingBody struct {
	io.ReadCloser
	c    *wireCounts
	sse  *protocol.SSEParser
	json []byte
	done bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.sse != nil {
		b.sse.Feed(p[:n], func(e *protocol.Event) {
			if e.IsMessage() {
				b.c.s2c.Add(int64(rpcMessages(e.Data)))
			}
		})
	} else {
		b.json = append(b.json, p[:n]...)
		if err == io.EOF && !b.done {
			b.done = true
			b.c.s2c.Add(int64(rpcMessages(b.json)))
		}
	}
	return n, err
}

// rpcMessages counts the JSON-RPC messages in a body (a batch counts each).
func rpcMessages(b []byte) int {
	n := 0
	for _, m := range protocol.Split(b) {
		if m.Kind != protocol.KindInvalid && m.Kind != protocol.KindFrame {
			n++
		}
	}
	return n
}

// rssCurve samples the process's RSS and goroutines every second until stop.
func rssCurve(stop chan struct{}, c *wireCounts) []string {
	start := time.Now()
	var out []string
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
			out = append(out, fmt.Sprintf("  %4.0fs  RSS %6.1f MB  goroutines %5d  messages %d",
				time.Since(start).Seconds(), float64(selfRSSKB())/1000, runtime.NumGoroutine(), c.c2s.Load()+c.s2c.Load()))
		}
	}
}

func selfRSSKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func openFDs() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(es)
}
