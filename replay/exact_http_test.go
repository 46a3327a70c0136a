package replay_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/replay"
)

// The refusals of a TypeScript-SDK server (server-everything) come back
// from the replay as they came from the server: HTTP 400 with a JSON-RPC
// error whose id is null (a request without a session, one naming a
// session the server never gave), not HTTP 200 with the replay's own
// "no answer" error.
func TestRefusalsReplayedAsRecorded(t *testing.T) {
	ev := everything(t, "")
	drive := func(base string) []got {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := base + "/mcp"
		var out []got
		for _, req := range []struct {
			method, body string
			h            map[string]string
		}{
			{"POST", rpc(1, "tools/list", ""), nil},
			{"POST", rpc(2, "tools/list", ""), map[string]string{"Mcp-Session-Id": "not-a-session", "Mcp-Protocol-Version": "2025-11-25"}},
			{"GET", "", map[string]string{"Accept": "text/event-stream"}},
		} {
			g, _ := send(t, ctx, req.method, u, req.body, req.h)
			out = append(out, g)
		}
		return out
	}
	recorded, replayed, s := recordThenReplay(t, ev.URL(), func() { ev.Close() }, nil, drive)
	if recorded[0].Status != http.StatusBadRequest || !strings.Contains(recorded[0].Body, `"id":null`) {
		t.Fatalf("the recorded server did not refuse with 400 and id null: %+v", recorded[0])
	}
	sameAsRecorded(t, recorded, replayed)
	if r := s.Report(); !r.OK() {
		t.Errorf("strict replay: %q", r.Failures)
	}
}

// After a DELETE, a request naming the ended session gets what the
// recorded server said to such a request (server-everything: 400 -32000),
// not a made-up 404 -32001.
func TestSessionEndAsRecorded(t *testing.T) {
	ev := everything(t, "")
	drive := func(base string) []got {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := base + "/mcp"
		g, sid := send(t, ctx, "POST", u, rpc(1, "initialize", legacyInit), nil)
		h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
		out := []got{g}
		for _, req := range []struct{ method, body string }{
			{"POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
			{"DELETE", ""},
			{"POST", rpc(2, "tools/list", "")},
			{"DELETE", ""},
		} {
			g, _ := send(t, ctx, req.method, u, req.body, h)
			out = append(out, g)
		}
		return out
	}
	recorded, replayed, s := recordThenReplay(t, ev.URL(), func() { ev.Close() }, nil, drive)
	if recorded[3].Status == http.StatusNotFound || !strings.Contains(recorded[3].Body, "-32000") {
		t.Fatalf("the recorded server's answer after DELETE: %+v", recorded[3])
	}
	sameAsRecorded(t, recorded, replayed)
	if r := s.Report(); !r.OK() {
		t.Errorf("strict replay: %q", r.Failures)
	}
}

// The headers a client or a browser reads come back as the server sent
// them: Cache-Control exactly, Mcp-Session-Id on every response that
// carried it, X-Powered-By and the CORS headers on 202s too, and no
// Content-Type where the server sent none.
func TestHeadersAsRecorded(t *testing.T) {
	t.Run("streamable HTTP", func(t *testing.T) {
		ev := everything(t, "")
		drive := func(base string) []got {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			u := base + "/mcp"
			h := map[string]string{"Origin": "http://browser.example"}
			g, sid := send(t, ctx, "POST", u, rpc(1, "initialize", legacyInit), h)
			out := []got{g}
			h = map[string]string{"Origin": "http://browser.example", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
			for _, body := range []string{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, rpc(2, "tools/list", ""),
				rpc(3, "tools/call", `{"name":"echo","arguments":{"message":"hi"}}`)} {
				g, _ := send(t, ctx, "POST", u, body, h)
				out = append(out, g)
			}
			// The standalone GET stream: its headers (what it carries comes
			// when the server has something to say).
			sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer scancel()
			h["Accept"] = "text/event-stream"
			g, _ = send(t, sctx, "GET", u, "", h)
			g.Body = ""
			return append(out, g)
		}
		recorded, replayed, s := recordThenReplay(t, ev.URL(), func() { ev.Close() }, nil, drive)
		if recorded[0].Header["Cache-Control"] != "no-cache, no-transform" || recorded[1].Header["X-Powered-By"] == "" || recorded[2].Header["Mcp-Session-Id"] != sidMask {
			t.Fatalf("the recorded server's headers are not what this test is about: %+v", recorded)
		}
		if _, ok := recorded[1].Header["Content-Type"]; ok {
			t.Fatalf("the recorded 202 has a Content-Type: %+v", recorded[1])
		}
		sameAsRecorded(t, recorded, replayed)
		if r := s.Report(); !r.OK() {
			t.Errorf("strict replay: %q", r.Failures)
		}
	})
	t.Run("legacy SSE", func(t *testing.T) {
		// The legacy transport's POSTs get 202 "Accepted" with no
		// Content-Type.
		ev := everything(t, interop.TransportSSE)
		drive := func(base string) []got {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/sse", nil)
			req.Header.Set("Accept", "text/event-stream")
			res, err := (&http.Transport{Proxy: nil}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			buf := make([]byte, 4096)
			n, _ := io.ReadAtLeast(res.Body, buf, 20)
			_, rest, ok := strings.Cut(string(buf[:n]), "data: ")
			endpoint, _, _ := strings.Cut(rest, "\n")
			if !ok || !strings.Contains(endpoint, "sessionId=") {
				t.Fatalf("no endpoint event: %q", buf[:n])
			}
			g, _ := send(t, ctx, "POST", base+strings.TrimSpace(endpoint), rpc(1, "initialize", legacyInit), nil)
			g.Request = "POST /message" // its session id differs
			return []got{g}
		}
		recorded, replayed, _ := recordThenReplay(t, ev.URL(), func() { ev.Close() }, nil, drive)
		if recorded[0].Status != http.StatusAccepted || recorded[0].Body != "Accepted" {
			t.Fatalf("the recorded POST: %+v", recorded[0])
		}
		sameAsRecorded(t, recorded, replayed)
	})
}

// A go-sdk stateless server gives no session id: its replay gives none
// either, on the initialize of a 2025-era client or after it, and
// answers its later requests without one.
func TestStatelessServerGainsNoSessionID(t *testing.T) {
	up := liveServer(t, nil)
	drive := func(base string) []got {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := base + fixtures.PathStateless
		var out []got
		for _, body := range []string{rpc(1, "initialize", legacyInit), `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			rpc(2, "tools/call", `{"name":"echo","arguments":{"text":"hi"}}`)} {
			g, sid := send(t, ctx, "POST", u, body, map[string]string{"Mcp-Protocol-Version": "2025-11-25"})
			if sid != "" {
				t.Errorf("%s: Mcp-Session-Id %q", g.Request, sid)
			}
			out = append(out, g)
		}
		return out
	}
	recorded, replayed, s := recordThenReplay(t, up.URL, nil, nil, drive)
	if !strings.Contains(recorded[2].Body, "hi") {
		t.Fatalf("the recorded call: %+v", recorded[2])
	}
	sameAsRecorded(t, recorded, replayed)
	if r := s.Report(); !r.OK() {
		t.Errorf("strict replay: %q", r.Failures)
	}
}

// A server/discover is answered by what it asks: recorded, a discover at
// 2026-07-28 got a result and one at v999.0.0 the error -32022; replayed,
// in either order, each gets its own answer (go-sdk's stateless server).
func TestDiscoverAnsweredByWhatItAsks(t *testing.T) {
	discover := func(id int, version string) (string, map[string]string) {
		return rpc(id, "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"`+version+`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"exact","version":"1"}}}`),
			map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": "server/discover"}
	}
	ask := func(t *testing.T, base string, versions ...string) map[string]got {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out := map[string]got{}
		for i, v := range versions {
			body, h := discover(i+1, v)
			g, _ := send(t, ctx, "POST", base+fixtures.PathStateless, body, h)
			g.Body = strings.Replace(g.Body, `"id":`+string(rune('1'+i)), `"id":N`, 1)
			out[v] = g
		}
		return out
	}
	var recorded map[string]got
	tape := recordTape(t, liveServer(t, nil).URL, func(px string) { recorded = ask(t, px, "2026-07-28", "v999.0.0") })
	if !strings.Contains(recorded["2026-07-28"].Body, `"result"`) || !strings.Contains(recorded["v999.0.0"].Body, "-32022") {
		t.Fatalf("the recorded answers: %+v", recorded)
	}
	for _, order := range [][]string{{"2026-07-28", "v999.0.0"}, {"v999.0.0", "2026-07-28"}} {
		s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
		replayed := ask(t, hs.URL, order...)
		for _, v := range order {
			sameAsRecorded(t, []got{recorded[v]}, []got{replayed[v]})
		}
		if r := s.Report(); !r.OK() {
			t.Errorf("strict replay, order %q: %q", order, r.Failures)
		}
	}
}
