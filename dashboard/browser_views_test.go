package dashboard_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// TestBrowserViews opens, in headless Chromium at 1400 and 1000 px, what
// the message page, the input-request page and the tree show for real
// traffic: the go-sdk client through the recording proxy to the fixture
// server's showcase tools on both eras, a careless legacy client whose
// form answer breaks its schema, and 2026-07-28 requests whose routing
// headers disagree with their bodies. Screenshots are kept as artifacts;
// no page may report a console error.
func TestBrowserViews(t *testing.T) {
	opts := tapeOptions(new([]string))
	opts.Profiles = t.TempDir()
	r := newRigServer(t, opts, &fixtures.ServerOptions{Showcase: true})
	r.runShowcase(t, fixtures.PathStateful)
	r.runShowcase(t, fixtures.PathStateless)
	r.runRoutingMismatch(t)
	r.runBadElicitAnswer(t)
	checks := r.runStdioChecks(t)
	legacy := r.sessionOf(t, "showcase-client", fixtures.PathStateful)
	modern := r.sessionOf(t, "showcase-client", fixtures.PathStateless)
	raw := r.sessionOf(t, "raw-client", fixtures.PathStateless)
	careless := r.sessionOf(t, "careless-client", fixtures.PathStateful)
	for _, s := range []*capture.Session{legacy, modern, raw, careless} {
		r.settle(t, s.ID)
	}
	r.settle(t, checks)
	b := newBrowser(t)
	base := r.srv.URL
	msgURL := func(s *capture.Session, seq uint64) string {
		return fmt.Sprintf("%s/sessions/%s/messages/%d", base, esc(s.ID), seq)
	}
	// The request of a tools/call by tool name and (optionally) its args.
	callOf := func(s *capture.Session, tool, args string) uint64 {
		return r.seqWhere(t, s.ID, func(m *capture.Message) bool {
			return m.Kind == protocol.KindRequest && m.Method == protocol.MethodToolsCall && m.Name == tool && bytes.Contains(m.Raw, []byte(args))
		})
	}
	// The response to request seq.
	answerOf := func(s *capture.Session, seq uint64) uint64 {
		return r.seqWhere(t, s.ID, func(m *capture.Message) bool { return m.Kind.IsResponse() && m.Links.Request == seq })
	}
	// The server→client request of method that call set off, the first
	// whose raw holds text.
	setOff := func(s *capture.Session, call uint64, method, text string) uint64 {
		return r.seqWhere(t, s.ID, func(m *capture.Message) bool {
			return m.Kind == protocol.KindRequest && m.Method == method && m.Links.Parent == call && bytes.Contains(m.Raw, []byte(text))
		})
	}
	view := `document.querySelector('section.message-view')`
	openMessage := func(url string) {
		t.Helper()
		b.open(url)
		b.waitFor("the message view", view+` !== null && document.querySelector('details.raw-json') !== null`, 10*time.Second)
	}

	t.Run("SamplingRequestWithMediaAndTools", func(t *testing.T) {
		b.t = t
		call := callOf(legacy, fixtures.ToolSampleMedia, "")
		req := setOff(legacy, call, protocol.MethodSampling, "image/png")
		openMessage(msgURL(legacy, req))
		v := view
		// The conversation by role, the roles in a column of their own.
		if roles := eval[[]string](b, `[...`+v+`.querySelectorAll('ol.messages > li .role')].map(e => e.textContent)`); strings.Join(roles, " ") != "user assistant user" {
			t.Errorf("roles %q", roles)
		}
		if n := eval[int](b, `[...`+v+`.querySelectorAll('ol.messages .role')].filter(e => e.getBoundingClientRect().height > 24).length`); n != 0 {
			t.Errorf("%d role labels break across lines", n)
		}
		if !eval[bool](b, v+`.querySelector('ol.messages img.media[src^="data:image/png;base64,"]') !== null && `+v+`.querySelector('ol.messages audio.media[src^="data:audio/wav;base64,"]') !== null`) {
			t.Error("the image and audio blocks are not previewed")
		}
		text := eval[string](b, v+`.textContent`)
		// A long message is shown whole, not cut at a table cell's width.
		if !strings.Contains(text, longQuestion) {
			t.Errorf("the %d-character message is not shown whole", len(longQuestion))
		}
		for _, want := range []string{"You describe media.", "Cost priority", "Speed priority", "Intelligence priority", "claude-3-5-sonnet",
			"Max tokens", "400", "Temperature", "0.2", "END", "thisServer", "showcase", "Tools offered (1)", "get_weather", "Returns the current weather in a city.", "auto",
			"Tool calls requested (1)", `get_weather({"city":"Paris"})`, "showcase-model", "toolUse"} {
			if !strings.Contains(text, want) {
				t.Errorf("the sampling view lacks %q", want)
			}
		}
		// The tool's parameters, from its schema.
		if p := eval[[]string](b, `[...`+v+`.querySelectorAll('ul.tools-offered table.schema tbody tr')].map(tr => tr.dataset.param)`); strings.Join(p, ",") != "city,unit" {
			t.Errorf("the offered tool's parameters: %q", p)
		}
		b.shots("sampling-request")
		b.checkClean()
	})

	t.Run("ToolLoopAnswer", func(t *testing.T) {
		b.t = t
		call := callOf(legacy, fixtures.ToolSampleTools, "")
		first := setOff(legacy, call, protocol.MethodSampling, `"tools"`)
		openMessage(msgURL(legacy, answerOf(legacy, first)))
		v := view
		if got := eval[string](b, v+`.querySelector('ul.tool-calls')?.textContent || ''`); got != `get_weather({"city":"Paris"})` {
			t.Errorf("tool calls requested: %q", got)
		}
		// Each tool_use is one block: no box inside it.
		if n := eval[int](b, v+`.querySelectorAll('.block-tool_use').length`); n != 1 {
			t.Errorf("%d tool_use blocks", n)
		}
		if n := eval[int](b, v+`.querySelectorAll('.block-tool_use .block, .block-tool_use dl, .block-tool_use table').length`); n != 0 {
			t.Errorf("a tool_use block holds %d boxes", n)
		}
		b.shots("tool-loop-answer")
		// The continuation: the tool_result is one block whose content is
		// drawn inline, not box in box.
		second := r.seqWhere(t, legacy.ID, func(m *capture.Message) bool { return m.Links.Previous == first && m.Method == protocol.MethodSampling })
		openMessage(msgURL(legacy, second))
		if n := eval[int](b, v+`.querySelectorAll('.block-tool_result').length`); n != 1 {
			t.Errorf("%d tool_result blocks", n)
		}
		depth := eval[int](b, `(() => { let d = 0; for (let e = `+v+`.querySelector('.block-tool_result .block-text'); e; e = e.parentElement) if (e.classList.contains('block') && !e.classList.contains('inner')) d++; return d })()`)
		if depth != 1 {
			t.Errorf("the tool result's text sits in %d boxes, want 1", depth)
		}
		if txt := eval[string](b, v+`.querySelector('.block-tool_result').textContent`); !strings.Contains(txt, "toolu_showcase_1") || !strings.Contains(txt, "Paris: sunny") {
			t.Errorf("the tool result block: %q", txt)
		}
		b.shots("tool-loop-continuation")
		b.checkClean()
	})

	t.Run("FormElicitation", func(t *testing.T) {
		b.t = t
		call := callOf(legacy, fixtures.ToolElicitChoices, "")
		req := setOff(legacy, call, protocol.MethodElicitation, "toppings")
		openMessage(msgURL(legacy, req))
		v := view
		labels := eval[[]string](b, `[...`+v+`.querySelectorAll('form.elicitation-form .field-label')].map(e => e.textContent)`)
		if strings.Join(labels, "|") != "E-mail * email|Favourite colour color|Size * size|Toppings toppings|Quantity quantity|Delivery date when|A gift gift" {
			t.Errorf("the form's labels: %q", labels)
		}
		if opts := eval[[]string](b, `[...`+v+`.querySelectorAll('[data-field=size] option')].map(o => o.textContent)`); strings.Join(opts, "|") != `—|Small (s)|Medium (m)|Large (l)` {
			t.Errorf("titled choices: %q", opts)
		}
		// The answer against the form: the values the client sent.
		got := eval[string](b, `[
			`+v+`.querySelector('[data-field=email] input').value,
			`+v+`.querySelector('[data-field=size] select').selectedOptions[0].textContent,
			[...`+v+`.querySelectorAll('[data-field=toppings] input:checked')].length,
			`+v+`.querySelector('[data-field=quantity] input').value,
			`+v+`.querySelector('[data-field=when] input').type,
			`+v+`.querySelector('[data-field=gift] input').checked,
			`+v+`.querySelector('.elicitation-answer .chip').textContent].join('|')`)
		if got != `ada@example.com|Medium (m)|2|2|date|true|accept` {
			t.Errorf("the answer in the form: %q", got)
		}
		if !eval[bool](b, `[...`+v+`.querySelectorAll('form.elicitation-form input, form.elicitation-form select')].every(e => e.readOnly || e.disabled)`) {
			t.Error("the form is not read-only")
		}
		b.shots("elicitation-form")
		// A careless client's answer that breaks the schema: a finding,
		// recorded with the answer.
		creq := r.seqWhere(t, careless.ID, func(m *capture.Message) bool {
			return m.Method == protocol.MethodElicitation && m.Kind == protocol.KindRequest
		})
		openMessage(msgURL(careless, answerOf(careless, creq)))
		if f := eval[string](b, `document.querySelector('ul.findings')?.textContent || ''`); !strings.Contains(f, "elicitation answer does not validate against the form's requestedSchema") {
			t.Errorf("the careless answer's findings: %q", f)
		}
		if n := eval[int](b, v+`.querySelectorAll('form.elicitation-form .bad').length`); n == 0 {
			t.Error("the form does not mark the answer's values that do not fit")
		}
		b.shots("elicitation-answer-invalid")
		b.checkClean()
	})

	t.Run("URLElicitation", func(t *testing.T) {
		b.t = t
		call := callOf(legacy, fixtures.ToolElicitURL, "")
		req := setOff(legacy, call, protocol.MethodElicitation, `"url"`)
		openMessage(msgURL(legacy, req))
		v := view
		if got := eval[string](b, v+`.querySelector('.elicitation .url code').textContent`); got != fixtures.DefaultElicitURL {
			t.Errorf("the URL: %q", got)
		}
		if n := eval[int](b, v+`.querySelectorAll('a[href*="example.invalid"]').length`); n != 0 {
			t.Error("the URL is a link")
		}
		if !strings.Contains(eval[string](b, v+`.textContent`), "fixture-elicitation-1") {
			t.Error("no elicitation id")
		}
		b.shots("elicitation-url")
		b.click(`section.message-view a.complete-link`)
		b.waitFor("the completion", `document.querySelector('h1 .method')?.textContent === 'notifications/elicitation/complete'`, 10*time.Second)
		b.checkClean()
	})

	t.Run("ToolResultShapes", func(t *testing.T) {
		b.t = t
		v := view
		for _, tc := range []struct{ shape, check string }{
			{"table", v + `.querySelectorAll('.tool-result table.grid tbody tr').length === 3 && ` + v + `.querySelector('.block-head .chip.shape')?.textContent === 'JSON: 3 rows'`},
			{"object", v + `.querySelector('.tool-result dl.kv')?.textContent.includes('eu-west')`},
			{"markdown", v + `.querySelector('.tool-result .md h4')?.textContent === 'Report' && ` + v + `.querySelectorAll('.tool-result .md li').length === 3`},
			{"media", v + `.querySelector('.tool-result img.media') !== null && ` + v + `.querySelector('.tool-result audio.media') !== null`},
			{"links", v + `.querySelectorAll('.tool-result .block-resource_link').length === 2 && ` + v + `.querySelector('.block-resource_link .description')?.textContent === 'A static greeting; subscribable.' && ` + v + `.querySelector('.block-resource_link .annotations')?.textContent.includes('priority 0.8')`},
			{"annotated", v + `.querySelectorAll('.tool-result .annotations').length === 2 && ` + v + `.textContent.includes('for assistant')`},
			{"error", v + `.querySelector('.tool-result.is-error .error-label')?.textContent === 'The tool failed'`},
		} {
			openMessage(msgURL(legacy, answerOf(legacy, callOf(legacy, fixtures.ToolShapes, `"`+tc.shape+`"`))))
			b.waitFor("the "+tc.shape+" result", tc.check, 5*time.Second)
			b.shots("result-" + tc.shape)
		}
		// structuredContent beside content, and the outputSchema.
		forecast := callOf(legacy, fixtures.ToolForecast, "")
		openMessage(msgURL(legacy, answerOf(legacy, forecast)))
		b.waitFor("structured beside content", v+`.querySelector('.result-two .structured-content table.grid')?.querySelectorAll('tbody tr').length === 3 && `+v+`.querySelector('.result-two .block-text')?.textContent.includes('Paris: 3 days')`, 5*time.Second)
		b.shots("result-structured")
		// The call: its arguments against the tool's inputSchema.
		openMessage(msgURL(legacy, forecast))
		if got := eval[[]string](b, `[...`+v+`.querySelectorAll('table.arguments tbody tr')].map(tr => [...tr.cells].map(c => c.textContent).join('|'))`); len(got) != 2 ||
			!strings.HasPrefix(got[0], `city|"Paris"|string required|the city`) || !strings.HasPrefix(got[1], "days|3|integer") || !strings.Contains(got[1], "how many days") {
			t.Errorf("the arguments: %q", got)
		}
		b.shots("tool-arguments")
		// A JSON-RPC error is an error, not another key/value view.
		openMessage(msgURL(legacy, answerOf(legacy, callOf(legacy, fixtures.ToolError, ""))))
		if got := eval[string](b, v+`.querySelector('.rpc-error')?.textContent || ''`); !strings.Contains(got, "-32000") || !strings.Contains(got, "fixture: deliberate JSON-RPC error") {
			t.Errorf("the JSON-RPC error: %q", got)
		}
		b.shots("rpc-error")
		b.checkClean()
	})

	t.Run("Navigation", func(t *testing.T) {
		b.t = t
		call := callOf(legacy, fixtures.ToolSampleTools, "")
		openMessage(msgURL(legacy, call))
		// A request links to its response, to what it set off, to its
		// exchange; the stream's other events are listed.
		resp := answerOf(legacy, call)
		if !eval[bool](b, fmt.Sprintf(`document.querySelector('.crumbs a[href$="/messages/%d"]') !== null`, resp)) {
			t.Error("no link to the response")
		}
		if n := eval[int](b, `document.querySelectorAll('table.related.children tbody tr').length`); n < 2 {
			t.Errorf("%d messages set off listed, want the two sampling requests at least", n)
		}
		if n := eval[int](b, `document.querySelectorAll('table.related.stream tbody tr').length`); n < 3 {
			t.Errorf("%d other messages of the stream listed", n)
		}
		b.shots("navigation")
		b.click(`.crumbs a.exchange-link`)
		b.waitFor("the exchange page", `/\/exchanges\/\d+$/.test(location.pathname) && document.querySelectorAll('table.exchange-messages tbody tr').length >= 4`, 10*time.Second)
		b.shots("exchange")
		// A response links to its request.
		openMessage(msgURL(legacy, resp))
		b.click(fmt.Sprintf(`.crumbs a[href$="/messages/%d"]`, call))
		b.waitFor("the request", fmt.Sprintf(`location.pathname.endsWith('/messages/%d')`, call), 10*time.Second)
		b.checkClean()
	})

	t.Run("MRTRInnerRequest", func(t *testing.T) {
		b.t = t
		// The tree: the call's rounds; the input request inside opens
		// with Enter, as a message of its own.
		b.open(base + "/sessions/" + esc(modern.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		call := `[...document.querySelectorAll('[role=tree] > li[data-method="tools/call"]')].find(li => li.querySelector('.name')?.textContent === 'sample_media')`
		if got := eval[string](b, `(`+call+`).querySelector('.kids-label').textContent`); got != "2 rounds · 1 sampling" {
			t.Errorf("the MRTR call's label: %q", got)
		}
		eval[bool](b, `(`+call+`)._open(true), true`)
		b.waitFor("the rounds", `(`+call+`).querySelectorAll('li[role=treeitem]').length >= 2`, 5*time.Second)
		eval[bool](b, `(`+call+`).querySelector('li[role=treeitem]')._open(true), true`)
		input := `(` + call + `).querySelector('li.kind-input-request')`
		b.waitFor("the input request", input+` !== null`, 5*time.Second)
		eval[bool](b, input+`._open(true), true`)
		b.waitFor("its preview", input+`.querySelector('.preview .sampling ol.messages') !== null && `+input+`.querySelector('.preview').textContent.includes('toolUse')`, 10*time.Second)
		b.shots("tree-mrtr")
		b.run("focus the input request", chromedp.Focus(chromedp.JSPath(input)))
		b.run("enter", chromedp.KeyEvent(kb.Enter))
		b.waitFor("the input request's page", `/\/inputs\/describe$/.test(location.pathname) && `+view+` !== null`, 10*time.Second)
		v := view
		if !eval[bool](b, v+`.querySelector('ol.messages img.media') !== null && `+v+`.querySelector('section.answer ul.tool-calls') !== null`) {
			t.Error("the input request's page lacks the sampling request or its answer")
		}
		if !eval[bool](b, `document.querySelector('a.answer-link') !== null`) {
			t.Error("no link to the retry that answered it")
		}
		b.shots("input-request")
		b.checkClean()
	})

	t.Run("ExchangeFindings", func(t *testing.T) {
		b.t = t
		b.open(base + "/sessions/" + esc(raw.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		// One count everywhere: the session's, the tree's, the chips'.
		facts := eval[string](b, `[...document.querySelectorAll('.facts dt')].find(dt => dt.textContent === 'Findings').nextElementSibling.textContent`)
		chips := eval[int](b, `document.querySelectorAll('[role=tree] .chip.finding').length`)
		said := eval[string](b, `document.querySelector('section.panel p.muted.small').textContent`)
		if facts != "2" || chips != 2 || !strings.Contains(said, "2 findings recorded") {
			t.Errorf("session says %s findings, the tree %q, its chips %d", facts, said, chips)
		}
		b.shots("exchange-findings-tree")
		seq := r.seqWhere(t, raw.ID, func(m *capture.Message) bool {
			return m.Method == protocol.MethodToolsCall && m.Kind == protocol.KindRequest
		})
		openMessage(msgURL(raw, seq))
		if f := eval[string](b, `[...document.querySelectorAll('li.exchange-finding')].map(li => li.textContent).join('\n')`); !strings.Contains(f, `Mcp-Name is "add" but the body names "echo" (of the HTTP exchange)`) || !strings.Contains(f, `Mcp-Method is "tools/list" but the body's method is "tools/call" (of the HTTP exchange)`) {
			t.Errorf("the exchange's finding on the message: %q", f)
		}
		b.shots("exchange-findings-message")
		b.checkClean()
	})

	t.Run("EditableForm", func(t *testing.T) {
		b.t = t
		// The form renderer is a module other pages reuse; built editable,
		// it takes input and gives back the content a client would send.
		b.open(base + "/sessions")
		b.waitFor("the app", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
		got := evalAsync[string](b, `import('/static/js/render/elicitation.js').then((m) => {
			const schema = {type: 'object', required: ['name'], properties: {
				name: {type: 'string', title: 'Name'}, age: {type: 'integer', minimum: 0},
				size: {type: 'string', oneOf: [{const: 's', title: 'Small'}, {const: 'l', title: 'Large'}]},
				tags: {type: 'array', items: {type: 'string', enum: ['a', 'b', 'c']}}, ok: {type: 'boolean', default: true}}};
			const f = m.elicitationForm(schema, {editable: true});
			document.querySelector('main').append(f.el);
			const q = (k) => f.el.querySelector('[data-field=' + k + ']');
			q('name').querySelector('input').value = 'Ada';
			q('age').querySelector('input').value = '36';
			q('size').querySelector('select').value = '1';
			q('tags').querySelectorAll('input')[2].checked = true;
			return JSON.stringify(f.values());
		})`)
		if got != `{"name":"Ada","age":36,"size":"l","tags":["c"],"ok":true}` {
			t.Errorf("the editable form gave %s", got)
		}
		b.checkClean()
	})

	t.Run("TreeLabelsFilterAndKeys", func(t *testing.T) {
		b.t = t
		b.open(base + "/sessions/" + esc(legacy.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		label := func(name string) string {
			return eval[string](b, `([...document.querySelectorAll('[role=tree] > li[data-method="tools/call"]')].find(li => li.querySelector('.name')?.textContent === `+jsString(name)+`)?.querySelector('.kids-label')?.textContent) || ''`)
		}
		for name, want := range map[string]string{
			fixtures.ToolSampleTools: "2 sampling", fixtures.ToolElicitURL: "1 elicitation", fixtures.ToolRoots: "1 roots", fixtures.ToolSlow: "3 progress · 1 log",
		} {
			if got := label(name); got != want {
				t.Errorf("%s: label %q, want %q", name, got, want)
			}
		}
		b.shots("tree-labels")
		// A sampling node previews its messages and answer when opened.
		eval[bool](b, `[...document.querySelectorAll('[role=tree] > li[data-method="tools/call"]')].find(li => li.querySelector('.name')?.textContent === 'sample_tools')._open(true), true`)
		b.waitFor("the sampling children", `document.querySelector('li[data-method="sampling/createMessage"]') !== null`, 5*time.Second)
		eval[bool](b, `document.querySelector('li[data-method="sampling/createMessage"]')._open(true), true`)
		b.waitFor("the preview", `document.querySelector('.preview[data-preview="sampling/createMessage"] ul.tool-calls') !== null`, 10*time.Second)
		b.shots("tree-preview")
		// The filter.
		b.run("filter", chromedp.SendKeys(chromedp.CSS("input.tree-filter"), "elicit"))
		// It searches the messages' content too: initialize and tools/list
		// hold the word, and have no name.
		b.waitFor("the filtered tree", `document.querySelector('.filter-count').textContent.includes('hold “elicit”')`, 5*time.Second)
		shown := eval[[]string](b, `[...document.querySelectorAll('[role=tree] > li[role=treeitem]:not(.filtered-out) .name')].map(e => e.textContent)`)
		if strings.Join(shown, ",") != "elicit_choices,elicit_form,elicit_url" {
			t.Errorf("the filter shows %q", shown)
		}
		b.shots("tree-filter")
		eval[bool](b, `(() => { const f = document.querySelector('input.tree-filter'); f.value = ''; f.dispatchEvent(new Event('input')); f.blur(); return true })()`)
		b.waitFor("the whole tree", `document.querySelectorAll('[role=tree] > li.filtered-out').length === 0`, 5*time.Second)
		// e: the next error (the shapes call with isError, then the error tool).
		b.run("e", chromedp.KeyEvent("e"))
		first := eval[string](b, `document.activeElement.querySelector('.row .name')?.textContent + ' ' + document.activeElement.querySelector('.row .chip').textContent`)
		b.run("e", chromedp.KeyEvent("e"))
		second := eval[string](b, `document.activeElement.querySelector('.row .name')?.textContent + ' ' + document.activeElement.querySelector('.row .chip').textContent`)
		if first != "shapes isError" || second != "error error" {
			t.Errorf("e went to %q, then %q", first, second)
		}
		b.checkClean()
	})

	t.Run("ElicitationPreviewInTree", func(t *testing.T) {
		b.t = t
		b.open(base + "/sessions/" + esc(legacy.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		// Open the call, then the elicitation it set off, as a user does:
		// by their toggles.
		call := `[...document.querySelectorAll('[role=tree] > li[data-method="tools/call"]')].find(li => li.querySelector('.name')?.textContent === 'elicit_choices')`
		b.run("open the call", chromedp.Click(chromedp.JSPath(call+`.querySelector(':scope > .row .toggle')`), chromedp.NodeVisible))
		node := `(` + call + `).querySelector('li[data-method="elicitation/create"]')`
		b.waitFor("the elicitation node", node+` !== null`, 5*time.Second)
		b.run("open the elicitation", chromedp.Click(chromedp.JSPath(node+`.querySelector(':scope > .row .toggle')`), chromedp.NodeVisible))
		p := node + `.querySelector('.preview[data-preview="elicitation/create"]')`
		b.waitFor("the elicitation preview", p+`?.querySelector('form.elicitation-form') != null`, 10*time.Second)
		if msg := eval[string](b, p+`.querySelector('.elicitation-message').textContent`); !strings.Contains(msg, "preferences, please.") {
			t.Errorf("the preview's message: %q", msg)
		}
		labels := eval[[]string](b, `[...`+p+`.querySelectorAll('form.elicitation-form .field-label')].map(e => e.textContent)`)
		if strings.Join(labels, "|") != "E-mail * email|Favourite colour color|Size * size|Toppings toppings|Quantity quantity|Delivery date when|A gift gift" {
			t.Errorf("the preview's form fields: %q", labels)
		}
		// The answer, against the form.
		got := eval[string](b, `[
			`+p+`.querySelector('.elicitation-answer .chip').textContent,
			`+p+`.querySelector('[data-field=email] input').value,
			`+p+`.querySelector('[data-field=size] select').selectedOptions[0].textContent,
			[...`+p+`.querySelectorAll('[data-field=toppings] input:checked')].length,
			`+p+`.querySelector('[data-field=gift] input').checked].join('|')`)
		if got != "accept|ada@example.com|Medium (m)|2|true" {
			t.Errorf("the preview's answer: %q", got)
		}
		b.shots("tree-elicitation-preview")
		b.checkClean()
	})

	t.Run("NestedFormAsJSON", func(t *testing.T) {
		b.t = t
		req := r.seqWhere(t, checks, func(m *capture.Message) bool {
			return m.Kind == protocol.KindRequest && m.Method == protocol.MethodElicitation
		})
		openMessage(msgURL(&capture.Session{ID: checks}, req))
		v := view
		if n := eval[int](b, v+`.querySelectorAll('form.elicitation-form').length`); n != 0 {
			t.Errorf("a form outside the flat-primitive rule is drawn as %d form(s), want JSON", n)
		}
		if got := eval[string](b, v+`.querySelector('.elicitation .schema-problem')?.textContent || ''`); !strings.Contains(got, "address is an object") {
			t.Errorf("the schema's problem: %q", got)
		}
		if got := eval[string](b, v+`.querySelector('.elicitation .jtree')?.textContent || ''`); !strings.Contains(got, `"properties"`) || !strings.Contains(got, `"required"`) {
			t.Errorf("the schema as JSON: %q", got)
		}
		if got := eval[string](b, `document.querySelector('ul.findings')?.textContent || ''`); !strings.Contains(got, `elicitation form outside the flat-primitive rule: property "address" is an object`) {
			t.Errorf("the recorder's finding: %q", got)
		}
		// The answer is still there to read: its action and its content.
		if got := eval[string](b, v+`.querySelector('.elicitation-answer')?.textContent || ''`); !strings.Contains(got, "accept") {
			t.Errorf("the answer: %q", got)
		}
		if got := eval[string](b, v+`.querySelector('.elicitation .answer-content')?.textContent || ''`); !strings.Contains(got, `"name": "Ada"`) || !strings.Contains(got, `"address": {…} 2 keys`) {
			t.Errorf("the answer's content: %q", got)
		}
		b.shots("elicitation-nested-form")
		b.checkClean()
	})

	t.Run("MetaFolded", func(t *testing.T) {
		b.t = t
		seq := r.seqWhere(t, raw.ID, func(m *capture.Message) bool {
			return m.Method == protocol.MethodToolsCall && m.Kind == protocol.KindRequest
		})
		openMessage(msgURL(raw, seq))
		body := view + `.querySelector('.structured')`
		fold := body + `.querySelector('details.meta-fold')`
		if got := eval[string](b, fold+`?.querySelector('summary').textContent || ''`); got != "_meta (3 keys)" {
			t.Errorf("the fold's summary: %q", got)
		}
		// Closed: the body says nothing of what _meta holds.
		if eval[bool](b, fold+`.open`) || eval[bool](b, fold+`.getBoundingClientRect().height > 40`) {
			t.Error("the _meta fold is open by default")
		}
		if txt := eval[string](b, body+`.innerText`); strings.Contains(txt, "clientInfo") || strings.Contains(txt, "raw-client") {
			t.Errorf("_meta shows in the body while folded: %q", txt)
		}
		// Below the body: after the arguments.
		if !eval[bool](b, fold+`.getBoundingClientRect().top >= `+body+`.querySelector('table.arguments').getBoundingClientRect().bottom`) {
			t.Error("the _meta fold is not below the arguments")
		}
		b.shots("meta-folded")
		b.click(`section.message-view .structured details.meta-fold > summary`)
		b.waitFor("the open fold", fold+`.open && `+fold+`.querySelector('.jtree') !== null`, 5*time.Second)
		keys := eval[[]string](b, `[...`+fold+`.querySelectorAll('.jtree .j-key')].map(e => e.textContent).filter(k => k.startsWith('"io.'))`)
		if strings.Join(keys, ",") != `"io.modelcontextprotocol/protocolVersion","io.modelcontextprotocol/clientInfo","io.modelcontextprotocol/clientCapabilities"` {
			t.Errorf("the open fold's keys: %q", keys)
		}
		if txt := eval[string](b, fold+`.innerText`); !strings.Contains(txt, "2026-07-28") {
			t.Errorf("the open fold: %q", txt)
		}
		b.shots("meta-open")
		b.checkClean()
	})

	t.Run("FindingAndErrorKeys", func(t *testing.T) {
		b.t = t
		// at is the root the tree's focus is on: its method and tool name.
		at := func() string {
			return eval[string](b, `(() => { const li = document.activeElement?.closest?.('[role=tree] > li[role=treeitem]'); return li ? (li.dataset.method || li.querySelector('.row .method').textContent) + ' ' + (li.querySelector(':scope > .row .name')?.textContent || '') : 'nothing' })()`)
		}
		openTree := func() {
			b.open(base + "/sessions/" + esc(checks))
			b.waitFor("the tree", treeReady, 10*time.Second)
		}
		keys := func(k string) []string {
			var out []string
			for _, c := range k {
				b.run(string(c), chromedp.KeyEvent(string(c)))
				out = append(out, at())
			}
			return out
		}
		openTree()
		// f: the call whose elicitation has a finding (opened, since the
		// finding is inside), then the response to no request ("other"), then
		// round again; F back.
		got := keys("fffFF")
		want := []string{"tools/call ship", "other ", "tools/call ship", "other ", "tools/call ship"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("f f f F F went to %q, want %q", got, want)
		}
		if !eval[bool](b, `document.activeElement.getAttribute('aria-expanded') === 'true' && document.activeElement.querySelector('li[data-method="elicitation/create"] .chip.finding') !== null`) {
			t.Error("f did not open the call to show the finding inside it")
		}
		b.shots("tree-next-finding")
		// E goes back round to the last error; e forward again.
		got = keys("EEEe")
		want = []string{"tools/call cancel", "tools/call track", "tools/call weigh", "tools/call track"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("E E E e went to %q, want %q", got, want)
		}
		// From a fresh page, E and F start at the end.
		openTree()
		if got := keys("E"); got[0] != "tools/call cancel" {
			t.Errorf("E on a fresh page went to %q, want the last error", got[0])
		}
		openTree()
		if got := keys("F"); got[0] != "other " {
			t.Errorf("F on a fresh page went to %q, want the last finding", got[0])
		}
		// The buttons step on from where the last one went.
		openTree()
		var steps []string
		for _, btn := range []string{"next-error", "next-error", "next-error", "next-error", "next-finding", "next-finding"} {
			b.click(`.tree-tools button.` + btn)
			steps = append(steps, at())
		}
		want = []string{"tools/call weigh", "tools/call track", "tools/call cancel", "tools/call weigh", "other ", "tools/call ship"}
		if strings.Join(steps, "|") != strings.Join(want, "|") {
			t.Errorf("the buttons went to %q, want %q", steps, want)
		}
		b.shots("tree-next-buttons")
		b.checkClean()
	})

	t.Run("ProfileStopReasonAndRoots", func(t *testing.T) {
		b.t = t
		b.open(base + "/profiles/qa?new=1")
		b.waitFor("the new profile's form", `document.querySelector('.profile-form input[name=stopReason]') !== null`, 10*time.Second)
		b.run("stop reason", chromedp.SendKeys(chromedp.CSS(`input[name=stopReason]`), "maxTokens"))
		// Two roots, the second moved first.
		b.click(`button.add-root`)
		b.click(`button.add-root`)
		b.run("uri 1", chromedp.SendKeys(chromedp.CSS(`ol.root > li:nth-child(1) input[aria-label=URI]`), "file:///work/app"))
		b.run("name 1", chromedp.SendKeys(chromedp.CSS(`ol.root > li:nth-child(1) input[aria-label=name]`), "app"))
		b.run("uri 2", chromedp.SendKeys(chromedp.CSS(`ol.root > li:nth-child(2) input[aria-label=URI]`), "file:///work/docs"))
		b.click(`ol.root > li:nth-child(2) button.up`)
		b.shots("profile-stop-reason-roots")
		b.click(`button.save-profile`)
		b.waitFor("saved", `document.querySelector('.check.ok')?.textContent === 'Saved'`, 5*time.Second)
		p, err := replay.LoadProfile(filepath.Join(opts.Profiles, "qa.json"))
		if err != nil {
			t.Fatalf("the saved profile: %v", err)
		}
		if p.Sampling == nil || p.Sampling.StopReason != "maxTokens" {
			t.Errorf("the saved stop reason: %+v", p.Sampling)
		}
		if fmt.Sprint(p.Roots) != "[{file:///work/docs } {file:///work/app app}]" {
			t.Errorf("the saved roots: %+v", p.Roots)
		}
		// Opened again, the form shows what was saved, and so does the JSON.
		b.open(base + "/profiles/qa")
		b.waitFor("the saved profile's form", `document.querySelector('.profile-form input[name=stopReason]') !== null`, 10*time.Second)
		shown := eval[string](b, `[document.querySelector('input[name=stopReason]').value,
			...[...document.querySelectorAll('ol.root > li')].map(li => li.querySelector('input[aria-label=URI]').value + ' ' + li.querySelector('input[aria-label=name]').value)].join('|')`)
		if shown != "maxTokens|file:///work/docs |file:///work/app app" {
			t.Errorf("the form shows %q", shown)
		}
		b.click(`.tabs button:nth-child(2)`)
		b.waitFor("the JSON", `!document.querySelector('textarea.profile-json').hidden`, 5*time.Second)
		var doc struct {
			Sampling struct{ StopReason string }
			Roots    []map[string]string
		}
		if err := json.Unmarshal([]byte(eval[string](b, `document.querySelector('textarea.profile-json').value`)), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Sampling.StopReason != "maxTokens" || len(doc.Roots) != 2 || doc.Roots[0]["uri"] != "file:///work/docs" || doc.Roots[1]["name"] != "app" {
			t.Errorf("the JSON tab: %+v", doc)
		}
		b.checkClean()
	})
}

// TestBrowserLiveEmpty: a Live page with nothing recorded says where to
// point a client: at the recording proxy when the dashboard serves one,
// else how to start recording.
func TestBrowserLiveEmpty(t *testing.T) {
	b := newBrowser(t)
	for _, proxy := range []string{"http://127.0.0.1:7411", ""} {
		store := memstore.New()
		t.Cleanup(func() { store.Close() })
		d, base := newDash(t, store, nil)
		if proxy != "" {
			d.SetProxyURL(proxy)
		}
		b.open(base + "/live")
		b.waitFor("the empty state", `document.querySelector('.live-empty')?.hidden === false`, 10*time.Second)
		text := eval[string](b, `document.querySelector('.live-empty').textContent`)
		if proxy != "" && !strings.Contains(text, "Point an MCP client at the recording proxy: "+proxy+"/…") {
			t.Errorf("with a proxy: %q", text)
		}
		if proxy == "" && !strings.Contains(text, "mcptape record --upstream SERVER_URL") {
			t.Errorf("without a proxy: %q", text)
		}
		if proxy != "" {
			b.shots("live-empty")
		}
		b.checkClean()
	}
}
