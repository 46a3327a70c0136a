package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/proxy"
)

// urlRE finds the URL a command prints where it listens.
var urlRE = regexp.MustCompile(`https?://[^\s/,]+`)

// childRecord starts `mcptape record` as a child process (this test
// binary, running TestBenchChild), and returns it with its proxy's base
// URL once it listens.
func childRecord(t testing.TB, data string, args ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(append([]string{"record", "--listen", "127.0.0.1:0", "--dashboard", "off", "--data", data}, args...))
	cmd := exec.Command(exe, "-test.run=^TestBenchChild$")
	cmd.Env = append(os.Environ(), benchChildEnv+"="+string(b))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out := &syncBuffer{}
	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			out.Write([]byte(line + "\n"))
			if _, rest, ok := strings.Cut(line, "point your MCP client at "); ok {
				base <- urlRE.FindString(rest)
			}
		}
	}()
	select {
	case u := <-base:
		return cmd, u, out
	case <-time.After(30 * time.Second):
		t.Fatalf("record did not start:\n%s\n%s", out.String(), errOut.String())
	}
	return nil, "", nil
}

// TestRecordSIGTERM stops a real `mcptape record` process with SIGTERM
// while a client holds a GET stream, a call that is about to finish and a
// call whose stream never ends: the GET stream is cut at once, a new call
// is refused, the call in flight finishes, the endless stream is cut at
// --shutdown-timeout, each cut is recorded as cut by shutdown, the store
// is flushed and recorder.json removed, and the process exits 0.
func TestRecordSIGTERM(t *testing.T) {
	slowStarted := make(chan struct{})
	var once sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": open\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case strings.Contains(string(body), `"slow"`):
			once.Do(func() { close(slowStarted) })
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"finished"}]}}`)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":2,\"progress\":1}}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	cmd, base, out := childRecord(t, data, "--upstream", up.URL+"/mcp", "--shutdown-timeout", "2s")
	if _, err := os.Stat(filepath.Join(data, remotestore.AnnouncementFile)); err != nil {
		t.Fatalf("recorder.json while recording: %v", err)
	}

	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	send := func(method, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, method, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		return hc.Do(req)
	}
	get, err := send("GET", "")
	if err != nil {
		t.Fatal(err)
	}
	stream, err := send("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"stream"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(stream.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	slow := make(chan string, 1)
	go func() {
		res, err := send("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
		if err != nil {
			slow <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		slow <- fmt.Sprintf("%d %s", res.StatusCode, b)
	}()
	select {
	case <-slowStarted:
	case got := <-slow:
		t.Fatalf("the slow call ended before the upstream saw it: %s", got)
	case <-time.After(20 * time.Second):
		t.Fatal("the slow call did not reach the upstream within 20s")
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, get.Body); err == nil {
		t.Error("the GET stream ended cleanly; want it cut")
	}
	t.Logf("GET stream cut %v after SIGTERM", time.Since(start))
	res, err := send("POST", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || !strings.Contains(string(b), "shutting down") {
		t.Errorf("a new call after SIGTERM: %d %s", res.StatusCode, b)
	}
	if got := <-slow; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, "finished") {
		t.Errorf("the call in flight: %s", got)
	}
	t.Logf("the call in flight finished %v after SIGTERM", time.Since(start))
	if _, err := io.Copy(io.Discard, stream.Body); err == nil {
		t.Error("the endless stream ended cleanly; want it cut")
	}
	cut := time.Since(start)
	t.Logf("the endless stream cut %v after SIGTERM", cut)
	if cut < 1900*time.Millisecond || cut > 5*time.Second {
		t.Errorf("the endless stream was cut %v after SIGTERM; want it at the 2s bound", cut)
	}
	// Its stdout is read by childRecord's goroutine, and Wait closes the
	// pipe once the process has exited, whatever is left unread in it:
	// wait for the summary, the last line, before waiting for the process.
	if !out.await(15*time.Second, nil, func(s string) bool { return strings.Contains(s, "mcptape: stopped: ") }) {
		t.Fatalf("record printed no summary within 15s of SIGTERM:\n%s", out.String())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("record exited: %v\n%s", err, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("record still running 15s after SIGTERM:\n%s", out.String())
	}
	t.Logf("exited %v after SIGTERM:\n%s", time.Since(start), out.String())
	if !strings.Contains(out.String(), "calls in flight have up to 2s to finish") || !strings.Contains(out.String(), "0 lost") {
		t.Errorf("stdout:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(data, remotestore.AnnouncementFile)); !os.IsNotExist(err) {
		t.Errorf("recorder.json after exit: %v", err)
	}

	st, err := badgerstore.Open(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var results int
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for x, err := range st.Exchanges(ctx, s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case x.Method == "GET" || x.Events > 0:
				if !x.Aborted || x.Error != proxy.ErrShutdown.Error() {
					t.Errorf("stream %s: aborted %v, error %q; want cut by shutdown", x.Method, x.Aborted, x.Error)
				}
			case x.Status == 503:
			case x.Aborted || x.Status != 200:
				t.Errorf("exchange %+v", x)
			}
		}
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(m.Raw), "finished") {
				results++
			}
		}
	}
	if results != 1 {
		t.Errorf("the finished call's result stored %d times, want 1", results)
	}
}
