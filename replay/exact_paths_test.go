package replay_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// Exchanges on the server's origin that carry no MCP traffic come back as
// recorded: OAuth metadata probes, a CORS preflight, a path the server
// did not know (and a path the recording never saw gets the server's
// answer to an unknown path, naming that path, not a 405); a legacy SSE
// replay opens no SSE session for a GET on another path.
func TestNonMCPExchangesReplayed(t *testing.T) {
	t.Run("streamable HTTP", func(t *testing.T) {
		ev := everything(t, "")
		paths := []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server", "/favicon.ico"}
		drive := func(base string, paths []string) []got {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out []got
			for _, p := range paths {
				g, _ := send(t, ctx, "GET", base+p, "", nil)
				out = append(out, g)
			}
			g, _ := send(t, ctx, "OPTIONS", base+"/mcp", "", map[string]string{"Origin": "http://browser.example",
				"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,mcp-session-id"})
			return append(out, g)
		}
		var recorded []got
		tape := recordTape(t, ev.URL(), func(px string) {
			recorded = drive(px, append(paths, "/never-seen"))
		})
		ev.Close()
		if recorded[0].Status != http.StatusNotFound || recorded[4].Status != http.StatusNoContent || recorded[4].Header["Access-Control-Allow-Methods"] == "" {
			t.Fatalf("the recorded server's answers are not what this test is about: %+v", recorded)
		}
		s, hs := serve(t, tape, nil)
		sameAsRecorded(t, recorded, drive(hs.URL, append(paths, "/never-seen")))
		// A path the recording never saw: the recorded server's answer to a
		// path it did not know, naming this one.
		want := recorded[3]
		want.Request = "GET /not-recorded"
		want.Body = strings.ReplaceAll(want.Body, "/never-seen", "/not-recorded")
		g, _ := send(t, t.Context(), "GET", hs.URL+"/not-recorded", "", nil)
		sameAsRecorded(t, []got{want}, []got{g})
		if r := s.Report(); len(r.Misses) != 0 {
			t.Errorf("misses: %v", r.Misses)
		}
	})
	t.Run("legacy SSE", func(t *testing.T) {
		ev := everything(t, interop.TransportSSE)
		drive := func(base string) []got {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out []got
			for _, p := range []string{"/", "/favicon.ico"} {
				g, _ := send(t, ctx, "GET", base+p, "", map[string]string{"Accept": "text/event-stream"})
				out = append(out, g)
			}
			return out
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var recorded []got
		tape := recordTape(t, ev.URL(), func(px string) {
			if _, err := interop.RunClient(ctx, px+"/sse", &interop.ClientOptions{Transport: "sse"}); err != nil {
				t.Fatalf("recording: %v", err)
			}
			recorded = drive(px)
		})
		ev.Close()
		if recorded[0].Status != http.StatusNotFound {
			t.Fatalf("the recorded GET /: %+v", recorded[0])
		}
		s, hs := serve(t, tape, nil)
		sameAsRecorded(t, recorded, drive(hs.URL))
		// The recorded SSE session is still there for a client.
		if _, err := interop.RunClient(ctx, hs.URL+"/sse", &interop.ClientOptions{Transport: "sse"}); err != nil {
			t.Errorf("the SSE client against the replay: %v\n%+v", err, s.Report())
		}
	})
	t.Run("mcp-remote", func(t *testing.T) {
		// mcp-remote probes the server's OAuth metadata before it
		// connects; against the replay it gets the recorded answers and
		// bridges the TypeScript client as it did against the server.
		ev := everything(t, "")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		run := func(base string) *interop.ClientReport {
			remote, err := interop.MCPRemoteCommand(base + "/mcp")
			if err != nil {
				t.Fatal(err)
			}
			rep, err := interop.RunClient(ctx, "", &interop.ClientOptions{Transport: interop.TransportStdio, Command: remote,
				Env: []string{"HOME=" + t.TempDir()}})
			if err != nil {
				t.Fatalf("mcp-remote against %s: %v", base, err)
			}
			return rep
		}
		probes := func(tape *replay.Tape) []string {
			var out []string
			for _, ts := range tape.Sessions {
				for _, x := range ts.Exchanges {
					if strings.HasPrefix(x.URL, "/.well-known/") {
						out = append(out, fmt.Sprintf("%s %s %d", x.Method, x.URL, x.Status))
					}
				}
			}
			slices.Sort(out)
			return out
		}
		first := recordTape(t, ev.URL(), func(px string) { run(px) })
		if len(probes(first)) == 0 {
			t.Fatal("mcp-remote probed no well-known path while recorded")
		}
		ev.Close()
		s, hs := serve(t, first, &replay.ServerOptions{Timing: replay.TimingRecorded})
		// A recording of mcp-remote against the replay holds the same probes
		// with the same answers.
		again := recordTape(t, hs.URL, func(px string) {
			rep := run(px)
			for _, st := range rep.Steps {
				if !st.OK {
					t.Errorf("step %s failed through mcp-remote against the replay: %s", st.Name, st.Detail)
				}
			}
		})
		if d := cmp.Diff(probes(first), probes(again)); d != "" {
			t.Errorf("mcp-remote's probes were answered otherwise by the replay (-recorded +replayed):\n%s", d)
		}
		if r := s.Report(); len(r.Misses) != 0 {
			t.Errorf("misses: %v", r.Misses)
		}
	})
}

// The requests the replay server sends the client (sampling, elicitation,
// roots) carry the ids the recorded server gave them: a recording of a
// client against the replay holds the same ids as the first recording
// (go-sdk's server numbers them from 1; server-everything sends roots/list
// on the GET stream while sampling comes on a call's stream).
func TestServerRequestIDsAsRecorded(t *testing.T) {
	ids := func(tape *replay.Tape) []string {
		var out []string
		for _, ts := range tape.Sessions {
			for _, m := range ts.Messages {
				if m.Direction == protocol.ServerToClient && m.Kind == protocol.KindRequest {
					out = append(out, m.Method+" "+string(m.ID))
				}
			}
		}
		return out
	}
	check := func(t *testing.T, first *replay.Tape, drive func(base string)) {
		want := ids(first)
		if len(want) < 2 {
			t.Fatalf("the recording holds %q: too few server requests for this test", want)
		}
		_, hs := serve(t, first, &replay.ServerOptions{Timing: replay.TimingRecorded})
		again := recordTape(t, hs.URL, drive)
		if got := ids(again); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("the replay sent the server requests %q, the recorded server %q", got, want)
		}
	}
	t.Run("go-sdk", func(t *testing.T) {
		opts := &fixtures.ClientOptions{Only: []string{fixtures.ToolSample, fixtures.ToolElicitForm, fixtures.ToolRoots}}
		drive := func(base string) { runClient(t, base+fixtures.PathStateful, opts) }
		check(t, recordTape(t, liveServer(t, nil).URL, drive), drive)
	})
	t.Run("server-everything", func(t *testing.T) {
		ev := everything(t, "")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		drive := func(base string) {
			if _, err := interop.RunClient(ctx, base+"/mcp", nil); err != nil {
				t.Fatalf("the TypeScript client: %v", err)
			}
		}
		first := recordTape(t, ev.URL(), drive)
		ev.Close()
		check(t, first, drive)
	})
}
