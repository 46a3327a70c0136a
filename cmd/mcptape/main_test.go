package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // closed at the next write, for await
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote != nil {
		close(s.wrote)
		s.wrote = nil
	}
	return s.b.Write(p)
}

// await waits until found holds of what has been written, looking again
// at each write; it gives up, returning false, when within has passed or
// exited (nil for none) is closed with found still false.
func (s *syncBuffer) await(within time.Duration, exited <-chan struct{}, found func(string) bool) bool {
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		if s.wrote == nil {
			s.wrote = make(chan struct{})
		}
		wrote, text := s.wrote, s.b.String()
		s.mu.Unlock()
		if found(text) {
			return true
		}
		select {
		case <-wrote:
		case <-exited:
			return found(s.String())
		case <-timeout.C:
			return false
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// within is a context that ends after d, or when the test ends: a bound
// for a client run that would otherwise wait as long as its server does.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func mcptape(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var o, e syncBuffer
	code = run(ctx, args, &o, &e)
	return code, o.String(), e.String()
}

func TestDemo(t *testing.T) {
	data := t.TempDir()
	code, out, errOut := mcptape(t, "demo", "--data", data)
	demoOut := out
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"recorded sessions:", "2025-11-25", "2026-07-28", "show --data " + data + " --tree ", "dashboard --data " + data, "export --data " + data, "replay server --tape ", "0 lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = mcptape(t, "ls", "--data", data, "--json")
	if code != 0 {
		t.Fatalf("ls exited %d: %s", code, errOut)
	}
	var sessions []capture.Session
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var s capture.Session
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("ls --json line %q: %v", sc.Text(), err)
		}
		sessions = append(sessions, s)
	}
	versions := map[string]bool{}
	for _, s := range sessions {
		versions[s.Version] = true
		if s.Client.Name != fixtures.ClientName || s.Calls == 0 {
			t.Errorf("session %s: client %q, %d calls", s.ID, s.Client.Name, s.Calls)
		}
	}
	if len(sessions) != 2 || !versions[protocol.V20251125] || !versions[protocol.V20260728] {
		t.Fatalf("ls --json: %d sessions, versions %v; want one per era", len(sessions), versions)
	}
	// show, plain and JSON, by a unique prefix of the id.
	for _, s := range sessions {
		code, out, errOut = mcptape(t, "show", "--data", data, s.ID)
		if code != 0 || !strings.Contains(out, "tools/call echo") || !strings.Contains(out, "OFFSET") {
			t.Errorf("show %s: exit %d\n%s%s", s.ID, code, out, errOut)
		}
		code, out, errOut = mcptape(t, "show", s.ID, "--json", "--data", data)
		if code != 0 {
			t.Fatalf("show --json: %d %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var first struct {
			Seq    uint64          `json:"seq"`
			Dir    string          `json:"dir"`
			Kind   string          `json:"kind"`
			Method string          `json:"method"`
			Raw    json.RawMessage `json:"raw"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
			t.Fatal(err)
		}
		if first.Dir != "c2s" || first.Kind != "request" || first.Method != protocol.MethodDiscover || !bytes.Contains(first.Raw, []byte(`"server/discover"`)) {
			t.Errorf("show --json first line: %s", lines[0])
		}
		if len(lines) != s.Messages {
			t.Errorf("show --json printed %d messages, the session has %d", len(lines), s.Messages)
		}
	}
	demoNextSteps(t, demoOut)
}

// demoNextSteps runs the commands the demo printed as next steps, as
// printed (the two servers on a free port instead of their default, which
// another program may hold), from a fresh working directory.
func demoNextSteps(t *testing.T, out string) {
	t.Helper()
	_, steps, ok := strings.Cut(out, "\nnext steps")
	if !ok {
		t.Fatalf("the demo printed no next steps:\n%s", out)
	}
	self := selfCommand()
	t.Chdir(t.TempDir())
	var ran []string
	for line := range strings.Lines(steps) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, self+" ") {
			continue
		}
		args := strings.Fields(strings.TrimPrefix(line, self+" "))
		ran = append(ran, args[0])
		switch args[0] {
		case "dashboard":
			dashURL, _, stop := startCmd(t, "at ", append(args, "--listen", "127.0.0.1:0")...)
			// As a browser opens the printed URL: its token becomes a cookie.
			jar, _ := cookiejar.New(nil)
			res, err := (&http.Client{Jar: jar}).Get(strings.TrimSpace(dashURL))
			if err != nil || res.StatusCode != http.StatusOK {
				t.Errorf("%s: GET %s: %v %v", line, dashURL, res, err)
			}
			if res != nil {
				res.Body.Close()
			}
			stop()
		case "replay":
			base, _, stop := startCmd(t, "mcptape replay: serving ", append(args, "--listen", "127.0.0.1:0")...)
			if !strings.Contains(base, "2 session(s)") {
				t.Errorf("%s: serving %q, want the demo's 2 sessions", line, base)
			}
			stop()
		default:
			if code, o, e := mcptape(t, args...); code != 0 {
				t.Errorf("%s: exit %d\n%s%s", line, code, o, e)
			}
		}
	}
	if strings.Join(ran, " ") != "ls show dashboard export replay" {
		t.Errorf("the demo's next steps ran %q, want ls, show, dashboard, export and replay", ran)
	}
}

func TestRecordWhileLsAndShow(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data)
	proxyURL := r.wait(t, "point your MCP client at ")
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	rep, err := fixtures.RunClient(within(t, time.Minute), proxyURL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{"echo", "sample"}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("client through record: %v %v", err, failures(rep))
	}
	// The recorder holds the Badger directory; ls asks it over its API.
	if _, err := badgerstore.Open(data, nil); err == nil {
		t.Fatal("the store opened twice: the recorder should hold its lock")
	}
	if _, err := remotestore.ReadAnnouncement(data); err != nil {
		t.Fatalf("no announcement: %v", err)
	}
	var lsOut string
	fixtures.Eventually(t, 10*time.Second, func() error {
		code, o, e := mcptape(t, "ls", "--data", data)
		if code != 0 {
			t.Fatalf("ls while recording: %d %s", code, e)
		}
		if lsOut = o; !strings.Contains(o, "legacy") || !strings.Contains(o, fixtures.ClientName) {
			return fmt.Errorf("ls while recording does not show the session:\n%s", o)
		}
		return nil
	})
	id := strings.Fields(strings.Split(lsOut, "\n")[1])[0]
	if code, o, e := mcptape(t, "show", "--data", data, id[:12]); code != 0 || !strings.Contains(o, "sampling/createMessage") {
		t.Errorf("show while recording: %d\n%s%s", code, o, e)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	if !strings.Contains(r.out.String(), "0 lost") {
		t.Errorf("record's summary: %s", r.out.String())
	}
	// After the recorder is gone, ls opens the store itself.
	if code, o, e := mcptape(t, "ls", "--data", data); code != 0 || !strings.Contains(o, id) {
		t.Errorf("ls after recording: %d\n%s%s", code, o, e)
	}
}

func TestErrorsSayWhatToDo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ls", "--data", missing}, 1, "mcptape demo"},
		{[]string{"record"}, 2, "say what to record: --upstream URL"},
		{[]string{"record", "--upstream", "ftp://x"}, 2, "not an http(s) URL"},
		{[]string{"show", "--data", t.TempDir()}, 2, "name one session"},
		{[]string{"frobnicate"}, 2, "mcptape help"},
	} {
		code, _, errOut := mcptape(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("mcptape %v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	// A store held by a process that offers no API.
	dir := t.TempDir()
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	code, _, errOut := mcptape(t, "ls", "--data", dir)
	if code != 1 || !strings.Contains(errOut, "locked by another process") {
		t.Errorf("ls on a locked store: %d %q", code, errOut)
	}
	code, _, errOut = mcptape(t, "show", "--data", dir, "nosuch")
	if code != 1 || !strings.Contains(errOut, "locked") {
		t.Errorf("show on a locked store: %d %q", code, errOut)
	}
}

func TestFixtureClientCommand(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	code, out, errOut := mcptape(t, "fixture", "client", "--url", up.URL+fixtures.PathStateless, "--only", "echo,sample")
	if code != 0 || !strings.Contains(out, "protocol 2026-07-28") || !strings.Contains(out, "sampled: ") {
		t.Fatalf("fixture client: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = mcptape(t, "fixture", "client", "--url", up.URL+fixtures.PathStateful, "--json")
	var rep fixtures.Report
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.ProtocolVersion != protocol.V20251125 || rep.Step("sample_tools") == nil {
		t.Fatalf("fixture client --json: exit %d %s", code, out)
	}
}
