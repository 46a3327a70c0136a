package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

// interceptRig is what `mcptape record --intercept …` runs: an upstream
// behind a recording proxy that holds what the rules match, a Badger
// store on disk, and the dashboard over both, its Intercept page
// answering from the testing profiles in a directory of its own.
type interceptRig struct {
	*rig
	icpt     *capture.Interceptor
	profiles string
}

func newInterceptRig(t testing.TB, upstream string, rules ...string) *interceptRig {
	t.Helper()
	var rs []capture.InterceptRule
	for _, s := range rules {
		r, err := capture.ParseInterceptRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	icpt, err := capture.NewInterceptor(rs, &capture.InterceptorOptions{Timeout: 2 * time.Minute, Pseudonym: capture.RedactOptions{}.Pseudonym})
	if err != nil {
		t.Fatal(err)
	}
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ir := &interceptRig{rig: &rig{store: store}, icpt: icpt, profiles: t.TempDir()}
	var routes []dashboard.Route // the proxy's one upstream, once known
	r := ir.rig
	r.dash, err = dashboard.New(store, &dashboard.Options{Feed: dashboard.FeedPublish, Intercept: icpt, Profiles: ir.profiles,
		// As cmd wires it: replay's profiles, the recorder's Sync, and
		// replay.Send as the dashboard's own client.
		Backend: &testRecording{testBackend: &testBackend{profiles: ir.profiles}, rec: func() *capture.Recorder { return r.rec },
			routes: func() []dashboard.Route { return routes }},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dash.Close() })
	if upstream == "" {
		r.up = httptest.NewServer(fixtures.Handler(&fixtures.ServerOptions{Showcase: true}))
		t.Cleanup(r.up.Close)
		upstream = r.up.URL
	}
	up, _ := url.Parse(upstream)
	routes = []dashboard.Route{{Upstream: upstream}}
	r.rec, err = capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{OnBatch: r.dash.Publish, Upstream: up.Scheme + "://" + up.Host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.rec.Close(ctx)
	})
	p, err := proxy.New(&proxy.Options{Upstream: up, Recorder: r.rec, Intercept: icpt})
	if err != nil {
		t.Fatal(err)
	}
	r.px = httptest.NewServer(p)
	t.Cleanup(r.px.Close)
	t.Cleanup(func() {
		r.px.CloseClientConnections()
		if r.up != nil {
			r.up.CloseClientConnections()
		}
	})
	r.dash.SetProxyURL(r.px.URL)
	r.srv = httptest.NewServer(r.dash)
	t.Cleanup(func() { r.srv.CloseClientConnections(); r.srv.Close() })
	knowToken(t, r.srv.URL, r.dash.Token())
	return ir
}

// waitHeld waits, on the queue's own signal, until n messages are held.
func (ir *interceptRig) waitHeld(t testing.TB, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		held, changed := ir.icpt.Watch()
		if held >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d messages held, want %d", held, n)
		}
	}
}

// bareClient connects a go-sdk client through the proxy, on the legacy
// era, without sampling or roots handlers. It declares elicitation (go-sdk
// servers ask only clients that do), but its handler fails the test: a
// person answers in its place.
func (ir *interceptRig) bareClient(t testing.TB, url string) *mcp.ClientSession {
	t.Helper()
	var asked atomic.Int32
	t.Cleanup(func() {
		if n := asked.Load(); n > 0 && !t.Failed() {
			t.Errorf("the client was asked to elicit %d times, though a person answered in its place", n)
		}
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "bare-client", Version: "v1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: protocol.V20251125})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// What is still held goes on first: a client's DELETE waits for
		// the server, which may wait for a held answer.
		ir.icpt.Close()
		cs.Close()
	})
	return cs
}

type toolAnswer struct {
	text string
	err  error
}

func callTool(cs *mcp.ClientSession, name string, args map[string]any) <-chan toolAnswer {
	ch := make(chan toolAnswer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			ch <- toolAnswer{err: err}
			return
		}
		var parts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		ch <- toolAnswer{text: strings.Join(parts, "\n")}
	}()
	return ch
}

func wait(t testing.TB, ch <-chan toolAnswer) toolAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not return")
	}
	return toolAnswer{}
}

// heldCard waits for the card of a held message of what and method.
func heldCard(b *browser, what, method string) string {
	b.t.Helper()
	sel := `section.held[data-what="` + what + `"][data-method="` + method + `"]`
	b.waitFor("a held "+what+" "+method, `document.querySelector('`+sel+`') !== null`, 20*time.Second)
	return sel
}

// TestBrowserIntercept: through the recording proxy in front of the
// fixture server, a person on the Intercept page edits and forwards a
// held tools/call (the server saw the edit, the client got its answer),
// answers a held sampling request in place of the client (the server got
// that answer), answers an elicitation through the form generated from
// its schema (declined, then accepted with content the schema
// validates, after the form refused content it does not), and fails a
// held response; and sets a rule at run time.
func TestBrowserIntercept(t *testing.T) {
	ir := newInterceptRig(t, "", "tools/call:echo", "sampling/createMessage", "elicitation/create")
	b := newBrowser(t)
	b.open(ir.srv.URL + "/intercept")
	b.waitFor("the page", `document.querySelector('.held-list[data-ready]') !== null && document.querySelector('#intercept-count[data-live]') !== null`, 10*time.Second)
	cs := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)

	// 1. A tools/call, edited and forwarded.
	got := callTool(cs, "echo", map[string]any{"text": "as the client wrote it <script>window.__pwned=1</script>"})
	card := heldCard(b, "request", "tools/call")
	b.waitFor("the nav count", `document.getElementById('intercept-count').textContent === '1'`, 5*time.Second)
	if text := eval[string](b, `document.querySelector('`+card+`').textContent`); !strings.Contains(text, "as the client wrote it <script>") {
		t.Errorf("the card shows %q", text)
	}
	b.screenshot("held-tools-call")
	b.click(card + " details.edit-box summary")
	edited := eval[string](b, `document.querySelector('`+card+` textarea.edit-json').value`)
	edited = strings.Replace(edited, "as the client wrote it <script>window.__pwned=1</script>", "edited on the Intercept page", 1)
	// Not JSON first: refused until confirmed.
	b.run("a broken edit", chromedp.SetValue(chromedp.CSS(card+" textarea.edit-json"), edited[:len(edited)-3]))
	eval[bool](b, `(document.querySelector('`+card+` textarea.edit-json').dispatchEvent(new Event('input')), true)`)
	b.click(card + " button.send-edit")
	b.waitFor("the refusal", `document.querySelector('`+card+` .check').textContent.includes('not JSON')`, 5*time.Second)
	b.run("the edit", chromedp.SetValue(chromedp.CSS(card+" textarea.edit-json"), edited))
	b.click(card + " button.send-edit")
	if a := wait(t, got); a.err != nil || a.text != "edited on the Intercept page" {
		t.Fatalf("the client got %+v, want the server's echo of the edit", a)
	}
	b.waitFor("the card gone", `document.querySelector('`+card+`') === null`, 10*time.Second)
	if eval[bool](b, `window.__pwned !== undefined`) {
		t.Error("held content ran")
	}

	// 2. A sampling request the server sends, answered by hand.
	got = callTool(cs, "sample", map[string]any{"prompt": "what is 2+2?"})
	card = heldCard(b, "server-request", protocol.MethodSampling)
	b.screenshot("held-sampling")
	answer := `{"role":"assistant","content":{"type":"text","text":"four, answered on the page"},"model":"a-person","stopReason":"endTurn"}`
	b.run("the answer", chromedp.SetValue(chromedp.CSS(card+" .answer-panel textarea.answer-json"), answer))
	b.click(card + " .answer-panel button.edit-send")
	if a := wait(t, got); a.err != nil || a.text != "four, answered on the page" {
		t.Fatalf("sample returned %+v, want the person's answer", a)
	}
	b.waitFor("the sampling card gone", `document.querySelector('`+card+`') === null`, 10*time.Second)

	// 3. An elicitation through the generated form: declined, then
	// accepted once the form validates.
	got = callTool(cs, "elicit_form", nil)
	card = heldCard(b, "server-request", protocol.MethodElicitation)
	b.click(card + " button.elicit-decline")
	if a := wait(t, got); a.err != nil || a.text != "action=decline" {
		t.Fatalf("declined: %+v", a)
	}
	b.waitFor("the declined card gone", `document.querySelector('`+card+`') === null`, 10*time.Second)
	got = callTool(cs, "elicit_form", nil)
	card = heldCard(b, "server-request", protocol.MethodElicitation)
	// age 200 is over the schema's maximum, and name is required.
	b.run("an age out of bounds", chromedp.SetValue(chromedp.CSS(card+` .elicit-form [data-field="age"] input[type=number]`), "200"))
	eval[bool](b, `(document.querySelector('`+card+` .elicit-form [data-field="age"] input[type=number]').dispatchEvent(new Event('input', {bubbles: true})), true)`)
	b.waitFor("the field's complaint", `document.querySelector('`+card+` .elicit-form [data-field="age"] .field-error').textContent.includes('at most 150')`, 5*time.Second)
	b.click(card + " button.elicit-accept")
	b.waitFor("the form refused", `document.querySelector('`+card+` > .check').textContent.includes('does not validate')`, 5*time.Second)
	b.screenshot("elicitation-form-invalid")
	b.run("a name", chromedp.SetValue(chromedp.CSS(card+` .elicit-form [data-field="name"] input`), "Ada"))
	b.run("an age", chromedp.SetValue(chromedp.CSS(card+` .elicit-form [data-field="age"] input[type=number]`), "36"))
	eval[bool](b, `(document.querySelector('`+card+` .elicit-form [data-field="age"] input[type=number]').dispatchEvent(new Event('input', {bubbles: true})), true)`)
	b.click(card + ` [data-field="subscribe"] input.switch`)
	b.click(card + " button.elicit-accept")
	if a := wait(t, got); a.err != nil || a.text != `action=accept content={"age":36,"name":"Ada","subscribe":true}` {
		t.Fatalf("accepted: %+v", a)
	}

	// 4. A rule set at run time holds add's answer, which the person
	// replaces with a JSON-RPC error.
	b.run("a new rule", chromedp.SetValue(chromedp.CSS("input.new-rule"), "response:tools/call:add"))
	b.click("button.add-rule")
	b.waitFor("the rule", `document.querySelector('li[data-rule="response:tools/call:add"] input.rule-enabled')?.checked === true`, 5*time.Second)
	got = callTool(cs, "add", map[string]any{"a": 2, "b": 3})
	card = heldCard(b, "response", "tools/call")
	if text := eval[string](b, `document.querySelector('`+card+`').textContent`); !strings.Contains(text, "2 + 3 = 5") {
		t.Errorf("the held response shows %q", text)
	}
	b.run("the code", chromedp.SetValue(chromedp.CSS(card+" input.error-code"), "-32050"))
	b.run("the message", chromedp.SetValue(chromedp.CSS(card+" input.error-message"), "failed on the page"))
	b.click(card + " button.fail")
	if a := wait(t, got); a.err == nil || !strings.Contains(a.err.Error(), "failed on the page") {
		t.Fatalf("the failed response: %+v", a)
	}
	b.waitFor("nothing held", `document.querySelectorAll('section.held').length === 0`, 10*time.Second)
	b.shots("intercept")
	b.checkClean()

	// The record: each held message as received, marked, with what went on.
	ir.sync(t)
	marked := map[string]bool{}
	for s, err := range ir.store.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range ir.store.Messages(context.Background(), s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range m.Findings {
				if f.Kind == capture.FindingIntercepted {
					marked[m.Kind.String()+" "+m.Method+" "+m.Name] = true
					if m.Kind == protocol.KindRequest && m.Name == "echo" && (m.Edited != 1 || !bytes.Contains(m.Raw, []byte("edited on the Intercept page"))) {
						t.Errorf("the edited call as recorded: edited %d raw %s", m.Edited, m.Raw)
					}
				}
			}
		}
	}
	for _, want := range []string{"request tools/call echo", "request sampling/createMessage ", "request elicitation/create ", "result tools/call add", "result sampling/createMessage "} {
		if !marked[want] {
			t.Errorf("the record marks no %q as intercepted; marked: %v", want, marked)
		}
	}
}

// TestBrowserAnswerPanel: a request mcptape answers for the client
// (--answer sampling=person) gets the Inspector-style panel: Auto-respond
// from the testing profile picked for it, and Reject.
func TestBrowserAnswerPanel(t *testing.T) {
	ir := newInterceptRig(t, "")
	prof := `{"name":"claude-mock","sampling":{"template":"mock: {{prompt}}","model":"mock-default","overrides":[{"hint":"fix*","model":"fixture-model","template":"override: {{prompt}}"}]}}`
	if err := os.WriteFile(filepath.Join(ir.profiles, "claude-mock.json"), []byte(prof), 0o644); err != nil {
		t.Fatal(err)
	}
	// The queue as --answer sampling=person fills it.
	ask := func(params string) <-chan capture.Verdict {
		ch := make(chan capture.Verdict, 1)
		go func() {
			v, _ := ir.icpt.Hold(t.Context(), capture.HeldMessage{What: capture.HeldAnswer, Direction: protocol.ServerToClient,
				Method: protocol.MethodSampling, Raw: json.RawMessage(params), Rule: "--answer sampling=person"})
			ch <- v
		}()
		return ch
	}
	b := newBrowser(t)
	b.open(ir.srv.URL + "/intercept")
	b.waitFor("the page", `document.querySelector('.held-list[data-ready]') !== null`, 10*time.Second)
	got := ask(`{"messages":[{"role":"user","content":{"type":"text","text":"hello"}}],"modelPreferences":{"hints":[{"name":"fixture"}]},"maxTokens":10}`)
	card := heldCard(b, "answer", protocol.MethodSampling)
	b.run("the profile", chromedp.SetValue(chromedp.CSS(card+" select.profile-select"), "claude-mock"))
	b.screenshot("answer-panel")
	b.click(card + " button.auto-respond")
	v := verdict(t, b, got, "Auto-respond")
	var res struct {
		Model   string `json:"model"`
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(v.Result, &res); err != nil || v.Action != capture.ActionAnswer || res.Model != "fixture-model" || res.Content.Text != "override: hello" ||
		!strings.Contains(v.By, "claude-mock") {
		t.Fatalf("Auto-respond answered %+v (%s)", v, v.Result)
	}
	b.waitFor("the answered card gone", `document.querySelector('`+card+`') === null`, 10*time.Second)
	got = ask(`{"messages":[],"maxTokens":10}`)
	card = heldCard(b, "answer", protocol.MethodSampling)
	b.click(card + " button.reject")
	if v := verdict(t, b, got, "Reject"); v.Action != capture.ActionFail || v.Error == nil || v.Error.Code != -1 {
		t.Fatalf("Reject: %+v", v)
	}
	b.waitFor("the rejected card gone", `document.querySelector('`+card+`') === null`, 10*time.Second)

	// A URL-mode elicitation: its URL to copy (as text, never a link), and
	// Completed.
	ch := make(chan capture.Verdict, 1)
	go func() {
		v, _ := ir.icpt.Hold(t.Context(), capture.HeldMessage{What: capture.HeldAnswer, Direction: protocol.ServerToClient,
			Method: protocol.MethodElicitation, Raw: json.RawMessage(`{"mode":"url","message":"Sign in, please","url":"https://example.invalid/consent?x=1","elicitationId":"e-1"}`),
			Rule: "--answer elicitation=person"})
		ch <- v
	}()
	card = heldCard(b, "answer", protocol.MethodElicitation)
	if text := eval[string](b, `document.querySelector('`+card+`').textContent`); !strings.Contains(text, "https://example.invalid/consent?x=1") ||
		eval[int](b, `document.querySelectorAll('`+card+` a[href*="example.invalid"]').length`) != 0 {
		t.Errorf("the URL elicitation shows %q, or links its URL", text)
	}
	if eval[int](b, `[...document.querySelectorAll('`+card+` button')].filter((x) => x.textContent === 'Copy URL').length`) != 1 {
		t.Error("no Copy URL button")
	}
	b.click(card + " button.url-completed")
	if v := verdict(t, b, ch, "Completed"); v.Action != capture.ActionAnswer || string(v.Result) != `{"action":"accept"}` {
		t.Fatalf("Completed: %+v (%s)", v, v.Result)
	}
	b.checkClean()
}

// verdict waits for the verdict a button gave a held message, up to 20 s
// (a click that missed would leave the hold waiting for ever).
func verdict(t *testing.T, b *browser, ch <-chan capture.Verdict, button string) capture.Verdict {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		b.screenshot("unanswered-after-" + button)
		t.Fatalf("the held message was not answered 20 s after %s was pressed%s", button, b.problems())
		return capture.Verdict{}
	}
}

// TestInterceptAPI: the API refuses what breaks the rules and needs the
// CSRF token and same origin like every change.
func TestInterceptAPI(t *testing.T) {
	ir := newInterceptRig(t, "", "tools/call:echo")
	c := newAPIClient(t, ir.srv.URL)
	code, body, _ := c.do(http.MethodPut, "/api/v1/intercept/rules", map[string]any{"rules": []map[string]any{{"rule": "tools/call:[", "enabled": true}}}, nil)
	if code != http.StatusBadRequest || !contains(body, "rule 1") {
		t.Errorf("a bad rule: %d %s", code, body)
	}
	code, body, _ = c.do(http.MethodPut, "/api/v1/intercept/rules", map[string]any{"rules": []map[string]any{{"rule": "tools/call:add", "enabled": true}}}, map[string]string{"X-CSRF-Token": ""})
	if code != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d %s", code, body)
	}
	code, body, _ = c.do(http.MethodPost, "/api/v1/intercept/1", map[string]any{"action": "forward"}, map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
	if code != http.StatusForbidden {
		t.Errorf("from another origin: %d %s", code, body)
	}
	code, body, _ = c.do(http.MethodPost, "/api/v1/send", map[string]any{"path": "/mcp", "method": "tools/list"}, map[string]string{"X-CSRF-Token": ""})
	if code != http.StatusForbidden {
		t.Errorf("a send without the CSRF token: %d %s", code, body)
	}
	code, body, _ = c.do(http.MethodPost, "/api/v1/send", map[string]any{"path": "/mcp", "raw": `{"jsonrpc":`}, nil)
	if code != http.StatusBadRequest || !contains(body, "not JSON") {
		t.Errorf("a raw body that is not JSON, unconfirmed: %d %s", code, body)
	}
	code, body, _ = c.do(http.MethodPost, "/api/v1/send", map[string]any{"path": "/mcp", "method": "ping", "headers": map[string]string{"Host": "evil"}}, nil)
	if code != http.StatusBadRequest || !contains(body, "Host") {
		t.Errorf("a Host header: %d %s", code, body)
	}
	code, body, _ = c.do(http.MethodPost, "/api/v1/intercept/99", map[string]any{"action": "forward"}, nil)
	if code != http.StatusNotFound || !contains(body, "went on already") {
		t.Errorf("an id not held: %d %s", code, body)
	}
	cs := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)
	got := callTool(cs, "echo", map[string]any{"text": "x"})
	ir.waitHeld(t, 1)
	var st struct {
		Held []capture.HeldMessage `json:"held"`
	}
	c.get("/api/v1/intercept", &st)
	if len(st.Held) != 1 {
		t.Fatalf("held: %+v", st.Held)
	}
	code, body, _ = c.do(http.MethodPost, "/api/v1/intercept/"+st.Held[0].ID, map[string]any{"action": "edit", "raw": `{"jsonrpc":`}, nil)
	if code != http.StatusBadRequest || !contains(body, "not JSON") {
		t.Errorf("an edit that is not JSON, unconfirmed: %d %s", code, body)
	}
	c.send(http.MethodPost, "/api/v1/intercept/"+st.Held[0].ID, map[string]any{"action": "forward"}, nil)
	if a := wait(t, got); a.err != nil || a.text != "x" {
		t.Errorf("forwarded: %+v", a)
	}
}

// TestBrowserInterceptPageClosed: closing the page holds nothing up and
// loses nothing: the held call waits for the next page, which shows it
// and forwards it.
func TestBrowserInterceptPageClosed(t *testing.T) {
	ir := newInterceptRig(t, "", "tools/call:echo")
	b := newBrowser(t)
	b.open(ir.srv.URL + "/intercept")
	cs := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)
	got := callTool(cs, "echo", map[string]any{"text": "still here"})
	heldCard(b, "request", "tools/call")
	// The page goes away (another site, as a closed tab), and comes back.
	b.run("leave the page", chromedp.Navigate("about:blank"))
	// Still held (the call cannot have returned): the queue says so.
	if held := ir.icpt.Held(); len(held) != 1 {
		t.Fatalf("%d held once the page went, want the call still held", len(held))
	}
	select {
	case a := <-got:
		t.Fatalf("the call returned while nobody looked: %+v", a)
	default:
	}
	b.open(ir.srv.URL + "/intercept")
	card := heldCard(b, "request", "tools/call")
	b.click(card + " button.forward")
	if a := wait(t, got); a.err != nil || a.text != "still here" {
		t.Fatalf("forwarded from the next page: %+v", a)
	}
	b.checkClean()
}
