package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

// The dashboard keeps up with the user: what a person debugging an MCP
// integration does with it, in one Chromium, each part on a rig of its
// own where it needs one.

// connect connects a go-sdk client named name to url (a proxy's path),
// on the legacy era; it is closed when the test ends.
func connect(t testing.TB, url, name string, o *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0.0"}, o).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// sessionOfClient is the newest session of the client named name.
func (r *rig) sessionOfClient(t testing.TB, name string) *capture.Session {
	t.Helper()
	var found *capture.Session
	for s, err := range r.store.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Client.Name == name && (found == nil || s.Start.After(found.Start)) {
			found = s
		}
	}
	if found == nil {
		t.Fatalf("no session of %s", name)
	}
	return found
}

// toolsRig is a recorder of routes, as `mcptape record --route` runs one:
// alpha reaches the fixture server, beta a server that is down.
type toolsRig struct {
	*rig
	dead string // beta's upstream, where nothing listens
}

func newToolsRig(t *testing.T) *toolsRig {
	t.Helper()
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r := &rig{store: store}
	r.up = httptest.NewServer(fixtures.Handler(nil))
	t.Cleanup(r.up.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	dead := down.URL
	down.Close()
	routes := []dashboard.Route{{Name: "alpha", Upstream: r.up.URL + "/mcp"}, {Name: "beta", Upstream: dead + "/mcp"}}
	if r.dash, err = dashboard.New(store, &dashboard.Options{Feed: dashboard.FeedPublish,
		Backend: &testRecording{testBackend: &testBackend{}, rec: func() *capture.Recorder { return r.rec }, routes: func() []dashboard.Route { return routes }}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dash.Close() })
	if r.rec, err = capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{OnBatch: r.dash.Publish}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.rec.Close(ctx)
	})
	var prs []proxy.Route
	for _, rt := range routes {
		u, _ := url.Parse(rt.Upstream)
		prs = append(prs, proxy.Route{Name: rt.Name, Upstream: u})
	}
	p, err := proxy.New(&proxy.Options{Routes: prs, Recorder: r.rec})
	if err != nil {
		t.Fatal(err)
	}
	r.px = httptest.NewServer(p)
	t.Cleanup(r.px.Close)
	t.Cleanup(func() { r.px.CloseClientConnections(); r.up.CloseClientConnections() })
	r.dash.SetProxyURL(r.px.URL)
	r.srv = httptest.NewServer(r.dash)
	t.Cleanup(func() { r.srv.CloseClientConnections(); r.srv.Close() })
	knowToken(t, r.srv.URL, r.dash.Token())
	return &toolsRig{rig: r, dead: dead}
}

// listed writes a session that only listed tools (one tools/list answer
// for each list of names, the last the newest), as an imported tape
// would hold it: recorded elsewhere, on upstream+path.
func (r *rig) listed(t testing.TB, id, upstream, path, route string, lists ...[]string) {
	t.Helper()
	top, _, err := r.store.LastIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seq := top + 1_000_000 // clear of what the recorder writes
	start := time.Now().Add(-time.Hour)
	b := &capture.Batch{}
	at := start
	for i, names := range lists {
		var tools []string
		for _, n := range names {
			tools = append(tools, fmt.Sprintf(`{"name":%q,"description":"%s, as listed","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`, n, n))
		}
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i+1)
		res := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"tools":[%s]}}`, i+1, strings.Join(tools, ","))
		at = at.Add(time.Minute)
		seq++
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: id, Direction: protocol.ClientToServer, Time: at, Kind: protocol.KindRequest,
			Method: protocol.MethodToolsList, ID: []byte(fmt.Sprint(i + 1)), Batch: -1, Raw: []byte(req), Size: len(req)})
		seq++
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: id, Direction: protocol.ServerToClient, Time: at.Add(time.Millisecond), Kind: protocol.KindResult,
			Method: protocol.MethodToolsList, ID: []byte(fmt.Sprint(i + 1)), Batch: -1, Raw: []byte(res), Size: len(res), Links: capture.Links{Request: seq - 1}})
	}
	b.Sessions = []*capture.Session{{ID: id, Era: protocol.EraLegacy, Version: protocol.V20251125, Opening: "initialize",
		Client: protocol.Implementation{Name: "elsewhere"}, Upstream: upstream, Path: path, Route: route,
		Start: start, End: at, Messages: len(b.Messages), Calls: len(lists), Status: capture.StatusClosed}}
	if err := r.store.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserKeepsUp(t *testing.T) {
	b := newBrowser(t)

	// 1. The Tools page sends a tool's call to the upstream that listed
	// it, through the route that reaches it, or not at all, saying why.
	// (Before, every call went to the recorder's own upstream, or to a
	// path no route served.) Tools a newer listing left out stay, marked.
	t.Run("ToolsSendToTheirUpstream", func(t *testing.T) {
		b.t = t
		tr := newToolsRig(t)
		tr.runClient(t, "/alpha"+fixtures.PathStateful, "list_tools")
		up := tr.up.URL
		// Listed by the fixture's stateless path, recorded elsewhere: a
		// route reaches its upstream; the older listing had more tools.
		tr.listed(t, "20250101-000000-elsewh", up, fixtures.PathStateless, "", []string{"echo", "add"}, []string{"echo"})
		// Listed by a server no route reaches.
		tr.listed(t, "20250101-000000-faraway", "http://127.0.0.1:9", "/mcp", "", []string{"far_away"})
		// Listed through beta, whose server is down now.
		tr.listed(t, "20250101-000000-betaaa", tr.dead, "/mcp", "beta", []string{"echo"})
		section := func(upstream string) string { return `section.upstream[data-upstream="` + upstream + `"]` }
		stateless, far, beta := section(up+fixtures.PathStateless), section("http://127.0.0.1:9/mcp"), section(tr.dead+"/mcp")

		b.open(tr.srv.URL + "/tools")
		b.waitFor("the tools", `document.querySelector('main[data-ready] section.upstream') !== null`, 10*time.Second)
		if n := eval[int](b, `document.querySelectorAll('section.upstream').length`); n != 4 {
			t.Errorf("%d upstreams, want the recorded one and the three listed elsewhere", n)
		}
		// Far away: no route reaches it, so no Send, and the reason.
		if off := eval[string](b, `document.querySelector('`+far+` .send-off')?.textContent || ''`); !strings.Contains(off, "does not reach http://127.0.0.1:9/mcp") {
			t.Errorf("the unreachable upstream says %q", off)
		}
		b.click(far + ` details.tool[data-tool="far_away"] summary`)
		if !eval[bool](b, `document.querySelector('`+far+` details.tool[data-tool="far_away"] button.send-tool').disabled`) {
			t.Error("Send is offered for a tool of an upstream the recorder does not reach")
		}
		// The stateless path: sent through alpha, answered by the fixture.
		tool := stateless + ` details.tool[data-tool="echo"]`
		b.click(tool + " summary")
		b.waitFor("the form", `document.querySelector('`+tool+` form.schema-form input') !== null`, 5*time.Second)
		b.run("the text", chromedp.SetValue(chromedp.CSS(tool+` form.schema-form [data-field="text"] input, `+tool+` form.schema-form [data-field="text"] textarea`), "through alpha"))
		b.click(tool + " button.send-tool")
		b.waitFor("the answer", `document.querySelector('`+tool+` .tool-result-box[data-done] .sent-response') !== null`, 20*time.Second)
		if text := eval[string](b, `document.querySelector('`+tool+` .sent-response').textContent`); !strings.Contains(text, "through alpha") {
			t.Errorf("the answer: %q", text)
		}
		tr.sync(t)
		sent := tr.sessionOfClient(t, "mcptape-dashboard")
		if sent.Route != "alpha" || sent.Path != fixtures.PathStateless {
			t.Errorf("the call went by route %q to %s, want alpha to %s", sent.Route, sent.Path, fixtures.PathStateless)
		}
		// A tool the newest listing left out is still there, marked.
		if mark := eval[string](b, `document.querySelector('`+stateless+` details.tool[data-tool="add"][data-latest=no] .chip.seen')?.textContent || ''`); !strings.Contains(mark, "not in the latest tools/list") {
			t.Errorf("the tool the latest listing left out: %q", mark)
		}
		// Beta reaches a server that is down: the error says so, in words.
		tool = beta + ` details.tool[data-tool="echo"]`
		b.click(tool + " summary")
		b.waitFor("beta's form", `document.querySelector('`+tool+` button.send-tool:not([disabled])') !== null`, 5*time.Second)
		b.allow(`/api/v1/send`)
		b.click(tool + " button.send-tool")
		b.waitFor("the error", `document.querySelector('`+tool+` .check.bad') !== null`, 20*time.Second)
		if msg := eval[string](b, `document.querySelector('`+tool+` .check.bad').textContent`); !strings.Contains(msg, "connection refused") || strings.Contains(msg, "answered 502") {
			t.Errorf("sending to a server that is down says %q, want connection refused in words", msg)
		}
		b.shots("tools-routes")
		b.checkClean()
	})

	// 2. Back puts the user where they were: in a session of 3,000 calls,
	// ten jumps to the next error, the node opened, Enter, then Back:
	// the same scroll, the same open nodes, the focus on the same node.
	// (Before, Back drew the page anew at the top, every node closed.)
	t.Run("BackKeepsPlace", func(t *testing.T) {
		b.t = t
		store := synthStore(t, 1, 10000)
		_, base := newDash(t, store, nil)
		var id string
		for s, err := range store.Sessions(context.Background(), capture.SessionQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			id = s.ID
		}
		b.open(base + "/sessions/" + esc(id))
		b.waitFor("the tree", treeReady, 30*time.Second)
		calls := eval[int](b, `document.querySelectorAll('[role=tree] > li[role=treeitem]').length`)
		if calls < 3000 {
			t.Fatalf("%d calls, want a session of 3,000", calls)
		}
		for range 10 {
			b.run("next error", chromedp.KeyEvent("e"))
		}
		b.run("open it", chromedp.KeyEvent(kb.ArrowRight))
		// Open one more node further up, by hand.
		eval[bool](b, `document.querySelectorAll('[role=tree] > li[role=treeitem]')[40]._open(true), true`)
		b.settle()
		type place struct {
			Scroll float64  `json:"scroll"`
			Open   []string `json:"open"`
			Focus  string   `json:"focus"`
		}
		const where = `({scroll: window.scrollY, open: [...document.querySelectorAll('li[role=treeitem][aria-expanded=true]')].map(li => li.dataset.seq), focus: document.activeElement.dataset.seq || ''})`
		before := eval[place](b, where)
		if before.Scroll < 5000 || len(before.Open) < 2 || before.Focus == "" {
			t.Fatalf("before Enter: %+v, want deep in the page with nodes open and one focused", before)
		}
		b.run("Enter", chromedp.KeyEvent(kb.Enter))
		b.waitFor("the message", `location.pathname.includes('/messages/') && document.querySelector('section.message-view') !== null`, 10*time.Second)
		b.run("Back", chromedp.NavigateBack())
		b.waitFor("the tree again", treeReady+` && !location.pathname.includes('/messages/')`, 30*time.Second)
		b.settle()
		after := eval[place](b, where)
		if d := after.Scroll - before.Scroll; d < -2 || d > 2 {
			t.Errorf("after Back the page is scrolled to %.0f, it was at %.0f", after.Scroll, before.Scroll)
		}
		if strings.Join(after.Open, " ") != strings.Join(before.Open, " ") {
			t.Errorf("after Back the open nodes are %q, they were %q", after.Open, before.Open)
		}
		if after.Focus != before.Focus {
			t.Errorf("after Back the focus is on %q, it was on %q", after.Focus, before.Focus)
		}
		// Forward and Back again, on a page of folds: the sessions list's
		// scroll comes back too.
		b.run("Forward", chromedp.NavigateForward())
		b.waitFor("the message again", `location.pathname.includes('/messages/') && document.querySelector('section.message-view') !== null`, 10*time.Second)
		b.screenshot("back-forward")
		b.checkClean()
	})
}
