package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// recordRun is a `mcptape record` running in this process.
type recordRun struct {
	*cmdRun
	url  string // where it tells clients to point
	base string // the proxy's scheme://host:port
	data string
}

// startRecord runs `mcptape record --listen 127.0.0.1:0 --dashboard off`
// with args and waits for its address.
func startRecord(t *testing.T, args ...string) *recordRun {
	t.Helper()
	r := &recordRun{data: t.TempDir()}
	r.cmdRun = startRun(t, append([]string{"record", "--listen", "127.0.0.1:0", "--dashboard", "off", "--data", r.data}, args...)...)
	r.url = r.wait(t, "point your MCP client at ")
	r.base = urlRE.FindString(r.url)
	return r
}

// exchanges stops the recording and returns every stored exchange with
// its messages' raw bytes.
func (r *recordRun) exchanges(t *testing.T) ([]*capture.Exchange, []*capture.Message) {
	t.Helper()
	st := r.stoppedStore(t, r.data)
	ctx := context.Background()
	var xs []*capture.Exchange
	var ms []*capture.Message
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for x, err := range st.Exchanges(ctx, s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			xs = append(xs, x)
		}
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
	}
	return xs, ms
}

// secretsServer answers every POST with a JSON-RPC result that repeats the
// request's Authorization header, and keeps the headers it received.
type secretsServer struct {
	mu  sync.Mutex
	got []http.Header
}

func (s *secretsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.got = append(s.got, r.Header.Clone())
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"you sent %s"}]}}`, r.Header.Get("Authorization"))
}

func post(t *testing.T, u string, hdr map[string]string) (int, string) {
	t.Helper()
	return postBody(t, u, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, hdr)
}

func postBody(t *testing.T, u, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var secretHeaders = map[string]string{
	"Authorization":       "Bearer tok-SECRET-1",
	"Proxy-Authorization": "Basic cHJveHk6U0VDUkVULTI=",
	"Cookie":              "sid=SECRET-3",
	"X-Api-Key":           "SECRET-4",
	"X-Trace-Blob":        "SECRET-5",
}

// TestRecordRedactsByDefault: the upstream and the client see every secret
// as sent; the store holds none of them, in headers or in the body that
// repeats one, and --redact-header adds a header of the user's.
func TestRecordRedactsByDefault(t *testing.T) {
	up := &secretsServer{}
	ts := httptest.NewServer(up)
	defer ts.Close()
	r := startRecord(t, "--upstream", ts.URL+"/mcp", "--redact-header", "X-Trace-Blob")
	code, body := post(t, r.base+"/mcp", secretHeaders)
	if code != 200 || !strings.Contains(body, "tok-SECRET-1") {
		t.Fatalf("the client got %d %s; want the upstream's answer unchanged", code, body)
	}
	for k, v := range secretHeaders {
		if k == "Proxy-Authorization" {
			// Hop-by-hop: meant for a proxy, never forwarded.
			if got := up.got[0].Get(k); got != "" {
				t.Errorf("the upstream got Proxy-Authorization %q", got)
			}
			continue
		}
		if got := up.got[0].Get(k); got != v {
			t.Errorf("the upstream got %s: %q, want %q unchanged", k, got, v)
		}
	}
	xs, ms := r.exchanges(t)
	if len(xs) != 1 || len(ms) != 2 {
		t.Fatalf("stored %d exchanges, %d messages; want 1 and 2", len(xs), len(ms))
	}
	stored := fmt.Sprint(xs[0].RequestHeader, xs[0].ResponseHeader)
	for _, m := range ms {
		stored += string(m.Raw)
	}
	for _, secret := range []string{"tok-SECRET-1", "cHJveHk6U0VDUkVULTI=", "SECRET-3", "SECRET-4", "SECRET-5"} {
		if strings.Contains(stored, secret) {
			t.Errorf("the store holds %q:\n%s", secret, stored)
		}
	}
	if got := xs[0].RequestHeader.Get("Authorization"); got != "Bearer "+capture.Redacted {
		t.Errorf("stored Authorization %q: the scheme should stay, the credentials go", got)
	}
	if got := xs[0].RequestHeader.Get("X-Trace-Blob"); got != capture.Redacted {
		t.Errorf("--redact-header X-Trace-Blob: stored %q", got)
	}
}

// TestRecordNoRedact: --no-redact warns and stores the secrets as they are.
func TestRecordNoRedact(t *testing.T) {
	ts := httptest.NewServer(&secretsServer{})
	defer ts.Close()
	r := startRecord(t, "--upstream", ts.URL+"/mcp", "--no-redact")
	if !strings.Contains(r.errOut.String(), "WARNING: --no-redact") {
		t.Errorf("no warning for --no-redact:\n%s", r.errOut.String())
	}
	post(t, r.base+"/mcp", secretHeaders)
	xs, _ := r.exchanges(t)
	if len(xs) != 1 || xs[0].RequestHeader.Get("Authorization") != secretHeaders["Authorization"] {
		t.Fatalf("--no-redact should store Authorization as sent: %v", xs)
	}
}

// TestRecordHostCheck: on loopback a foreign Host is refused (DNS
// rebinding) unless --allow-any-host.
func TestRecordHostCheck(t *testing.T) {
	ts := httptest.NewServer(&secretsServer{})
	defer ts.Close()
	r := startRecord(t, "--upstream", ts.URL+"/mcp")
	if code, body := post(t, r.base+"/mcp", map[string]string{"Host": "attacker.example"}); code != http.StatusForbidden {
		t.Errorf("a foreign Host got %d %s, want 403", code, body)
	}
	r2 := startRecord(t, "--upstream", ts.URL+"/mcp", "--allow-any-host")
	if code, body := post(t, r2.base+"/mcp", map[string]string{"Host": "attacker.example"}); code != 200 {
		t.Errorf("--allow-any-host: a foreign Host got %d %s, want 200", code, body)
	}
}

// TestRecordUpstreamCA: an https upstream with its own CA works with
// --upstream-ca and fails with a 502 without it; a file with no
// certificate is refused up front.
func TestRecordUpstreamCA(t *testing.T) {
	ts := httptest.NewTLSServer(&secretsServer{})
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRecord(t, "--upstream", ts.URL+"/mcp", "--upstream-ca", ca)
	if code, body := post(t, r.base+"/mcp", nil); code != 200 || !strings.Contains(body, "you sent") {
		t.Errorf("https upstream with --upstream-ca: %d %s", code, body)
	}
	r2 := startRecord(t, "--upstream", ts.URL+"/mcp")
	if code, body := post(t, r2.base+"/mcp", nil); code != http.StatusBadGateway || !strings.Contains(body, "-32000") {
		t.Errorf("https upstream signed by an unknown CA: %d %s, want 502 with a JSON-RPC error", code, body)
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("not a certificate\n"), 0o600)
	if code, _, errOut := mcptape(t, "record", "--upstream", ts.URL+"/mcp", "--listen", "127.0.0.1:0", "--dashboard", "off",
		"--data", t.TempDir(), "--upstream-ca", empty); code == 0 || !strings.Contains(errOut, "holds no PEM certificate") {
		t.Errorf("--upstream-ca with no certificate: exit %d, %s", code, errOut)
	}
}

// TestRecordIdleGap: a 2026-07-28 client silent for longer than --idle-gap
// starts a new session; within it, the same one goes on.
func TestRecordIdleGap(t *testing.T) {
	ts := httptest.NewServer(&secretsServer{})
	defer ts.Close()
	// The gap is long enough that a loaded machine does not stall that long
	// between the first two calls.
	r := startRecord(t, "--upstream", ts.URL+"/mcp", "--idle-gap", "1s")
	modern := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
	// Each call with its own id: a client that sends an id again starts a
	// new session whatever the gap (TestModernRunsTwice…).
	call := func(id int) {
		postBody(t, r.base+"/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, id), modern)
	}
	call(1)
	call(2)                             // within the gap
	time.Sleep(1300 * time.Millisecond) // real time past the recording child's --idle-gap
	call(3)                             // after it
	xs, _ := r.exchanges(t)
	sessions := map[string]int{}
	for _, x := range xs {
		sessions[x.SessionID]++
	}
	if len(xs) != 3 || len(sessions) != 2 {
		t.Errorf("3 calls with a pause longer than --idle-gap before the third: %d exchanges in sessions %v, want 2 then 1", len(xs), sessions)
	}
}

// TestDefaultDataDir follows the documented order: $MCPTAPE_DATA, then
// $XDG_DATA_HOME/mcptape, then the platform's per-user directory.
func TestDefaultDataDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv(envData, "")
	t.Setenv("XDG_DATA_HOME", "")
	if got, want := defaultDataDir(), filepath.Join(home, ".local", "share", "mcptape"); got != want && got != filepath.Join(home, "Library", "Application Support", "mcptape") {
		t.Errorf("no variables: %s, want %s", got, want)
	}
	t.Setenv("XDG_DATA_HOME", "/x/data")
	if got := defaultDataDir(); got != filepath.Join("/x/data", "mcptape") {
		t.Errorf("XDG_DATA_HOME: %s", got)
	}
	t.Setenv(envData, "/y/tapes")
	if got := defaultDataDir(); got != "/y/tapes" {
		t.Errorf("MCPTAPE_DATA: %s", got)
	}
	// ls with no --data reads the default directory, and says what to do
	// when nothing was recorded there yet.
	t.Setenv(envData, filepath.Join(home, "nothing-here"))
	if code, _, errOut := mcptape(t, "ls"); code == 0 || !strings.Contains(errOut, filepath.Join(home, "nothing-here")) || !strings.Contains(errOut, "mcptape demo") {
		t.Errorf("ls on an empty default directory: exit %d, %s", code, errOut)
	}
}

// TestDemoKeepRunning: with --keep-running the demo's proxy goes on
// recording for the user's own client until interrupted.
func TestDemoKeepRunning(t *testing.T) {
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done, exited := make(chan int, 1), make(chan struct{})
	go func() {
		done <- run(ctx, []string{"demo", "--keep-running", "--data", data}, &out, &errOut)
		close(exited)
	}()
	var modern string
	out.await(60*time.Second, exited, func(out string) bool {
		if _, after, ok := strings.Cut(out, "still running: point your MCP client at"); ok {
			for _, line := range strings.Split(after, "\n") {
				if strings.Contains(line, "(2026-07-28)") {
					modern = strings.Fields(line)[0]
				}
			}
		}
		return modern != ""
	})
	if modern == "" {
		select {
		case code := <-done:
			t.Fatalf("demo --keep-running exited %d:\n%s%s", code, out.String(), errOut.String())
		default:
		}
		t.Fatalf("demo never said it keeps running:\n%s", out.String())
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi from the user"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"keep-running-user","version":"1"}}}}`
	code, body := postBody(t, modern, call, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
	if code != 200 || !strings.Contains(body, "hi from the user") {
		t.Errorf("a call through the kept demo proxy: %d %s", code, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo exited %d after Ctrl-C:\n%s", code, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("demo --keep-running did not stop when interrupted")
	}
	// The user's call was recorded beside the demo's own sessions.
	if code, o, e := mcptape(t, "ls", "--data", data); code != 0 || strings.Count(o, "\n") != 4 || !strings.Contains(o, "keep-running-user") {
		t.Errorf("ls after demo --keep-running and a call of our own: %d\n%s%s", code, o, e)
	}
}

// TestRecordBoundFlags: --upstream-timeout and --max-request-body reach
// the proxy, and bad values are usage errors.
func TestRecordBoundFlags(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	defer close(release)
	r := startRecord(t, "--upstream", ts.URL+"/mcp", "--upstream-timeout", "300ms", "--max-request-body", "1KiB")
	code, body := post(t, r.base+"/mcp", nil)
	if code != http.StatusGatewayTimeout || !strings.Contains(body, "did not answer within 300ms") {
		t.Errorf("a silent upstream: %d %s", code, body)
	}
	code, body = postBody(t, r.base+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":"`+strings.Repeat("a", 2000)+`"}}}`, nil)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "--max-request-body") {
		t.Errorf("a 2 KB body with --max-request-body 1KiB: %d %s", code, body)
	}
	for _, args := range [][]string{
		{"--upstream-timeout", "-1s"}, {"--shutdown-timeout", "-1s"}, {"--max-request-body", "lots"},
	} {
		code, _, errOut := mcptape(t, append([]string{"record", "--upstream", ts.URL}, args...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d; %s", args, code, exitUsage, errOut)
		}
	}
}
