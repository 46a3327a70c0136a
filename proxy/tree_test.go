package proxy_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with the "tree" file of testdata/tree/name.txtar,
// or writes it with -update.
func golden(t *testing.T, name, comment, got string) {
	t.Helper()
	path := filepath.Join("testdata", "tree", name+".txtar")
	if *update {
		a := &txtar.Archive{Comment: []byte(comment + "\n"), Files: []txtar.File{{Name: "tree", Data: []byte(got)}}}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, txtar.Format(a), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	a, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./proxy -run Tree -update to create it)", err)
	}
	for _, f := range a.Files {
		if f.Name == "tree" {
			if d := cmp.Diff(string(f.Data), got); d != "" {
				t.Errorf("%s: tree differs from the golden file (-want +got):\n%s", path, d)
			}
			return
		}
	}
	t.Fatalf("%s has no tree file", path)
}

func callText(t *testing.T, store capture.Store, session string, pick func(*capture.Message) bool) string {
	t.Helper()
	ctx := context.Background()
	for m, err := range store.Messages(ctx, session, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Direction == protocol.ClientToServer && m.Kind == protocol.KindRequest && pick(m) {
			n, err := capture.CallTree(ctx, store, m.Seq)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			(&capture.Tree{Roots: []*capture.Node{n}}).WriteText(&b, &capture.TextOptions{NoTimes: true})
			return b.String()
		}
	}
	t.Fatal("no such call recorded")
	return ""
}

func tool(name string) func(*capture.Message) bool {
	return func(m *capture.Message) bool { return m.Method == protocol.MethodToolsCall && m.Name == name }
}

var treePatterns = []struct {
	tool, comment string
}{
	{fixtures.ToolSample, "sampling: a server→client request under the call (legacy), an MRTR round (2026-07-28)"},
	{fixtures.ToolSampleTools, "a multi-turn sampling tool loop: tools + toolChoice, a toolUse stop, then the continuation"},
	{fixtures.ToolElicitForm, "form-mode elicitation"},
	{fixtures.ToolElicitURL, "URL-mode elicitation; on legacy, notifications/elicitation/complete linked by elicitationId"},
	{fixtures.ToolRoots, "roots/list"},
	{fixtures.ToolSlow, "progress notifications by token, a log notification by stream"},
	{fixtures.ToolError, "a JSON-RPC error"},
	{fixtures.ToolFail, "an isError result"},
}

func TestTreeGoldenFixtures(t *testing.T) {
	for _, era := range []struct{ name, path string }{{"legacy", fixtures.PathStateful}, {"modern", fixtures.PathStateless}} {
		t.Run(era.name, func(t *testing.T) {
			r := newFixtureRig(t)
			r.runClient(t, era.path, nil)
			r.sync(t)
			s := r.sessionAt(t, era.path)
			for _, p := range treePatterns {
				golden(t, era.name+"-"+p.tool, p.comment+" ("+era.name+")", callText(t, r.store, s.ID, tool(p.tool)))
			}
			first := func(method string) func(*capture.Message) bool {
				return func(m *capture.Message) bool { return m.Method == method }
			}
			golden(t, era.name+"-discover", "the era negotiation ("+era.name+")", callText(t, r.store, s.ID, first(protocol.MethodDiscover)))
			if era.name == "modern" {
				golden(t, era.name+"-listen", "subscriptions/listen: the acknowledgement and the notifications tagged with its id",
					callText(t, r.store, s.ID, first(protocol.MethodSubscriptionsListen)))
			}
		})
	}
}

// TestTreeGoldenEverything records server-everything's sampling,
// elicitation and progress flows from the official TypeScript client.
func TestTreeGoldenEverything(t *testing.T) {
	needPeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	r := newRig(t, nil, &rigOptions{upstream: ev.URL()})
	defer r.px.CloseClientConnections()
	if _, err := interop.RunClient(ctx, r.px.URL+"/mcp", nil); err != nil {
		t.Fatal(err)
	}
	r.sync(t)
	ss := r.sessions(t)
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	for _, name := range []string{"trigger-sampling-request", "trigger-elicitation-request", "trigger-long-running-operation", "get-roots-list"} {
		golden(t, "everything-"+name, "server-everything "+name+" through the TypeScript SDK client", callText(t, r.store, ss[0].ID, tool(name)))
	}
	// Subscription updates arrive on the standalone GET stream: roots of the tree.
	tr, err := capture.SessionTree(ctx, r.store, ss[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	updates := 0
	for _, n := range tr.Roots {
		if n.Method == "notifications/resources/updated" {
			updates++
		}
	}
	if updates == 0 {
		var b strings.Builder
		tr.WriteText(&b, &capture.TextOptions{NoTimes: true})
		t.Errorf("no resources/updated at the session level:\n%s", b.String())
	}
}
