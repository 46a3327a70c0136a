package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/proxy"
)

// shutdownUpstream serves a standalone GET stream that never ends, a tool
// call "slow" answered after a delay, a tool call "stream" whose SSE
// answer never ends, and 202 for anything without an id.
type shutdownUpstream struct {
	slowDelay   time.Duration
	slowStarted chan struct{}
	answers     atomic.Int64 // POSTs without a method (a client's answer)
}

func (u *shutdownUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fmt.Fprint(w, ": open\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case strings.Contains(string(body), `"slow"`):
		close(u.slowStarted)
		select {
		case <-time.After(u.slowDelay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}]}}`)
	case strings.Contains(string(body), `"stream"`), strings.Contains(string(body), `subscriptions/listen`):
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":2,\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		u.answers.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}
}

func post(t *testing.T, c *http.Client, u, body string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return c.Do(req)
}

// A draining proxy cuts the GET and subscriptions/listen streams at once,
// lets a call in flight
// finish, answers a new call 503, still forwards a client's answer, and
// cuts a stream still open when the bound comes; every cut exchange is
// recorded as cut by shutdown.
func TestShutdownDrains(t *testing.T) {
	up := &shutdownUpstream{slowDelay: 600 * time.Millisecond, slowStarted: make(chan struct{})}
	r := newRig(t, up, nil)
	// A bound on every request and stream, so that a stream the proxy
	// fails to cut fails the test instead of hanging it.
	c := *r.px.Client()
	c.Timeout = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	getReq, _ := http.NewRequestWithContext(ctx, "GET", r.px.URL+"/mcp", nil)
	getReq.Header.Set("Accept", "text/event-stream")
	getRes, err := c.Do(getReq)
	if err != nil {
		t.Fatal(err)
	}
	defer getRes.Body.Close()
	streamRes, err := post(t, &c, r.px.URL+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"stream"}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer streamRes.Body.Close()
	if _, err := bufio.NewReader(streamRes.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	listenReq, _ := http.NewRequest("POST", r.px.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{}}`))
	listenReq.Header.Set("Content-Type", "application/json")
	listenReq.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	listenReq.Header.Set("Mcp-Method", "subscriptions/listen")
	listenRes, err := c.Do(listenReq)
	if err != nil {
		t.Fatal(err)
	}
	defer listenRes.Body.Close()
	slow := make(chan error, 1)
	go func() {
		res, err := post(t, &c, r.px.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(string(b), "done") {
				err = fmt.Errorf("%d %s", res.StatusCode, b)
			}
		}
		slow <- err
	}()
	select {
	case <-up.slowStarted:
	case err := <-slow:
		t.Fatalf("the slow call ended before the upstream saw it: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the slow call did not reach the upstream within 20s")
	}

	start := time.Now()
	shut := make(chan error, 1)
	sctx, scancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer scancel()
	go func() { shut <- r.px.srv.Shutdown(sctx) }()

	// The GET stream and the listen stream end at once.
	if _, err := io.Copy(io.Discard, getRes.Body); err == nil {
		t.Error("the GET stream ended cleanly; want it cut")
	}
	if _, err := io.Copy(io.Discard, listenRes.Body); err == nil {
		t.Error("the subscriptions/listen stream ended cleanly; want it cut")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("the GET and listen streams were cut after %v; want at once", d)
	}
	// A new call is refused; a client's answer goes through.
	res, err := post(t, &c, r.px.URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if id, msg := jsonRPCError(t, b); res.StatusCode != 503 || id != "3" || !strings.Contains(msg, "shutting down") {
		t.Errorf("a new call while draining: %d %s", res.StatusCode, b)
	}
	res, err = post(t, &c, r.px.URL+"/mcp", `{"jsonrpc":"2.0","id":0,"result":{"model":"m","role":"assistant","content":{"type":"text","text":"ok"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 202 || up.answers.Load() != 1 {
		t.Errorf("a client's answer while draining: %d, upstream saw %d", res.StatusCode, up.answers.Load())
	}
	// The call in flight finishes.
	if err := <-slow; err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	// The stream still open is cut at the bound.
	if _, err := io.Copy(io.Discard, streamRes.Body); err == nil {
		t.Error("the POST stream ended cleanly; want it cut")
	}
	err = <-shut
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || took < 1400*time.Millisecond || took > 4*time.Second {
		t.Errorf("Shutdown returned %v after %v; want the deadline near 1.5s", err, took)
	}

	xs := r.ended(t, 6)
	for _, x := range xs {
		switch {
		case x.Method == "GET", x.Method == "POST" && x.Events > 0:
			if !x.Aborted || x.Error != proxy.ErrShutdown.Error() {
				t.Errorf("stream %s %s: aborted %v, error %q; want cut by shutdown", x.Method, x.URL, x.Aborted, x.Error)
			}
		case x.Status == 503:
			if !x.Synthesized {
				t.Errorf("the refused call: %+v", x)
			}
		case x.Aborted:
			t.Errorf("exchange %+v aborted", x)
		}
	}
}
