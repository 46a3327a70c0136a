package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/proxy"
)

// Tests over raw TCP, for what clients other than Go's send.

func rawFront(t *testing.T, h http.Handler) (string, *rig) {
	t.Helper()
	r := newRig(t, h, nil)
	return strings.TrimPrefix(r.px.URL, "http://"), r
}

func rawExchange(t *testing.T, addr, request string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func echoBody() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Got-Length", fmt.Sprint(len(b)))
		w.Header().Set("X-Got-Host", r.Host)
		w.Write(b)
	})
}

func TestRawChunkedRequestBody(t *testing.T) {
	addr, _ := rawFront(t, echoBody())
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	req := "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	got := rawExchange(t, addr, req)
	if !strings.Contains(got, "X-Got-Length: "+fmt.Sprint(len(body))) || !strings.HasSuffix(got, body) {
		t.Fatalf("chunked request body: %q", got)
	}
}

func TestRawExpectContinueAndHTTP10(t *testing.T) {
	addr, _ := rawFront(t, echoBody())
	body := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(body))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("Expect: 100-continue: first line %q, %v", line, err)
	}
	br.ReadString('\n') // the blank line ending the interim response
	io.WriteString(c, body)
	rest, _ := io.ReadAll(br)
	if !strings.HasPrefix(string(rest), "HTTP/1.1 200") || !strings.HasSuffix(string(rest), body) {
		t.Fatalf("Expect: 100-continue: %q", rest)
	}
	got := rawExchange(t, addr, fmt.Sprintf("POST /mcp HTTP/1.0\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	if !strings.HasPrefix(got, "HTTP/1.0 200") || !strings.HasSuffix(got, body) {
		t.Fatalf("HTTP/1.0 client: %q", got)
	}
}

// An HTTP/1.0 client gets a chunked upstream response de-chunked, ended by
// closing the connection.
func TestRawHTTP10ChunkedResponse(t *testing.T) {
	addr, _ := rawFront(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "data: two\n\n")
	}))
	got := rawExchange(t, addr, "GET /mcp HTTP/1.0\r\nHost: localhost\r\n\r\n")
	head, body, _ := strings.Cut(got, "\r\n\r\n")
	if strings.Contains(head, "Transfer-Encoding") || body != "data: one\n\ndata: two\n\n" {
		t.Fatalf("HTTP/1.0 client of a chunked response:\n%q", got)
	}
}

func TestRawRefusesBadRequests(t *testing.T) {
	addr, _ := rawFront(t, echoBody())
	for name, req := range map[string]string{
		"bad length": "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: x\r\n\r\n",
		"garbage":    "HELLO\r\n\r\n",
	} {
		if got := rawExchange(t, addr, req); !strings.HasPrefix(got, "HTTP/1.1 400") {
			t.Errorf("%s: %q", name, got)
		}
	}
}

// A protocol upgrade (WebSocket, h2c) is never switched to: the request
// goes on as a plain one, without its Upgrade, so the upstream answers it
// as one and no unrecorded tunnel opens.
func TestRawUpgradeNotSwitched(t *testing.T) {
	addr, _ := rawFront(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Got-Upgrade", r.Header.Get("Upgrade")+"|"+r.Header.Get("Connection"))
		w.WriteHeader(http.StatusOK)
	}))
	got := rawExchange(t, addr, "GET /ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, "X-Got-Upgrade: |\r\n") {
		t.Errorf("upgrade: %q", got)
	}
}

// Many requests on one client connection, with the upstream closing its
// idle connections now and then: every response arrives.
func TestRawKeepAliveAndStaleUpstream(t *testing.T) {
	up := httptest.NewUnstartedServer(echoBody())
	up.Config.SetKeepAlivesEnabled(true)
	up.Start()
	defer up.Close()
	u, _ := url.Parse(up.URL)
	p, _ := proxy.New(&proxy.Options{Upstream: u})
	f := serveProxy(t, p)
	defer f.Close()
	addr := strings.TrimPrefix(f.URL, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; i < 50; i++ {
		if i%10 == 5 {
			up.CloseClientConnections() // the upstream drops the proxy's idle connection
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(got) != body {
			t.Fatalf("request %d: %d %q", i, res.StatusCode, got)
		}
	}
}

// A request body larger than the proxy buffers streams to the upstream,
// whole.
func TestRawLargeRequestBody(t *testing.T) {
	addr, r := rawFront(t, echoBody())
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","arguments":{"blob":"` + strings.Repeat("z", 3<<20) + `"}}}`
	raw := rawExchange(t, addr, fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(big), big))
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	if err != nil || res.Header.Get("X-Got-Length") != fmt.Sprint(len(big)) || string(got) != big {
		t.Fatalf("large body: %v, %d bytes back, upstream got %s", err, len(got), res.Header.Get("X-Got-Length"))
	}
	r.sync(t)
	found := false
	for _, m := range r.all(t) {
		if bytes.Equal(m.Raw, []byte(big)) {
			found = true
		}
	}
	if !found {
		t.Error("the large request was not recorded whole")
	}
}

// A client that pipelines its next request while the upstream is slow to
// answer the first has not gone away: both requests are answered in order,
// neither is recorded as aborted.
func TestRawPipelinedWhileWaiting(t *testing.T) {
	slowEcho := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(`"id":1`)) {
			time.Sleep(100 * time.Millisecond) // a slow upstream: the proxy reads the pipelined request meanwhile
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	addr, r := rawFront(t, slowEcho)
	var req strings.Builder
	for i := 1; i <= 2; i++ {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
		fmt.Fprintf(&req, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := 1; i <= 2; i++ {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if want := fmt.Sprintf(`"id":%d`, i); res.StatusCode != 200 || !strings.Contains(string(got), want) {
			t.Fatalf("response %d: %d %q", i, res.StatusCode, got)
		}
	}
	r.sync(t)
	for _, x := range r.exchanges(t) {
		if x.Aborted {
			t.Errorf("exchange %d aborted: %s", x.ID, x.Error)
		}
	}
}
