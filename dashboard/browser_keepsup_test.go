package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
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

// fresh starts a part of a test that shares the browser: the page of the
// last part, whose servers have gone, is left for a blank one, and what
// its going logged (a live tail cut, a poll refused) is forgotten.
func (b *browser) fresh(t *testing.T) {
	b.t = t
	b.run("a blank page", chromedp.Navigate("about:blank"))
	b.mu.Lock()
	b.exceptions, b.console, b.logged, b.allowed = nil, nil, nil, nil
	b.mu.Unlock()
}

// writeSession writes session x with the messages fill adds (each at
// the time given, seqs clear of what the recorder writes), as an
// imported tape would hold them.
func (r *rig) writeSession(t testing.TB, x *capture.Session, fill func(add func(at time.Time, dir protocol.Direction, kind protocol.Kind, method, name, raw string, request uint64) uint64)) {
	t.Helper()
	top, _, err := r.store.LastIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seq := top + 1_000_000
	b := &capture.Batch{}
	fill(func(at time.Time, dir protocol.Direction, kind protocol.Kind, method, name, raw string, request uint64) uint64 {
		seq++
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: x.ID, Direction: dir, Time: at, Kind: kind, Method: method, Name: name,
			ID: protocol.Decode([]byte(raw)).ID, Batch: -1, Raw: []byte(raw), Size: len(raw), Links: capture.Links{Request: request}})
		if at.After(x.End) {
			x.End = at
		}
		return seq
	})
	x.Messages = len(b.Messages)
	b.Sessions = []*capture.Session{x}
	if err := r.store.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// named writes a closed session of one call between a client and a
// server with these names.
func (r *rig) named(t testing.TB, id, client, server string) {
	t.Helper()
	start := time.Now().Add(-2 * time.Hour)
	r.writeSession(t, &capture.Session{ID: id, Era: protocol.EraLegacy, Version: protocol.V20251125, Opening: "initialize",
		Client: protocol.Implementation{Name: client, Version: "1.0.0"}, Server: protocol.Implementation{Name: server, Version: "2.0.0"},
		Upstream: "http://127.0.0.1:9", Path: "/mcp", Start: start, Calls: 1, Status: capture.StatusClosed},
		func(add func(time.Time, protocol.Direction, protocol.Kind, string, string, string, uint64) uint64) {
			q := add(start, protocol.ClientToServer, protocol.KindRequest, "tools/call", "echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, 0)
			add(start.Add(3*time.Millisecond), protocol.ServerToClient, protocol.KindResult, "tools/call", "", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`, q)
		})
}

// bursts writes a session of calls in two bursts of a minute, gap apart.
func (r *rig) bursts(t testing.TB, id string, gap time.Duration) {
	t.Helper()
	start := time.Now().Add(-time.Hour)
	r.writeSession(t, &capture.Session{ID: id, Era: protocol.EraLegacy, Version: protocol.V20251125, Opening: "initialize",
		Client: protocol.Implementation{Name: "bursty"}, Upstream: "http://127.0.0.1:9", Path: "/mcp", Start: start, Calls: 40, Status: capture.StatusClosed},
		func(add func(time.Time, protocol.Direction, protocol.Kind, string, string, string, uint64) uint64) {
			for i := range 40 {
				at := start.Add(time.Duration(i%20) * 3 * time.Second)
				if i >= 20 {
					at = at.Add(gap)
				}
				method := []string{"tools/call", "tools/list", "resources/read", "prompts/get"}[i%4]
				q := add(at, protocol.ClientToServer, protocol.KindRequest, method, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i, method), 0)
				add(at.Add(time.Duration(5+i%7)*time.Millisecond), protocol.ServerToClient, protocol.KindResult, method, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i), q)
			}
		})
}

func TestBrowserKeepsUp(t *testing.T) {
	b := newBrowser(t)

	// 1. The Tools page sends a tool's call to the upstream that listed
	// it, through the route that reaches it, or not at all, saying why.
	// (Before, every call went to the recorder's own upstream, or to a
	// path no route served.) Tools a newer listing left out stay, marked.
	t.Run("ToolsSendToTheirUpstream", func(t *testing.T) {
		b.fresh(t)
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
		b.waitFor("its form", `document.querySelector('`+far+` details.tool[data-tool="far_away"] button.send-tool') !== null`, 5*time.Second)
		if !eval[bool](b, `document.querySelector('`+far+` details.tool[data-tool="far_away"] button.send-tool').disabled`) {
			t.Error("Send is offered for a tool of an upstream the recorder does not reach")
		}
		// The stateless path: sent through alpha, answered by the fixture.
		tool := stateless + ` details.tool[data-tool="echo"]`
		b.click(tool + " summary")
		b.waitFor("the form", `document.querySelector('`+tool+` form.schema-form input, `+tool+` form.schema-form textarea') !== null`, 5*time.Second)
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
		b.fresh(t)
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
		// Forward, and on the message page (another page, of folds): a
		// fold opened and the page scrolled come back after a link and Back.
		b.run("Forward", chromedp.NavigateForward())
		b.waitFor("the message again", `location.pathname.includes('/messages/') && document.querySelector('section.message-view') !== null`, 10*time.Second)
		b.click("details.raw-json summary")
		b.waitFor("the raw JSON", `document.querySelector('details.raw-json .jtree') !== null`, 5*time.Second)
		eval[bool](b, `(window.scrollTo(0, document.documentElement.scrollHeight), true)`)
		b.settle()
		msgScroll := eval[float64](b, `window.scrollY`)
		eval[bool](b, `(document.querySelector('nav.crumbs a').click(), true)`) // as a click, without scrolling to it first
		b.waitFor("the session", treeReady+` && !location.pathname.includes('/messages/')`, 30*time.Second)
		b.run("Back", chromedp.NavigateBack())
		b.waitFor("the message once more", `location.pathname.includes('/messages/') && document.querySelector('section.message-view') !== null`, 10*time.Second)
		b.settle()
		if !eval[bool](b, `document.querySelector('details.raw-json').open`) {
			t.Error("after Back the message page's Raw JSON fold is closed; it was open")
		}
		if y := eval[float64](b, `window.scrollY`); y < msgScroll-2 || y > msgScroll+2 {
			t.Errorf("after Back the message page is scrolled to %.0f, it was at %.0f", y, msgScroll)
		}
		b.screenshot("back-forward")
		b.checkClean()
	})

	// 3. The sessions list and a session's page grow as a client runs,
	// without a reload and without moving what is on screen. (Before,
	// only /live was live: the list waited for a reload, and a session's
	// page stayed as it was opened.)
	t.Run("ListsGrowLive", func(t *testing.T) {
		b.fresh(t)
		r := newRigServer(t, nil, nil)
		// Sessions recorded before, so that the list scrolls.
		for i := range 40 {
			r.listed(t, fmt.Sprintf("20250101-0000%02d-old%03d", i, i), "http://127.0.0.1:9", "/mcp", "", []string{"x"})
		}
		b.open(r.srv.URL + "/sessions")
		b.waitFor("the list", `document.querySelectorAll('table.sessions[data-ready] tbody tr').length === 40`, 10*time.Second)
		eval[bool](b, `(window.__notReloaded = true, document.querySelectorAll('table.sessions tbody tr')[20].scrollIntoView({block: 'start'}), true)`)
		b.settle()
		const row20 = `document.querySelector('tr[data-session="20250101-000019-old019"]').getBoundingClientRect().top`
		y0 := eval[float64](b, row20)
		cs := connect(t, r.px.URL+fixtures.PathStateful, "live-client", nil)
		b.waitFor("the new session's row", `[...document.querySelectorAll('table.sessions tbody tr')].some(tr => tr.textContent.includes('live-client'))`, 10*time.Second)
		b.settle()
		if !eval[bool](b, `window.__notReloaded === true`) {
			t.Error("the list was reloaded")
		}
		if y := eval[float64](b, row20); y < y0-2 || y > y0+2 {
			t.Errorf("the row on screen moved from %.0f to %.0f as the new session came", y0, y)
		}
		if first := eval[string](b, `document.querySelector('table.sessions tbody tr').textContent`); !strings.Contains(first, "live-client") {
			t.Errorf("the new session is not at the top: %q", first)
		}

		// Its page, opened while the client runs, grows with its calls
		// and says when it closes.
		sess := r.sessionOfClient(t, "live-client")
		b.open(r.srv.URL + "/sessions/" + esc(sess.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		eval[bool](b, `(window.__notReloaded = true, true)`)
		n0 := eval[int](b, `document.querySelectorAll('[role=tree] > li[role=treeitem]').length`)
		if st := eval[string](b, `document.querySelector('.facts .chip[class*=status-]').textContent`); st != "open" {
			t.Errorf("the session's status: %q, want open", st)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := range 4 {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixtures.ToolEcho, Arguments: map[string]any{"text": fmt.Sprint("call ", i)}}); err != nil {
				t.Fatal(err)
			}
		}
		b.waitFor("the new calls", fmt.Sprintf(`document.querySelectorAll('[role=tree] > li[role=treeitem]').length >= %d`, n0+4), 10*time.Second)
		cs.Close()
		b.waitFor("the session closed", `document.querySelector('.facts .chip[class*=status-]').textContent === 'closed'`, 10*time.Second)
		if !eval[bool](b, `window.__notReloaded === true`) {
			t.Error("the session's page was reloaded")
		}
		b.shots("session-live")
		b.checkClean()
	})

	// 4. Search finds the message: a word only in a prompt's arguments
	// lists that message across sessions, the session's link carries the
	// query, and its page opens on the message. (Before, the list named
	// the session and the page's filter found nothing.)
	t.Run("SearchFindsMessages", func(t *testing.T) {
		b.fresh(t)
		r := newRigServer(t, nil, nil)
		cs := connect(t, r.px.URL+fixtures.PathStateful, "search-client", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := range 3 {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixtures.ToolEcho, Arguments: map[string]any{"text": fmt.Sprint("hello ", i)}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: fixtures.PromptGreet, Arguments: map[string]string{"name": "Ada", "mood": "Zanzibar"}}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixtures.ToolEcho, Arguments: map[string]any{"text": fmt.Sprint("bye ", i)}}); err != nil {
				t.Fatal(err)
			}
		}
		r.sync(t)
		sess := r.sessionOfClient(t, "search-client")
		prompt := r.seqWhere(t, sess.ID, func(m *capture.Message) bool {
			return m.Method == protocol.MethodPromptsGet && m.Kind == protocol.KindRequest
		})

		b.open(r.srv.URL + "/sessions?q=Zanzibar")
		b.waitFor("the messages found", `document.querySelector('.message-hits table.hits tbody tr') !== null`, 10*time.Second)
		hit := eval[string](b, `document.querySelector('.message-hits tbody tr').innerText`)
		if !strings.Contains(hit, "prompts/get") || !strings.Contains(hit, "Zanzibar") {
			t.Errorf("the message found: %q, want the prompts/get request and the text around the word", hit)
		}
		if got := eval[string](b, `document.querySelector('.message-hits tbody tr').dataset.seq`); got != fmt.Sprint(prompt) {
			t.Errorf("the hit is message %s, want %d", got, prompt)
		}
		b.shots("search-messages")
		b.click(`table.sessions tr[data-session="` + sess.ID + `"] td.id a`)
		b.waitFor("the session, on its hit", treeReady+` && document.activeElement?.dataset?.method === 'prompts/get'`, 10*time.Second)
		if q := eval[string](b, `document.querySelector('input.tree-filter').value`); q != "Zanzibar" {
			t.Errorf("the filter holds %q, want the query carried over", q)
		}
		if shown := eval[[]string](b, `[...document.querySelectorAll('[role=tree] > li[role=treeitem]:not(.filtered-out)')].map(li => li.dataset.method)`); strings.Join(shown, " ") != "prompts/get" {
			t.Errorf("the filter shows %q, want the prompts/get call alone", shown)
		}
		b.screenshot("search-lands")
		b.checkClean()
	})

	// 5. A held call has its context: its session, client, JSON-RPC id,
	// and the tool's schema as a form to edit it with. (Before, the card
	// had no session, no schema, and the hold's id where the JSON-RPC id
	// belongs; edits were raw JSON only.)
	t.Run("HeldCallContext", func(t *testing.T) {
		b.fresh(t)
		ir := newInterceptRig(t, "", "tools/call:forecast")
		cs := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
		b.open(ir.srv.URL + "/intercept")
		b.waitFor("the page", `document.querySelector('.held-list[data-ready]') !== null`, 10*time.Second)
		got := callTool(cs, fixtures.ToolForecast, map[string]any{"city": "Paris", "days": 2})
		card := heldCard(b, "request", "tools/call")
		ir.sync(t)
		sess := ir.sessionOfClient(t, "bare-client")
		b.waitFor("its session", `document.querySelector('`+card+` a.held-session') !== null`, 10*time.Second)
		if link := eval[string](b, `document.querySelector('`+card+` a.held-session').textContent`); link != sess.ID {
			t.Errorf("the card names session %q, want %s", link, sess.ID)
		}
		if client := eval[string](b, `document.querySelector('`+card+` .held-client').textContent`); !strings.Contains(client, sess.Client.Name) || sess.Client.Name == "" {
			t.Errorf("the card names the client %q, want %q", client, sess.Client.Name)
		}
		var st struct {
			Held []struct {
				ID  string          `json:"id"`
				Raw json.RawMessage `json:"raw"`
			} `json:"held"`
		}
		newAPIClient(t, ir.srv.URL).get("/api/v1/intercept", &st)
		if len(st.Held) != 1 {
			t.Fatalf("%d held", len(st.Held))
		}
		rpcID := string(protocol.Decode(st.Held[0].Raw).ID)
		if id := eval[string](b, `document.querySelector('`+card+` .rpc-id code').textContent`); id != rpcID || id == st.Held[0].ID && rpcID != st.Held[0].ID {
			t.Errorf("the card's id %q, want the JSON-RPC id %s", id, rpcID)
		}
		// The schema's description is there (the reading view knows the tool).
		if text := eval[string](b, `document.querySelector('`+card+` .reading').textContent`); strings.Contains(text, "no tools/list that describes this tool") {
			t.Errorf("the held call has no schema: %q", text)
		}
		// Edited through the tool's form.
		b.click(card + " details.edit-box summary")
		city := card + ` .pane-form form.schema-form [data-field="city"] input`
		b.waitFor("the form", `document.querySelector('`+city+`')?.value === 'Paris'`, 5*time.Second)
		b.run("another city", chromedp.SetValue(chromedp.CSS(city), "Lyon"))
		b.screenshot("held-form")
		b.click(card + " button.send-form")
		if a := wait(t, got); a.err != nil || !strings.Contains(a.text, "Lyon") {
			t.Fatalf("the client got %+v, want the forecast for the city set in the form", a)
		}
		b.checkClean()
	})

	// 6. A declined elicitation says so first and shows the form's
	// defaults as defaults, not as answers. (Before, it showed "blue" and
	// 1 as if the user had given them.)
	t.Run("DeclinedElicitation", func(t *testing.T) {
		b.fresh(t)
		r := newRigServer(t, nil, &fixtures.ServerOptions{Showcase: true})
		cs := connect(t, r.px.URL+fixtures.PathStateful, "declining-client", &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "decline"}, nil
			},
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixtures.ToolElicitChoices, Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		r.sync(t)
		sess := r.sessionOfClient(t, "declining-client")
		seq := r.seqWhere(t, sess.ID, func(m *capture.Message) bool {
			return m.Method == protocol.MethodElicitation && m.Kind == protocol.KindRequest
		})
		b.open(fmt.Sprintf("%s/sessions/%s/messages/%d", r.srv.URL, esc(sess.ID), seq))
		view := `section.message-view .elicitation`
		b.waitFor("the elicitation", `document.querySelector('`+view+` form.elicitation-form') !== null`, 10*time.Second)
		if action := eval[string](b, `document.querySelector('`+view+` .elicitation-answer .chip').textContent`); action != "decline" {
			t.Errorf("the answer's action: %q", action)
		}
		if !eval[bool](b, `(() => { const a = document.querySelector('`+view+` .elicitation-answer'), m = document.querySelector('`+view+` .elicitation-message'); return !!(a.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING) })()`) {
			t.Error("the action is not shown before the form's message")
		}
		type field struct {
			Value       string `json:"value"`
			Placeholder string `json:"placeholder"`
		}
		fields := eval[map[string]field](b, `Object.fromEntries([...document.querySelectorAll('`+view+` .form-row')].map(r => { const c = r.querySelector('input:not([type=checkbox]), select'); return [r.dataset.field, c ? {value: c.tagName === 'SELECT' ? c.options[c.selectedIndex].textContent : c.value, placeholder: c.placeholder || ''} : {value: '', placeholder: ''}] }))`)
		if q := fields["quantity"]; q.Value != "" || !strings.Contains(q.Placeholder, "default: 1") {
			t.Errorf("quantity shows %+v, want no value and its default as a default", q)
		}
		if c := fields["color"]; strings.Contains(c.Value, "blue") && !strings.Contains(c.Value, "default") {
			t.Errorf("color shows %+v, want no answer", c)
		}
		if eval[bool](b, `document.querySelector('`+view+` [data-field="gift"] input[type=checkbox]').checked`) {
			t.Error("gift is ticked, though nobody answered")
		}
		b.shots("elicitation-declined")
		b.checkClean()
	})

	// 7. Nesting in view: * opens every node and - closes them, a setting
	// opens the calls that hold server requests as the page loads, and a
	// call's page shows its answer beside it. (Before, * did nothing,
	// children stayed behind chips, and the answer was a page away.)
	t.Run("NestingAndAnswers", func(t *testing.T) {
		b.fresh(t)
		r := newRigServer(t, nil, &fixtures.ServerOptions{Showcase: true})
		r.runShowcase(t, fixtures.PathStateful)
		sess := r.sessionOfClient(t, "showcase-client")
		page := r.srv.URL + "/sessions/" + esc(sess.ID)
		b.open(page)
		b.waitFor("the tree", treeReady, 10*time.Second)
		const holders = `[...document.querySelectorAll('[role=tree] li[role=treeitem]')].filter(li => li._node && ((li._node.children || []).length || (li._node.rounds || []).length))`
		b.run("*", chromedp.KeyEvent("*"))
		b.waitFor("every node open", `document.querySelectorAll('li[data-method="sampling/createMessage"]').length >= 2 && `+holders+`.every(li => li.getAttribute('aria-expanded') === 'true')`, 10*time.Second)
		b.shots("tree-expanded")
		b.run("-", chromedp.KeyEvent("-"))
		if n := eval[int](b, `document.querySelectorAll('li[role=treeitem][aria-expanded=true]').length`); n != 0 {
			t.Errorf("%d nodes open after -", n)
		}
		// The setting, kept in the browser: calls with nested server
		// requests open as the page loads; others stay closed.
		b.click("input.open-nested")
		b.open(page)
		b.waitFor("the tree", treeReady, 10*time.Second)
		sample := `[...document.querySelectorAll('[role=tree] > li[data-method="tools/call"]')].find(li => li.querySelector('.name')?.textContent === 'sample_tools')`
		if open := eval[string](b, sample+`.getAttribute('aria-expanded')`); open != "true" {
			t.Errorf("the call with sampling requests is %q, want open", open)
		}
		if open := eval[string](b, `[...document.querySelectorAll('[role=tree] > li[data-method="tools/call"]')].find(li => li.querySelector('.name')?.textContent === 'shapes').getAttribute('aria-expanded')`); open != "false" {
			t.Errorf("a call with nothing nested is %q, want closed", open)
		}
		b.click("input.open-nested") // leave the browser as it was
		// A call's page: its answer beside it.
		call := r.seqWhere(t, sess.ID, func(m *capture.Message) bool {
			return m.Name == fixtures.ToolForecast && m.Kind == protocol.KindRequest
		})
		b.open(fmt.Sprintf("%s/messages/%d", page, call))
		b.waitFor("the call and its answer", `document.querySelector('.call-and-answer .call-answer .structured') !== null`, 10*time.Second)
		if text := eval[string](b, `document.querySelector('.call-and-answer .call-answer').textContent`); !strings.Contains(text, "Paris") {
			t.Errorf("the answer beside the call: %q", text)
		}
		b.shots("call-and-answer")
		b.checkClean()
	})

	// 8. Who is waited on: the Tools page says a call is held on the
	// Intercept page, and how far the server's progress is; the tree says
	// how long a message was held and who let it go. (Before, a bare
	// "Sending…", and "+19.2s" with nothing to say why.)
	t.Run("WaitsAttributed", func(t *testing.T) {
		b.fresh(t)
		ir := newInterceptRig(t, "", "tools/call:echo", "sampling/createMessage")
		cs := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
		ir.sync(t)
		api := newAPIClient(t, ir.srv.URL)
		heldID := func(method string) string {
			t.Helper()
			timeout := time.After(10 * time.Second)
			for {
				_, changed := ir.icpt.Watch()
				for _, h := range ir.icpt.Held() {
					if h.Method == method {
						return h.ID
					}
				}
				select {
				case <-changed:
				case <-timeout:
					t.Fatalf("nothing held for %s", method)
				}
			}
		}
		b.open(ir.srv.URL + "/tools")
		b.waitFor("the tools", `document.querySelector('main[data-ready] section.upstream') !== null`, 10*time.Second)
		// The dashboard's own call, held by the rule.
		echo := `details.tool[data-tool="echo"]`
		b.click(echo + " summary")
		b.waitFor("the form", `document.querySelector('`+echo+` [data-field="text"] input') !== null`, 5*time.Second)
		b.run("the text", chromedp.SetValue(chromedp.CSS(echo+` [data-field="text"] input`), "held on its way"))
		b.click(echo + " button.send-tool")
		b.waitFor("held, it says", `document.querySelector('`+echo+` .waiting')?.textContent.includes('Held on the Intercept page')`, 15*time.Second)
		b.screenshot("tools-held")
		api.send(http.MethodPost, "/api/v1/intercept/"+heldID("tools/call"), map[string]any{"action": "forward"}, nil)
		b.waitFor("the answer", `document.querySelector('`+echo+` .tool-result-box[data-done]') !== null`, 15*time.Second)
		// A slow call reports its progress as it goes.
		slow := `details.tool[data-tool="slow"]`
		b.click(slow + " summary")
		b.waitFor("slow's form", `document.querySelector('`+slow+` [data-field="steps"] input') !== null`, 5*time.Second)
		b.run("steps", chromedp.SetValue(chromedp.CSS(slow+` [data-field="steps"] input`), "4"))
		b.run("duration", chromedp.SetValue(chromedp.CSS(slow+` [data-field="duration_ms"] input`), "4000"))
		b.click(slow + " button.send-tool")
		b.waitFor("its progress", `/Progress [123]\/4/.test(document.querySelector('`+slow+` .waiting')?.textContent || '')`, 15*time.Second)
		b.screenshot("tools-progress")
		b.waitFor("slow's answer", `document.querySelector('`+slow+` .tool-result-box[data-done]') !== null`, 20*time.Second)

		// A sampling request held, then answered by a person: the tree
		// says how long, and who.
		got := callTool(cs, fixtures.ToolSample, map[string]any{"prompt": "what is 2+2?"})
		api.send(http.MethodPost, "/api/v1/intercept/"+heldID(protocol.MethodSampling), map[string]any{"action": "answer",
			"result": map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "four"}, "model": "a-person"}}, nil)
		if a := wait(t, got); a.err != nil {
			t.Fatal(a.err)
		}
		ir.sync(t)
		sess := ir.sessionOfClient(t, "bare-client")
		b.open(ir.srv.URL + "/sessions/" + esc(sess.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		eval[bool](b, `[...document.querySelectorAll('[role=tree] > li[data-method="tools/call"]')].find(li => li.querySelector('.name')?.textContent === 'sample')._open(true), true`)
		chipText := eval[string](b, `document.querySelector('li[data-method="sampling/createMessage"] > .row .chip.wait.held')?.textContent || ''`)
		if !strings.HasPrefix(chipText, "held ") || !strings.Contains(chipText, "by intercept, a person decided") {
			t.Errorf("the held sampling request's chip: %q", chipText)
		}
		b.shots("tree-held")
		b.checkClean()
	})

	// 9. Readable: every text colour of both themes at 4.5:1 or more on
	// every surface it can sit on, computed from the stylesheet; at
	// 1000 px a session row is one line (ids whole) and the screen holds
	// many; the latency chart draws no line across buckets without
	// samples; a tool's history comes a page at a time. (Before, dark
	// JSON numbers were at 2.55:1, ids broke mid-word, lines crossed empty
	// ranges, and 200 rows came at once.)
	t.Run("Readable", func(t *testing.T) {
		b.fresh(t)
		r := newRigServer(t, nil, nil)
		r.runClient(t, fixtures.PathStateful, fixtures.ToolEcho)
		for i := range 30 {
			r.named(t, fmt.Sprintf("20250102-0000%02d-row%03d", i, i), "a-client-with-a-rather-long-name-indeed", "a-server-whose-name-goes-on-and-on-too")
		}
		r.bursts(t, "20250103-000000-bursts", 20*time.Minute)

		b.open(r.srv.URL + "/sessions")
		b.waitFor("the list", `document.querySelectorAll('table.sessions[data-ready] tbody tr').length > 30`, 10*time.Second)
		for _, theme := range []string{"light", "dark"} {
			b.theme(theme)
			res := eval[struct {
				Pairs int      `json:"pairs"`
				Bad   []string `json:"bad"`
				Bg    string   `json:"bg"`
			}](b, contrastCheck)
			if res.Pairs < 40 {
				t.Errorf("%s: %d colour pairs checked, want every text colour of the stylesheet on every surface", theme, res.Pairs)
			}
			for _, bad := range res.Bad {
				t.Errorf("%s theme: %s", theme, bad)
			}
			t.Logf("%s theme (page background %s): %d pairs checked", theme, res.Bg, res.Pairs)
			b.screenshot("theme-" + theme)
		}
		b.theme("")

		// 1000 px: one line a row, ids whole, a screenful of rows.
		b.resize(1000)
		b.settle()
		if broken := eval[[]string](b, `[...document.querySelectorAll('table.sessions tbody td.id a')].filter(a => a.getClientRects().length !== 1).map(a => a.textContent)`); len(broken) > 0 {
			t.Errorf("at 1000 px these ids break over lines: %q", broken)
		}
		if tall := eval[int](b, `(() => { const rows = [...document.querySelectorAll('table.sessions tbody tr')]; const h = Math.min(...rows.map(r => r.getBoundingClientRect().height)); return rows.filter(r => r.getBoundingClientRect().height > h * 1.3).length })()`); tall > 0 {
			t.Errorf("at 1000 px %d rows take more than one line", tall)
		}
		eval[bool](b, `(window.scrollTo(0, 0), true)`)
		if fit := eval[int](b, `[...document.querySelectorAll('table.sessions tbody tr')].filter(r => r.getBoundingClientRect().bottom <= window.innerHeight).length`); fit < 18 {
			t.Errorf("at 1000 px %d rows fit on the first screen, want a screenful", fit)
		}
		if over := eval[int](b, `(() => { const box = document.querySelector('table.sessions').closest('.scroll'); return Math.max(document.documentElement.scrollWidth - window.innerWidth, box.scrollWidth - box.clientWidth) })()`); over > 0 {
			t.Errorf("at 1000 px the list is %d px wider than the window: its last columns are out of sight", over)
		}
		b.screenshot("sessions-1000")
		b.resize(1400)

		// The latency chart: two bursts twenty minutes apart, no line
		// across the empty minutes between.
		b.open(r.srv.URL + "/latency?measure=duration&session=20250103-000000-bursts&buckets=20")
		b.waitFor("the chart", `document.querySelectorAll('svg.chart circle').length > 0`, 10*time.Second)
		across := eval[[]string](b, `(() => { const mid = 64 + (900 - 64 - 14) / 2; return [...document.querySelectorAll('svg.chart polyline')].filter(p => { const xs = p.getAttribute('points').split(' ').map(s => +s.split(',')[0]); return Math.min(...xs) < mid - 50 && Math.max(...xs) > mid + 50 }).map(p => p.dataset.method) })()`)
		if len(across) > 0 {
			t.Errorf("lines cross the empty minutes between the bursts: %q", across)
		}
		b.shots("latency-gap")

		// A tool's history, a page at a time.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs := connect(t, r.px.URL+fixtures.PathStateful, "history-client", nil)
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for i := range 25 {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixtures.ToolEcho, Arguments: map[string]any{"text": fmt.Sprint("call ", i)}}); err != nil {
				t.Fatal(err)
			}
		}
		r.sync(t)
		b.open(r.srv.URL + "/tools")
		echo := `details.tool[data-tool="echo"]`
		b.waitFor("the tools", `document.querySelector('`+echo+`') !== null`, 10*time.Second)
		b.click(echo + " summary")
		b.waitFor("the first page", `document.querySelector('`+echo+` .history[data-ready] table.history-table') !== null`, 10*time.Second)
		if n := eval[int](b, `document.querySelectorAll('`+echo+` table.history-table tbody tr').length`); n != 20 {
			t.Errorf("the history's first page: %d rows, want 20", n)
		}
		b.click(echo + " button.more-history")
		b.waitFor("the next page", `document.querySelectorAll('`+echo+` table.history-table tbody tr').length === 26`, 10*time.Second)
		if eval[bool](b, `!document.querySelector('`+echo+` button.more-history').hidden`) {
			t.Error("Show older calls is offered with nothing older")
		}
		b.checkClean()
	})

	// 10. Errors a user reads: a missing session in words, and a
	// recorder that stopped says so and what still works. (Before:
	// "badgerstore: session … not found" and "Failed to fetch dynamically
	// imported module".)
	t.Run("UserFacingErrors", func(t *testing.T) {
		b.fresh(t)
		r := newRigServer(t, nil, nil)
		r.runClient(t, fixtures.PathStateful, fixtures.ToolEcho)
		b.allow(`/api/v1/sessions/no-such-session`)
		b.open(r.srv.URL + "/sessions/no-such-session")
		b.waitFor("the error", `document.querySelector('main .error') !== null`, 10*time.Second)
		if text := eval[string](b, `document.querySelector('main .error').textContent`); strings.Contains(text, "badgerstore") || !strings.Contains(text, `No session "no-such-session"`) {
			t.Errorf("a missing session says %q", text)
		}
		b.open(r.srv.URL + "/sessions")
		b.waitFor("the list", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
		r.srv.CloseClientConnections()
		r.srv.Close()
		b.allow(`ERR_CONNECTION_REFUSED|ERR_CONNECTION_RESET|ERR_EMPTY_RESPONSE|ERR_INCOMPLETE_CHUNKED_ENCODING|Failed to fetch`)
		b.click(`#nav a[data-nav=latency]`)
		b.waitFor("the stopped page", `document.querySelector('main .error') !== null`, 10*time.Second)
		text := eval[string](b, `document.querySelector('main .error').textContent`)
		if strings.Contains(text, "dynamically imported module") || !strings.Contains(text, "mcptape has stopped") || !strings.Contains(text, "What is on screen stays readable") {
			t.Errorf("with the recorder stopped the page says %q", text)
		}
		b.waitFor("the banner", `document.getElementById('banner').dataset.state === 'stopped'`, 15*time.Second)
		b.screenshot("stopped")
		b.mu.Lock()
		b.exceptions = nil // the browser's own report of the failed import
		b.mu.Unlock()
		b.checkClean()
	})

	// 11. The smaller ones: sorting by a column, an id by its start in
	// the address, no Pending on a recorder, a session's call count that
	// matches its tree, ? for the keys, a skip link.
	t.Run("Smaller", func(t *testing.T) {
		b.fresh(t)
		r := newRigServer(t, nil, nil)
		r.runClient(t, fixtures.PathStateful)
		r.runClient(t, fixtures.PathStateless)
		modern := r.sessionOn(t, fixtures.PathStateless)
		b.open(r.srv.URL + "/sessions")
		b.waitFor("the list", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
		if eval[bool](b, `!document.querySelector('#nav a[data-nav=pending]').hidden`) {
			t.Error("a recorder's dashboard offers Pending, which only a replay client's has")
		}
		// A skip link first, then ? for the keys.
		b.run("Tab", chromedp.KeyEvent(kb.Tab))
		if got := eval[string](b, `document.activeElement.className + ' ' + (document.activeElement.getBoundingClientRect().top >= 0)`); got != "skip-link true" {
			t.Errorf("the first Tab stop: %q, want the skip link, on screen", got)
		}
		eval[bool](b, `(document.querySelector('table.sessions').__kept = true, true)`)
		b.run("Enter", chromedp.KeyEvent(kb.Enter))
		b.settle()
		if got := eval[string](b, `document.activeElement.id + ' ' + (document.querySelector('table.sessions').__kept === true)`); got != "main true" {
			t.Errorf("after the skip link: %q, want the focus on the content, the page as it was", got)
		}
		// Sorting by calls, most first.
		b.click(`table.sessions th.col-calls a.sort`)
		b.waitFor("sorted", `new URLSearchParams(location.search).get('sort') === 'calls' && document.querySelector('table.sessions[data-ready] th.col-calls')?.getAttribute('aria-sort') === 'descending'`, 10*time.Second)
		calls := eval[[]int](b, `[...document.querySelectorAll('table.sessions tbody tr')].map(tr => +tr.cells[6].textContent.replace(/,/g, ''))`)
		for i := 1; i < len(calls); i++ {
			if calls[i] > calls[i-1] {
				t.Errorf("sorted by calls, most first: %v", calls)
				break
			}
		}
		// An id by its start; the address then names all of it.
		b.open(r.srv.URL + "/sessions/" + esc(modern.ID[:20]))
		b.waitFor("the session", treeReady, 10*time.Second)
		if p := eval[string](b, `location.pathname`); p != "/sessions/"+esc(modern.ID) {
			t.Errorf("opened by its start, the address is %s", p)
		}
		// The calls the facts count are the calls the tree shows.
		heading := eval[string](b, `[...document.querySelectorAll('section.panel h2')].find(h => h.textContent.startsWith('Calls and notifications')).textContent`)
		facts := eval[string](b, `document.querySelector('.facts .calls').textContent`)
		if !strings.Contains(heading, "("+facts+" call") {
			t.Errorf("the facts say %s calls, the tree's heading %q", facts, heading)
		}
		b.run("?", chromedp.KeyEvent("?"))
		b.waitFor("the keys", `document.getElementById('keys-help')?.open === true`, 5*time.Second)
		if keys := eval[string](b, `document.getElementById('keys-help').textContent`); !strings.Contains(keys, "e / E") || !strings.Contains(keys, "open every node") {
			t.Errorf("the keys help: %q", keys)
		}
		b.screenshot("keys-help")
		b.run("Escape", chromedp.KeyEvent(kb.Escape))
		b.checkClean()
	})

	// One live tail: the nav's counts (pending, intercept) and the pages
	// share one connection, kept while the user moves between pages.
	// (Before, each count and the Live page opened one of their own.)
	t.Run("OneLiveConnection", func(t *testing.T) {
		b.fresh(t)
		icpt, err := capture.NewInterceptor(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := dashboard.NewPending()
		t.Cleanup(func() { p.Close() })
		d, err := dashboard.New(smallStore(t), &dashboard.Options{Intercept: icpt, Pending: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		var mu sync.Mutex
		open, most, total := 0, 0, 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/v1/live" {
				mu.Lock()
				open++
				total++
				most = max(most, open)
				mu.Unlock()
				defer func() { mu.Lock(); open--; mu.Unlock() }()
			}
			d.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
		knowToken(t, srv.URL, d.Token())
		b.open(srv.URL + "/live")
		b.waitFor("the live page", `document.querySelector('.live-state.ok') !== null && document.querySelector('#intercept-count[data-live]') !== null && document.querySelector('#pending-count[data-live]') !== null`, 10*time.Second)
		// Count from the page that is live now: the log-in page before it
		// (a page load of its own) may have opened one as it went, which
		// the server may not have seen closed yet (a loaded machine).
		fixtures.Eventually(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if open != 1 {
				return fmt.Errorf("%d live tail connections open, want the live page's one", open)
			}
			total, most = open, open
			return nil
		})
		for _, nav := range []string{"intercept", "pending", "sessions", "live"} {
			b.click(`#nav a[data-nav=` + nav + `]`)
			b.waitFor("the "+nav+" page", `document.querySelector('#nav a.active')?.dataset.nav === '`+nav+`'`, 10*time.Second)
		}
		b.waitFor("live again", `document.querySelector('.live-state.ok') !== null`, 10*time.Second)
		mu.Lock()
		gotMost, gotTotal := most, total
		mu.Unlock()
		if gotMost != 1 || gotTotal != 1 {
			t.Errorf("%d live tail connections at once and %d in all, want one", gotMost, gotTotal)
		}
		b.checkClean()
	})
}

// theme emulates prefers-color-scheme: light or dark ("" stops).
func (b *browser) theme(scheme string) {
	b.t.Helper()
	p := emulation.SetEmulatedMediaParams{}
	if scheme != "" {
		p.Features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	b.run("the "+scheme+" theme", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, p)
		return err
	}))
}

// contrastCheck computes, from the stylesheet as the browser applies it
// (the theme in force), the contrast of every text colour on the
// surfaces it can sit on: a rule's own background when it sets one, else
// every background a rule sets for text to inherit (and the page's). It
// returns how many pairs it checked and those under 4.5:1.
const contrastCheck = `(() => {
  const probe = document.createElement('span');
  document.body.append(probe);
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const computed = (prop, value) => {
    probe.removeAttribute('style');
    probe.style.setProperty(prop === 'color' ? 'color' : 'background', value);
    return getComputedStyle(probe).getPropertyValue(prop === 'color' ? 'color' : 'background-color');
  };
  const rgb = (css, under) => {
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = under;
    ctx.fillRect(0, 0, 1, 1);
    ctx.fillStyle = css;
    ctx.fillRect(0, 0, 1, 1);
    const d = ctx.getImageData(0, 0, 1, 1).data;
    return 'rgb(' + d[0] + ', ' + d[1] + ', ' + d[2] + ')';
  };
  const lum = (c) => {
    const [r, g, b] = c.match(/\d+/g).map(Number).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const page = rgb(computed('background', 'var(--bg)'), '#fff');
  const panel = rgb(computed('background', 'var(--panel)'), page);
  const rules = [];
  const walk = (list) => { for (const r of list) { if (r instanceof CSSStyleRule) rules.push(r); else if (r.cssRules) walk(r.cssRules); } };
  for (const sheet of document.styleSheets) walk(sheet.cssRules);
  const none = /^(|none|transparent|inherit|initial|unset|currentcolor)$/i;
  const bgOf = (r) => r.style.getPropertyValue('background-color') || r.style.getPropertyValue('background');
  const surfaces = new Map([[page, 'the page'], [panel, 'a panel']]);
  for (const r of rules) {
    const bg = bgOf(r).trim();
    if (none.test(bg) || r.style.getPropertyValue('color') || r.selectorText.includes('::backdrop')) continue;
    surfaces.set(rgb(computed('background', bg), panel), r.selectorText);
  }
  const texts = [['var(--fg)', 'the page\'s text', null]];
  for (const r of rules) {
    const c = r.style.getPropertyValue('color').trim();
    if (none.test(c)) continue;
    const bg = bgOf(r).trim();
    texts.push([c, r.selectorText, none.test(bg) ? null : bg]);
  }
  const bad = [];
  let pairs = 0;
  for (const [c, where, own] of texts) {
    const fg = rgb(computed('color', c), panel);
    const on = own ? new Map([[rgb(computed('background', own), panel), where + "'s own background"]]) : surfaces;
    for (const [bg, what] of on) {
      pairs++;
      const k = ratio(fg, bg);
      if (k < 4.5) bad.push(where + ' (' + c + ' = ' + fg + ') on ' + what + ' (' + bg + '): ' + k.toFixed(2) + ':1');
    }
  }
  probe.remove();
  return { pairs, bad, bg: page };
})()`
