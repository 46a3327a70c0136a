package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
)

// fidelityRuns is how many times each fidelity test records, exports and
// replays: a replay must satisfy the recorded client every time. The runs
// go two at a time (go test's -parallel): they mostly wait, on the
// recorded pace and on node.
const fidelityRuns = 10

// requirePeers skips the test when the npm peers are not installed, unless
// MCPTAPE_REQUIRE_PEERS=1 makes their absence a failure.
func requirePeers(t *testing.T) {
	t.Helper()
	if err := interop.Available(); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// observed is what the TypeScript client observed in a run, in a form two
// runs against the same recording must agree on: its steps and what they
// returned (the live session id aside), its counts, and every message it
// received — the responses in order, server requests and notifications in
// order by method (what several streams carry may interleave either way).
type observed struct {
	ProtocolVersion string
	ServerInfo      *interop.Implementation
	Tools           []string
	Steps           []interop.Step
	Counts          interop.Counts
	Responses       []interop.Received
	Requests        map[string][]json.RawMessage
	Notifications   map[string][]json.RawMessage
}

func observe(r *interop.ClientReport) observed {
	o := observed{ProtocolVersion: r.ProtocolVersion, ServerInfo: r.ServerInfo, Tools: r.Tools, Counts: r.Counts,
		Requests: map[string][]json.RawMessage{}, Notifications: map[string][]json.RawMessage{}}
	for _, s := range r.Steps {
		if s.Name == "initialize" {
			s.Detail = "" // names the live session id
		}
		o.Steps = append(o.Steps, s)
	}
	for _, m := range r.Transcript {
		switch m.Kind {
		case "response":
			o.Responses = append(o.Responses, m)
		case "request":
			o.Requests[m.Method] = append(o.Requests[m.Method], m.Params)
		default:
			o.Notifications[m.Method] = append(o.Notifications[m.Method], m.Params)
		}
	}
	return o
}

// The official TypeScript client against server-everything over Streamable
// HTTP: record through `mcptape record`, export at once while it still
// runs (no sleep), stop the server, replay the tape with `mcptape replay
// server --strict` at recorded timing — the client observes exactly what it
// did against the real server, every notification included, and the
// strict replay finds nothing, run after run.
func TestReplayFidelityEverything(t *testing.T) {
	requirePeers(t)
	for i := 1; i <= fidelityRuns; i++ {
		t.Run(fmt.Sprintf("run%02d", i), func(t *testing.T) {
			t.Parallel() // each run has its own server, store and ports
			fidelityEverything(t, i)
		})
	}
}

func fidelityEverything(t *testing.T, run int) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	rec := startRecord(t, "--upstream", ev.URL())
	opts := &interop.ClientOptions{Transcript: true}
	recorded, err := interop.RunClient(ctx, rec.base+"/mcp", opts)
	if err != nil {
		t.Fatalf("run %d, recording: %v", run, err)
	}
	tape := filepath.Join(t.TempDir(), "everything.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", rec.data, "-o", tape, "-q"); code != 0 {
		t.Fatalf("run %d, export while recording: exit %d: %s", run, code, errOut)
	}
	if code := rec.stop(t); code != 0 {
		t.Fatalf("run %d: record exited %d: %s", run, code, rec.errOut.String())
	}
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	base, stop := startReplayServer(t, "--tape", tape, "--strict", "--timing", "recorded")
	replayed, err := interop.RunClient(ctx, base+"/mcp", opts)
	code, out := stop()
	if err != nil {
		t.Errorf("run %d: the TypeScript client against the replay: %v\nreplay server:\n%s", run, err, out)
		return false
	}
	ok := true
	if d := cmp.Diff(observe(recorded), observe(replayed)); d != "" {
		t.Errorf("run %d: the client observed something else from the replay (-recorded +replayed):\n%s", run, d)
		ok = false
	}
	if len(recorded.Transcript) < 20 || recorded.Counts.Log == 0 || recorded.Counts.Progress == 0 || recorded.Counts.ResourceUpdated == 0 {
		t.Errorf("run %d: the recorded run proves little: %d messages received, counts %+v", run, len(recorded.Transcript), recorded.Counts)
		ok = false
	}
	if code != 0 || !strings.Contains(out, ", 0 miss(es)") || strings.Contains(out, "strict replay found") {
		t.Errorf("run %d: the strict replay server: exit %d\n%s", run, code, out)
		ok = false
	}
	return ok
}

// wireTap is an http.RoundTripper that keeps what a client received: each
// response's JSON-RPC messages, ids set to 0, in order, one entry per
// response.
type wireTap struct {
	tr   http.RoundTripper
	mu   sync.Mutex
	rx   []string
	open int // response bodies not finished yet
}

func (w *wireTap) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := w.tr.RoundTrip(req)
	if err != nil || res.Body == nil {
		return res, err
	}
	label := req.Method + " " + req.Header.Get("Mcp-Method") + " " + req.Header.Get("Mcp-Name") + " → " + strconv.Itoa(res.StatusCode)
	w.mu.Lock()
	w.open++
	w.mu.Unlock()
	res.Body = &tapBody{ReadCloser: res.Body, sse: strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream"),
		done: func(msgs []string) {
			w.mu.Lock()
			w.rx = append(w.rx, label+"\n"+strings.Join(msgs, "\n"))
			w.open--
			w.mu.Unlock()
		}}
	return res, nil
}

// received is every response's messages, as a sorted list (the streams of
// one run interleave either way), once every response body has ended: the
// client closes its long-lived streams as its run ends, but not
// necessarily before it returns.
func (w *wireTap) received(t *testing.T) []string {
	t.Helper()
	fixtures.Eventually(t, 5*time.Second, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.open != 0 {
			return fmt.Errorf("%d response bodies still open after the client's run", w.open)
		}
		return nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(slices.Values(w.rx))
}

type tapBody struct {
	io.ReadCloser
	sse  bool
	buf  bytes.Buffer
	once sync.Once
	done func([]string)
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	if err != nil {
		b.finish()
	}
	return n, err
}

func (b *tapBody) Close() error {
	b.finish()
	return b.ReadCloser.Close()
}

func (b *tapBody) finish() {
	b.once.Do(func() {
		var msgs []string
		add := func(data []byte) {
			for _, m := range protocol.Split(data) {
				raw := m.Raw
				if out, ok := protocol.SetMember(raw, []byte("0"), "id"); ok {
					raw = out
				}
				msgs = append(msgs, string(raw))
			}
		}
		if !b.sse {
			if bytes.TrimSpace(b.buf.Bytes()) != nil {
				add(b.buf.Bytes())
			}
		} else {
			p := &protocol.SSEParser{}
			emit := func(ev *protocol.Event) {
				if ev.IsMessage() && !ev.Unterminated {
					add(bytes.Clone(ev.Data))
				}
			}
			p.Feed(b.buf.Bytes(), emit)
		}
		b.done(msgs)
	})
}

// A go-sdk client on 2026-07-28 with multi round-trip requests (MRTR)
// against the go-sdk fixture server's stateless endpoint: record through
// `mcptape record`, export at once, stop the server, replay with `mcptape
// replay server --strict` at recorded timing — the client's report (every
// step's answer, every count) and every message it received are those of
// the recorded run, and the strict replay finds nothing, run after run.
func TestReplayFidelityGoSDKMRTR(t *testing.T) {
	for i := 1; i <= fidelityRuns; i++ {
		t.Run(fmt.Sprintf("run%02d", i), func(t *testing.T) {
			t.Parallel() // each run has its own server, store and ports
			fidelityGoSDK(t, i)
		})
	}
}

func fidelityGoSDK(t *testing.T, run int) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := httptest.NewServer(fixtures.Handler(nil))
	defer srv.Close()
	rec := startRecord(t, "--upstream", srv.URL)
	client := func(u string) (*fixtures.Report, *wireTap) {
		tr := &http.Transport{Proxy: nil}
		defer tr.CloseIdleConnections()
		tap := &wireTap{tr: tr}
		rep, err := fixtures.RunClient(ctx, u, &fixtures.ClientOptions{HTTPClient: &http.Client{Transport: tap}})
		if err != nil {
			t.Fatalf("run %d: the fixture client at %s: %v", run, u, err)
		}
		rep.URL = ""
		return rep, tap
	}
	recorded, recWire := client(rec.base + fixtures.PathStateless)
	tape := filepath.Join(t.TempDir(), "mrtr.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", rec.data, "-o", tape, "-q"); code != 0 {
		t.Fatalf("run %d, export while recording: exit %d: %s", run, code, errOut)
	}
	if code := rec.stop(t); code != 0 {
		t.Fatalf("run %d: record exited %d: %s", run, code, rec.errOut.String())
	}
	srv.CloseClientConnections()
	srv.Close()
	ok := true
	if recorded.ProtocolVersion != "2026-07-28" || !hasRounds(recorded) {
		t.Errorf("run %d: the recorded run is not a 2026-07-28 one with MRTR rounds: %s", run, recorded)
		ok = false
	}
	base, stop := startReplayServer(t, "--tape", tape, "--strict", "--timing", "recorded")
	replayed, repWire := client(base + fixtures.PathStateless)
	code, out := stop()
	if d := cmp.Diff(recorded, replayed); d != "" {
		t.Errorf("run %d: the client's report differs against the replay (-recorded +replayed):\n%s", run, d)
		ok = false
	}
	if d := cmp.Diff(recWire.received(t), repWire.received(t)); d != "" {
		t.Errorf("run %d: the client received something else from the replay (-recorded +replayed):\n%s", run, d)
		ok = false
	}
	if code != 0 || !strings.Contains(out, ", 0 miss(es)") || strings.Contains(out, "strict replay found") {
		t.Errorf("run %d: the strict replay server: exit %d\n%s", run, code, out)
		ok = false
	}
	return ok
}

func hasRounds(r *fixtures.Report) bool {
	for _, s := range r.Steps {
		if s.Rounds > 1 {
			return true
		}
	}
	return false
}

// The official TypeScript client over stdio, through `mcptape wrap` around
// server-everything in stdio mode: export at once (nothing owns the store:
// export reads the wrap's spool), the wrapped server is gone once the
// client closed, replay the tape with `mcptape replay server --stdio
// --strict` at recorded timing — the client observes what it observed
// against the real server (see overStdio), and the strict replay finds
// nothing, run after run.
func TestReplayFidelityStdio(t *testing.T) {
	requirePeers(t)
	ev, err := interop.EverythingCommand()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= fidelityRuns; i++ {
		t.Run(fmt.Sprintf("run%02d", i), func(t *testing.T) {
			t.Parallel() // each run has its own server, store and ports
			fidelityStdio(t, i, ev)
		})
	}
}

func fidelityStdio(t *testing.T, run int, ev []string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data := t.TempDir()
	opts := func(args ...string) *interop.ClientOptions {
		return &interop.ClientOptions{Transport: interop.TransportStdio, Transcript: true, Command: mcptapeArgv(t, args...),
			Env: []string{asMcptapeEnv + "=1"}}
	}
	recorded, err := interop.RunClient(ctx, "", opts(append([]string{"wrap", "--data", data, "--name", "everything", "--"}, ev...)...))
	if err != nil {
		t.Fatalf("run %d, recording through wrap: %v", run, err)
	}
	tape := filepath.Join(t.TempDir(), "stdio.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", data, "-o", tape, "-q"); code != 0 {
		t.Fatalf("run %d, export: exit %d: %s", run, code, errOut)
	}
	replayed, err := interop.RunClient(ctx, "", opts("replay", "server", "--stdio", "--tape", tape, "--strict", "--timing", "recorded"))
	if err != nil {
		t.Errorf("run %d: the TypeScript stdio client against the replay: %v", run, err)
		return false
	}
	ok := !t.Failed()
	// server-everything over stdio writes its last progress notification
	// and its result in one go, so the client it was recorded with may miss
	// that notification's callback (the SDK runs it a tick after settling
	// the result); the replay keeps them apart, and the client gets every
	// callback. So the counts are compared with what the client received.
	rec, rep := overStdio(observe(recorded)), overStdio(observe(replayed))
	rec.Counts.Progress, rep.Counts.Progress = 0, 0
	for _, o := range []*observed{&rec, &rep} {
		for i := range o.Steps {
			if o.Steps[i].Name == "trigger-long-running-operation" {
				o.Steps[i].Detail = "" // "N progress notifications", as the callback counted
			}
		}
	}
	if d := cmp.Diff(rec, rep); d != "" {
		t.Errorf("run %d: the client observed something else from the replay (-recorded +replayed):\n%s", run, d)
		ok = false
	}
	if n := len(rep.Notifications["notifications/progress"]); replayed.Counts.Progress != n || n == 0 {
		t.Errorf("run %d: against the replay the client's progress callback ran %d times for %d progress notifications", run, replayed.Counts.Progress, n)
		ok = false
	}
	progressBeforeResponse(t, replayed)
	if len(recorded.Transcript) < 20 || recorded.Counts.Log == 0 || recorded.Counts.ResourceUpdated == 0 {
		t.Errorf("run %d: the recorded run proves little: %d messages received, counts %+v", run, len(recorded.Transcript), recorded.Counts)
		ok = false
	}
	if !strings.Contains(replayed.Stderr, ", 0 miss(es)") || strings.Contains(replayed.Stderr, "strict replay found") {
		t.Errorf("run %d: the strict stdio replay's report:\n%s", run, replayed.Stderr)
		ok = false
	}
	return ok && !t.Failed()
}
