package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
)

// `replay server --stdio` speaks on stdin and stdout, and keeps stdout for
// the protocol: the banner, the logs and the strict report go to stderr.
func TestReplayServerStdioCommand(t *testing.T) {
	tape := recordTapeFile(t, fixtures.PathStateless, "echo")
	echo := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, tape"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	other := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bye"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	defer func(r any) { replayStdin = os.Stdin }(nil)
	replayStdin = strings.NewReader(echo + "\n" + other + "\n")
	code, out, errOut := mcptape(t, "replay", "server", "--stdio", "--tape", tape, "--strict")
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	// Answers go out as they are ready (the echo at its recorded pace).
	slices.Sort(lines)
	if len(lines) != 2 || !strings.Contains(lines[0], `"id":7,"result"`) || !strings.Contains(lines[0], "hello, tape") ||
		!strings.Contains(lines[1], `"id":8,"error":{"code":-32010`) {
		t.Errorf("stdout holds other than the two answers:\n%s", out)
	}
	if code != exitError || !strings.Contains(errOut, "on stdin and stdout") || !strings.Contains(errOut, "served 1 request(s), 1 miss(es)") ||
		!strings.Contains(errOut, "strict replay found 1 difference(s)") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if code, _, errOut := mcptape(t, "replay", "server", "--stdio", "--tape", tape, "--listen", "127.0.0.1:0"); code != exitUsage || !strings.Contains(errOut, "--listen") {
		t.Errorf("--stdio with --listen: exit %d, %s", code, errOut)
	}
}

// The official TypeScript client over stdio (StdioClientTransport) against
// `mcptape replay server --stdio` of a tape it recorded over Streamable
// HTTP from server-everything: every step passes, its handlers are called
// as often, and it receives what it received over HTTP.
func TestReplayServerStdioTypeScriptClient(t *testing.T) {
	tape := recordEverythingTape(t)
	for _, timing := range []string{"recorded", "fast"} {
		t.Run(timing, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			replayed, err := interop.RunClient(ctx, "", &interop.ClientOptions{Transport: interop.TransportStdio, Transcript: true,
				Command: mcptapeArgv(t, "replay", "server", "--stdio", "--tape", tape.path, "--strict", "--timing", timing), Env: []string{asMcptapeEnv + "=1"}})
			if err != nil {
				t.Fatalf("the TypeScript stdio client against the replay: %v", err)
			}
			for _, st := range replayed.Steps {
				if !st.OK {
					t.Errorf("step %s failed over stdio: %s", st.Name, st.Detail)
				}
			}
			if d := cmp.Diff(overStdio(observe(tape.recorded)), overStdio(observe(replayed))); d != "" {
				t.Errorf("over stdio the client observed something else (-recorded over HTTP +replayed over stdio):\n%s", d)
			}
			progressBeforeResponse(t, replayed)
			if !strings.Contains(replayed.Stderr, ", 0 miss(es)") || strings.Contains(replayed.Stderr, "strict replay found") {
				t.Errorf("the strict stdio replay's report:\n%s", replayed.Stderr)
			}
		})
	}
}

// everythingTape is a tape of the TypeScript client's run against
// server-everything over Streamable HTTP, and what that client observed.
type everythingTape struct {
	path     string
	recorded *interop.ClientReport
}

// recordEverythingTape records the TypeScript client against
// server-everything through `mcptape record` and exports the tape.
func recordEverythingTape(t *testing.T) everythingTape {
	t.Helper()
	requirePeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	rec := startRecord(t, "--upstream", ev.URL())
	recorded, err := interop.RunClient(ctx, rec.base+"/mcp", &interop.ClientOptions{Transcript: true})
	if err != nil {
		t.Fatalf("recording: %v", err)
	}
	if code := rec.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, rec.errOut.String())
	}
	ev.Close()
	tape := filepath.Join(t.TempDir(), "everything.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", rec.data, "-o", tape, "-q"); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	return everythingTape{tape, recorded}
}

// overStdio is what a stdio run of the TypeScript client is compared on:
// there is no session to terminate over stdio. The progress handler's
// count is compared: the replay keeps a call's response apart from the
// progress notifications before it (the SDK runs a notification's handler
// a tick after it settles a response read in the same chunk), at recorded
// timing (where the recording has the last notification and the response
// in the same microsecond) and fast alike.
func overStdio(o observed) observed {
	o.Steps = slices.DeleteFunc(o.Steps, func(s interop.Step) bool { return s.Name == "terminate-session" })
	return o
}

// progressBeforeResponse checks that the client received every progress
// notification of the long-running call before its response.
func progressBeforeResponse(t *testing.T, r *interop.ClientReport) {
	t.Helper()
	last, response := -1, -1
	for i, m := range r.Transcript {
		switch {
		case m.Method == "notifications/progress":
			last = i
		case m.Kind == "response" && strings.Contains(string(m.Result), "Long running operation completed"):
			response = i
		}
	}
	if last < 0 || response < last {
		t.Errorf("the last progress notification came at %d, the response of its call at %d", last, response)
	}
}
