package proxy_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
	"net/url"
)

// needPeers skips when the npm peers are not installed, unless CI demands them.
func needPeers(t *testing.T) {
	t.Helper()
	if err := interop.Available(); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// TestInteropEverything puts the proxy between the official TypeScript SDK
// client and @modelcontextprotocol/server-everything, both from npm, and
// checks that the whole conversation is recorded and linked.
func TestInteropEverything(t *testing.T) {
	needPeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
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

	rep, err := interop.RunClient(ctx, px.URL+up.Path, nil)
	if err != nil {
		t.Fatalf("TypeScript client through the proxy: %v", err)
	}
	for _, s := range rep.Steps {
		if !s.OK {
			t.Errorf("step %s failed through the proxy: %s", s.Name, s.Detail)
		}
	}
	if rep.Counts.Sampling != 1 || rep.Counts.Elicitation != 1 || rep.Counts.Progress < 1 || rep.Counts.ResourceUpdated < 1 {
		t.Errorf("client counts %+v", rep.Counts)
	}
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	var sessions []*capture.Session
	for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	if len(sessions) != 1 {
		t.Fatalf("%d sessions recorded, want 1", len(sessions))
	}
	s := sessions[0]
	if s.Era != protocol.EraLegacy || s.Version != rep.ProtocolVersion || s.Client.Name != "mcptape-interop-client" ||
		s.Server.Name != rep.ServerInfo.Name || s.Status != capture.StatusClosed {
		t.Errorf("session %+v", s)
	}
	exchanges := map[uint64]*capture.Exchange{}
	for x, err := range store.Exchanges(ctx, s.ID) {
		if err != nil {
			t.Fatal(err)
		}
		exchanges[x.ID] = x
	}
	var ms []*capture.Message
	for m, err := range store.Messages(ctx, s.ID, capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	checkOrderAndPairs(t, ms)
	byTool, bySeq := callsByTool(ms)
	for _, tool := range []string{"echo", "get-sum", "trigger-sampling-request", "trigger-elicitation-request", "trigger-long-running-operation", "toggle-subscriber-updates"} {
		if vs := byTool[tool]; len(vs) != 1 || vs[0].resp == nil || vs[0].resp.Kind != protocol.KindResult {
			t.Errorf("tool %s: not recorded as one call with its result", tool)
		}
	}
	under := func(tool, method string) {
		t.Helper()
		vs := byTool[tool]
		if len(vs) != 1 || len(vs[0].kids) != 1 || vs[0].kids[0].Method != method {
			t.Errorf("%s: want one %s under it", tool, method)
			return
		}
		k := vs[0].kids[0]
		for _, m := range ms {
			if m.Direction == protocol.ClientToServer && m.Kind == protocol.KindResult && m.Links.Request == k.Seq {
				return
			}
		}
		t.Errorf("%s: the client's answer to %s is not recorded and linked", tool, method)
	}
	under("trigger-sampling-request", protocol.MethodSampling)
	under("trigger-elicitation-request", protocol.MethodElicitation)
	var listed, progress, updates int
	for _, m := range ms {
		switch {
		case m.Method == protocol.MethodToolsList && m.Kind == protocol.KindResult:
			for _, name := range rep.Tools {
				if !strings.Contains(string(m.Raw), `"`+name+`"`) {
					t.Errorf("tools/list result lacks %s", name)
				}
			}
			listed++
		case m.Method == protocol.MethodProgress:
			if req := bySeq[m.Links.Request]; req == nil || req.Name != "trigger-long-running-operation" {
				t.Errorf("progress %d not linked to the long-running call", m.Seq)
			}
			progress++
		case m.Method == "notifications/resources/updated":
			if x := exchanges[m.ExchangeID]; x == nil || x.Method != "GET" {
				t.Errorf("resources/updated %d not on the standalone GET stream", m.Seq)
			}
			updates++
		}
	}
	if listed == 0 || progress < rep.Counts.Progress || updates < rep.Counts.ResourceUpdated {
		t.Errorf("recorded tools/list %d, progress %d (client %d), updates %d (client %d)", listed, progress, rep.Counts.Progress, updates, rep.Counts.ResourceUpdated)
	}
}

// TestInteropIdleAfterTerminate is the stale-connection report: the
// TypeScript SDK client ends its session (terminateSession: a DELETE that
// also ends the GET stream), the proxy's connections to server-everything
// sit idle past Node's 5 s keep-alive timeout, and a new client's first
// requests ~8 s later must not get a 502.
func TestInteropIdleAfterTerminate(t *testing.T) {
	needPeers(t)
	if testing.Short() {
		t.Skip("waits 8s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
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
	light := &interop.ClientOptions{Skip: []string{"trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation",
		"trigger-long-running-operation", "get-roots-list", "resources/subscribe", "toggle-subscriber-updates", "wait-resources-updated"}}
	for round := range 3 {
		if round > 0 {
			time.Sleep(8 * time.Second) // past Node's real 5 s keep-alive timeout, in a real child process
		}
		rep, err := interop.RunClient(ctx, px.URL+up.Path, light)
		if err != nil {
			t.Fatalf("round %d (after %ds idle): %v", round, 8*min(round, 1), err)
		}
		if s, ok := rep.Step("terminate-session"); !ok || !s.OK {
			t.Fatalf("round %d: terminate-session %+v", round, s)
		}
	}
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for x, err := range store.Exchanges(ctx, s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			if x.Synthesized || x.Status >= 500 {
				t.Errorf("exchange %d %s %s: %d %s", x.ID, x.Method, x.URL, x.Status, x.Error)
			}
		}
	}
}
