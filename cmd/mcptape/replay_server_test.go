package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// recordTapeFile records the fixture client on path and writes a tape file.
func recordTapeFile(t *testing.T, path string, only ...string) string {
	t.Helper()
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	store := memstore.New()
	ctx := context.Background()
	rec, _ := capture.NewRecorder(ctx, store, nil)
	u, _ := url.Parse(up.URL)
	p, _ := proxy.New(&proxy.Options{Upstream: u, Recorder: rec})
	px := httptest.NewServer(p)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	if _, err := fixtures.RunClient(within(t, time.Minute), px.URL+path, &fixtures.ClientOptions{HTTPClient: hc, Only: only}); err != nil {
		t.Fatal(err)
	}
	px.CloseClientConnections()
	px.Close()
	rec.Close(ctx)
	var buf bytes.Buffer
	if err := replay.Export(ctx, store, nil, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "fixture.tape.json")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// startReplayServer runs `mcptape replay server` until the returned stop.
func startReplayServer(t *testing.T, args ...string) (base string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"replay", "server", "--listen", "127.0.0.1:0", "--timing", "fast"}, args...), &out, &errOut)
	}()
	out.await(10*time.Second, nil, func(out string) bool {
		for _, line := range strings.Split(out, "\n") {
			if _, rest, ok := strings.Cut(line, " at http://"); ok {
				base = "http://" + strings.Fields(rest)[0]
				base = strings.TrimSuffix(base, ",")
			}
		}
		return base != ""
	})
	if base == "" {
		cancel()
		t.Fatalf("replay server did not start: %s %s", out.String(), errOut.String())
	}
	return base, func() (int, string) {
		cancel()
		select {
		case code := <-done:
			return code, out.String() + errOut.String()
		case <-time.After(10 * time.Second):
			t.Fatal("replay server did not stop")
			return -1, ""
		}
	}
}

func TestReplayServerCommand(t *testing.T) {
	tape := recordTapeFile(t, fixtures.PathStateless, "echo", "sample")
	base, stop := startReplayServer(t, "--tape", tape, "--strict")
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	rep, err := fixtures.RunClient(within(t, time.Minute), base+fixtures.PathStateless, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{"echo", "sample"}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("client against the replay: %v %v", err, failures(rep))
	}
	if got := rep.Step("sample").Text; got != "sampled: Say hello to the tape." {
		t.Errorf("sample through the replay: %q", got)
	}
	code, out := stop()
	if code != 0 || !strings.Contains(out, "0 miss(es)") {
		t.Errorf("replay server: exit %d\n%s", code, out)
	}

	// A request the tape cannot answer makes a strict replay fail at exit.
	base, stop = startReplayServer(t, "--tape", tape, "--strict")
	rep, err = fixtures.RunClient(within(t, time.Minute), base+fixtures.PathStateless, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{"add"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Step("add"); s == nil || !strings.Contains(s.Err, "no recorded tools/call add matches") {
		t.Errorf("unrecorded call: %+v", s)
	}
	code, out = stop()
	if code != 1 || !strings.Contains(out, "strict replay found") || !strings.Contains(out, "closest recorded request") {
		t.Errorf("strict replay server with a miss: exit %d\n%s", code, out)
	}
}

func TestReplayServerErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.tape.json")
	os.WriteFile(bad, []byte(`{"format":"mcptape-tape","version":99,"sessions":[]}`), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay", "server"}, 2, "--tape is required"},
		{[]string{"replay", "server", "--tape", bad}, 1, "unsupported tape version: version 99"},
		{[]string{"replay", "server", "--tape", "/nonexistent.tape.json"}, 1, "no such file"},
		{[]string{"replay", "server", "--tape", bad, "--timing", "slow"}, 2, "want recorded or fast"},
		{[]string{"replay", "sideways"}, 2, "want server or client"},
	} {
		code, _, errOut := mcptape(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("mcptape %v: exit %d, stderr %q; want %d mentioning %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// TestReplayServerHostCheck: like record, the replay server refuses a
// foreign Host on its loopback listener (DNS rebinding) unless
// --allow-any-host.
func TestReplayServerHostCheck(t *testing.T) {
	tape := recordTapeFile(t, fixtures.PathStateless, "echo")
	echo := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, tape"}}}`
	h := map[string]string{"Host": "attacker.example", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
	base, stop := startReplayServer(t, "--tape", tape)
	if code, body := postBody(t, base+fixtures.PathStateless, echo, h); code != http.StatusForbidden || !strings.Contains(body, "--allow-any-host") {
		t.Errorf("a foreign Host got %d %s, want 403 naming --allow-any-host", code, body)
	}
	stop()
	base, stop = startReplayServer(t, "--tape", tape, "--allow-any-host")
	defer stop()
	if code, body := postBody(t, base+fixtures.PathStateless, echo, h); code != http.StatusOK || !strings.Contains(body, "hello, tape") {
		t.Errorf("--allow-any-host: a foreign Host got %d %s, want the recorded answer", code, body)
	}
}
