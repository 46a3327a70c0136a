package proxy_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

// The legacy HTTP+SSE transport (2024-11-05), recorded right: the
// TypeScript SDK's SSEClientTransport through the proxy in front of
// server-everything in sse mode passes every step, and the recording is
// one session — the GET /sse stream and the message POSTs it names —
// whose every answer on the stream is linked to its request, with the
// server's sampling and elicitation requests under their calls: no
// orphan, unanswered or invalid-frame findings.
func TestInteropEverythingLegacySSE(t *testing.T) {
	needPeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, &interop.EverythingOptions{Transport: interop.TransportSSE})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rec, err := capture.NewRecorder(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	up, _ := url.Parse(ev.URL())
	p, err := proxy.New(&proxy.Options{Upstream: up, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	defer px.Close()
	defer px.CloseClientConnections()

	rep, err := interop.RunClient(ctx, px.URL+up.Path, &interop.ClientOptions{Transport: "sse"})
	if err != nil {
		t.Fatalf("TypeScript SSE client through the proxy: %v", err)
	}
	for _, s := range rep.Steps {
		if !s.OK {
			t.Errorf("step %s failed through the proxy: %s", s.Name, s.Detail)
		}
	}
	px.CloseClientConnections() // the client is gone: end its GET stream
	waitIdle(t, p)
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var mcp []*capture.Session
	for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Opening != "http" {
			mcp = append(mcp, s)
		}
	}
	if len(mcp) != 1 {
		for _, s := range mcp {
			t.Logf("session %s opening %s era %s, %d messages", s.ID, s.Opening, s.Era, s.Messages)
		}
		t.Fatalf("%d MCP sessions recorded, want 1", len(mcp))
	}
	s := mcp[0]
	if s.Era != protocol.EraLegacy || s.Opening != "sse" || s.Client.Name != "mcptape-interop-client" || s.Server.Name != rep.ServerInfo.Name {
		t.Errorf("session: era %s opening %q client %q server %q", s.Era, s.Opening, s.Client.Name, s.Server.Name)
	}
	var ms []*capture.Message
	for m, err := range store.Messages(ctx, s.ID, capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		for _, f := range m.Findings {
			t.Errorf("message %d (%s %s %s) has a finding: %s: %s", m.Seq, m.Direction, m.Kind, m.Method, f.Kind, f.Message)
		}
	}
	tree, err := capture.SessionTree(ctx, store, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(ns []*capture.Node)
	walk = func(ns []*capture.Node) {
		for _, n := range ns {
			if n.Status == "pending" || n.Status == "unanswered" {
				t.Errorf("tree node %s %s is %s", n.Method, n.Name, n.Status)
			}
			walk(n.Children)
		}
	}
	walk(tree.Roots)
	byTool, _ := callsByTool(ms)
	for _, tool := range []string{"echo", "get-sum", "trigger-sampling-request", "trigger-elicitation-request", "trigger-long-running-operation"} {
		if vs := byTool[tool]; len(vs) != 1 || vs[0].resp == nil || vs[0].resp.Kind != protocol.KindResult {
			t.Errorf("tool %s: not recorded as one call with its result", tool)
		}
	}
	for tool, method := range map[string]string{"trigger-sampling-request": protocol.MethodSampling, "trigger-elicitation-request": protocol.MethodElicitation} {
		// server-everything also asks for the client's roots (roots/list)
		// when it likes, after the session opens: on the one legacy stream
		// nothing tells it from the call's own requests, and a slow
		// machine puts it inside a call. Only it may join the kid.
		want, other := 0, 0
		if vs := byTool[tool]; len(vs) == 1 {
			for _, k := range vs[0].kids {
				switch k.Method {
				case method:
					want++
				case protocol.MethodRootsList:
				default:
					other++
				}
			}
		}
		if want != 1 || other != 0 {
			t.Errorf("%s: want one %s under it", tool, method)
			// What was recorded instead, for the next look at this.
			for _, m := range ms {
				if m.Kind == protocol.KindRequest || m.Kind.IsResponse() {
					t.Logf("  seq %d x%d %s %s %s %s id %s parent %d request %d", m.Seq, m.ExchangeID, m.Direction, m.Kind, m.Method, m.Name, m.ID, m.Links.Parent, m.Links.Request)
				}
			}
		}
	}
}
