package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures/interop"
)

// TestRecordAndReplayLegacySSE: server-everything in sse mode (the
// 2024-11-05 HTTP+SSE transport) driven by the TypeScript SDK's
// SSEClientTransport through `mcptape record`, on a route (so the
// endpoint event's path gets the route's prefix): every step passes; the
// recording is one session whose tree has no orphan, unanswered or
// invalid-frame finding; `mcptape replay server` of its tape passes the
// same client (at the recorded pace, the replay server's default).
func TestRecordAndReplayLegacySSE(t *testing.T) {
	needPeers(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, &interop.EverythingOptions{Transport: interop.TransportSSE})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	data := t.TempDir()
	r := startRun(t, "record", "--route", "everything="+ev.URL(), "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off")
	r.wait(t, "route everything: ")
	sseURL := routeLines(r.out.String())["everything"]
	if !strings.HasSuffix(sseURL, "/everything/sse") {
		t.Fatalf("route URL %q", sseURL)
	}
	rep, err := interop.RunClient(ctx, sseURL, &interop.ClientOptions{Transport: "sse"})
	if err != nil {
		t.Fatalf("the TypeScript SSE client through record: %v", err)
	}
	tape, _ := exportForwardTape(t, data)
	st := r.stoppedStore(t, data)
	mcp := mcpSessions(t, st)
	if len(mcp) != 1 || mcp[0].Opening != "sse" || mcp[0].Route != "everything" {
		t.Fatalf("MCP sessions: %+v; want one legacy SSE session on route everything", mcp)
	}
	checkLinked(t, st, mcp[0].ID)
	var rewritten int
	for x, err := range st.Exchanges(ctx, mcp[0].ID) {
		if err != nil {
			t.Fatal(err)
		}
		if x.Rewritten != "" {
			rewritten++
			if !strings.Contains(x.Rewritten, "/everything/message?sessionId=") {
				t.Errorf("the GET stream's rewrite says %q", x.Rewritten)
			}
		}
	}
	if rewritten != 1 {
		t.Errorf("%d exchanges marked rewritten, want the GET stream's", rewritten)
	}
	st.Close()

	// The replay of the tape stands in for server-everything.
	rr := startRun(t, "replay", "server", "--tape", tape, "--listen", "127.0.0.1:0")
	base := urlRE.FindString(rr.wait(t, "mcptape replay: serving "))
	if base == "" {
		t.Fatalf("no replay URL: %s", rr.out.String())
	}
	rr.wait(t, "mcptape replay: Ctrl-C") // the endpoints are listed before it
	if !strings.Contains(rr.out.String(), base+"/everything/sse") {
		t.Errorf("the replay server does not list the route's endpoint %s: %s", base+"/everything/sse", rr.out.String())
	}
	replayed, err := interop.RunClient(ctx, base+"/everything/sse", &interop.ClientOptions{Transport: "sse"})
	if err != nil {
		t.Fatalf("the TypeScript SSE client against the replay: %v", err)
	}
	if len(replayed.Steps) != len(rep.Steps) {
		t.Errorf("replayed %d steps, recorded %d", len(replayed.Steps), len(rep.Steps))
	}
	if code := rr.stop(t); code != 0 {
		t.Errorf("replay server exited %d: %s", code, rr.errOut.String())
	}
}

// TestRecordLegacySSEThroughForward: the legacy transport through the
// forward proxy — Node 22's TypeScript SSE client, told to use `record
// --forward` as its HTTP proxy, against server-everything in sse mode by its
// own URL. The client passes, and the store holds one legacy SSE session on
// the forward leg, nothing rewritten (the client used the real URLs), every
// answer linked (no finding, nothing pending or orphaned).
func TestRecordLegacySSEThroughForward(t *testing.T) {
	node := node22(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, &interop.EverythingOptions{Transport: interop.TransportSSE})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	data := t.TempDir()
	r := startRun(t, "record", "--forward", "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off")
	px := urlRE.FindString(r.wait(t, "forward proxy at "))
	env := []string{"NODE_USE_ENV_PROXY=1", "HTTP_PROXY=" + px, "http_proxy=" + px, "NO_PROXY=", "no_proxy="}
	if _, err := interop.RunClient(ctx, ev.URL(), &interop.ClientOptions{Transport: "sse", Node: node, Env: env}); err != nil {
		t.Fatalf("the TypeScript SSE client through the forward proxy: %v", err)
	}
	st := r.stoppedStore(t, data)
	mcp := mcpSessions(t, st)
	if len(mcp) != 1 || mcp[0].Opening != "sse" || mcp[0].Leg != capture.LegForward {
		for s := range st.Sessions(ctx, capture.SessionQuery{}) {
			t.Logf("session %s opening %s leg %s upstream %s path %s messages %d", s.ID, s.Opening, s.Leg, s.Upstream, s.Path, s.Messages)
		}
		t.Fatalf("MCP sessions: %+v; want one legacy SSE session on the forward leg", mcp)
	}
	if calls := checkLinked(t, st, mcp[0].ID); calls == 0 {
		t.Error("the tree holds no tools/call")
	}
	for x, err := range st.Exchanges(ctx, mcp[0].ID) {
		if err != nil {
			t.Fatal(err)
		}
		if x.Rewritten != "" {
			t.Errorf("exchange %d was rewritten (%s) on the forward leg", x.ID, x.Rewritten)
		}
	}
}

// mcpSessions is the sessions in st that carry MCP (not a client's plain
// HTTP traffic).
func mcpSessions(t *testing.T, st *badgerstore.Store) []*capture.Session {
	t.Helper()
	var mcp []*capture.Session
	for s, err := range st.Sessions(t.Context(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Opening != "http" {
			mcp = append(mcp, s)
		}
	}
	return mcp
}

// checkLinked fails t for every message of session id with a finding and
// every node of its tree left pending, unanswered or orphaned; it returns
// the tree's tools/call nodes.
func checkLinked(t *testing.T, st *badgerstore.Store, id string) (calls int) {
	t.Helper()
	ctx := t.Context()
	for m, err := range st.Messages(ctx, id, capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Findings {
			t.Errorf("message %d (%s %s) has a finding: %s: %s", m.Seq, m.Kind, m.Method, f.Kind, f.Message)
		}
	}
	tree, err := capture.SessionTree(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(ns []*capture.Node)
	walk = func(ns []*capture.Node) {
		for _, n := range ns {
			if n.Status == "pending" || n.Status == "unanswered" || n.Status == "orphan" {
				t.Errorf("tree node %s %s is %s", n.Method, n.Name, n.Status)
			}
			if n.Method == "tools/call" {
				calls++
			}
			walk(n.Children)
		}
	}
	walk(tree.Roots)
	return calls
}
