package dashboard_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
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
)

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const treeReady = `document.querySelector('[role=tree][data-ready]') !== null`

// TestBrowser drives the dashboard in headless Chromium over real sessions
// recorded through the proxy, on both eras.
func TestBrowser(t *testing.T) {
	var started, stopped []string
	opts := tapeOptions(&started)
	opts.Backend.(*testBackend).stop = func(_ context.Context, url string) error {
		stopped = append(stopped, url)
		return nil
	}
	opts.Profiles = t.TempDir()
	r := newRig(t, opts)
	r.runClient(t, fixtures.PathStateful)
	legacy := r.sessionOn(t, fixtures.PathStateful)
	r.runClient(t, fixtures.PathStateless)
	modern := r.sessionOn(t, fixtures.PathStateless)
	b := newBrowser(t)
	base := r.srv.URL

	t.Run("SessionsListLoads", func(t *testing.T) {
		b.t = t
		b.open(base + "/sessions")
		b.waitFor("the sessions table", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
		ids := eval[[]string](b, `[...document.querySelectorAll('table.sessions tbody tr')].map(tr => tr.dataset.session)`)
		if len(ids) != 2 || ids[0] != modern.ID || ids[1] != legacy.ID {
			t.Errorf("listed %q, want [%s %s]", ids, modern.ID, legacy.ID)
		}
		b.screenshot("sessions")
		// Filters are in the query string: a filtered list is a deep link.
		b.open(base + "/sessions?era=legacy&tool=sample_tools")
		b.waitFor("the filtered table", `document.querySelectorAll('table.sessions[data-ready] tbody tr').length === 1`, 10*time.Second)
		if v := eval[string](b, `document.querySelector('select[name=era]').value + ' ' + document.querySelector('input[name=tool]').value`); v != "legacy sample_tools" {
			t.Errorf("the form shows the filters %q", v)
		}
		eval[bool](b, `(() => { const f = document.querySelector('form.filters'); f.elements.tool.value = ''; f.elements.era.value = ''; f.elements.q.value = 'no-such-text'; return true })()`)
		b.click("form.filters button[type=submit]")
		b.waitFor("the empty result", `location.search === '?q=no-such-text' && document.querySelector('p.empty') !== null`, 10*time.Second)
		// A method's start finds it; requests inside 2026-07-28 rounds are
		// found by their method; a time filter keeps its seconds.
		b.open(base + "/sessions?method=sampling")
		b.waitFor("the sampling sessions", `document.querySelectorAll('table.sessions[data-ready] tbody tr').length === 2`, 10*time.Second)
		since := legacy.Start.Add(-time.Second).Truncate(time.Second)
		b.open(base + "/sessions?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339)))
		b.waitFor("the time filter", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
		b.click("form.filters button[type=submit]")
		b.waitFor("the time filter again", `location.search.startsWith('?since=')`, 10*time.Second)
		if got := eval[string](b, `new URLSearchParams(location.search).get('since')`); got != since.UTC().Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("the time filter came back as %q, want %s to the second", got, since.UTC().Format(time.RFC3339))
		}
		b.open(base + "/sessions")
		b.waitFor("the sessions table", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
		b.shots("sessions")
		b.checkClean()
	})

	t.Run("SessionOpens", func(t *testing.T) {
		b.t = t
		b.open(base + "/sessions")
		b.waitFor("the sessions table", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
		b.click(`tr[data-session=` + jsString(legacy.ID) + `] a`)
		b.waitFor("the tree", treeReady, 10*time.Second)
		if p := eval[string](b, `location.pathname`); p != "/sessions/"+legacy.ID {
			t.Errorf("at %s", p)
		}
		n := eval[int](b, `document.querySelectorAll('[role=tree] > li[role=treeitem]').length`)
		if n < 20 {
			t.Errorf("%d top-level calls, want the fixture script's", n)
		}
		b.screenshot("session")
		b.checkClean()
	})

	t.Run("SamplingNodeExpands", func(t *testing.T) {
		b.t = t
		b.open(base + "/sessions/" + esc(legacy.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		call := `[...document.querySelectorAll('[role=tree] > li[data-method="tools/call"]')].find(li => li.querySelector('.name')?.textContent === 'sample_tools')`
		if n := eval[int](b, `document.querySelectorAll('li[data-method="sampling/createMessage"]').length`); n != 0 {
			t.Errorf("%d sampling nodes shown before expanding", n)
		}
		eval[bool](b, `(`+call+`).querySelector(':scope > .row .toggle').click(), true`)
		b.waitFor("the sampling nodes", `document.querySelectorAll('li[data-method="sampling/createMessage"]').length === 2`, 5*time.Second)
		labels := eval[[]string](b, `[...document.querySelectorAll('li[data-method="sampling/createMessage"] > .row .label-note')].map(e => e.textContent)`)
		if strings.Join(labels, " ") != "(with tools) (continuation)" {
			t.Errorf("sampling labels %q, want the tool loop's", labels)
		}
		// The sampling node itself opens on its details.
		eval[bool](b, `document.querySelector('li[data-method="sampling/createMessage"] > .row .toggle').click(), true`)
		b.waitFor("the sampling details", `document.querySelector('li[data-method="sampling/createMessage"][aria-expanded=true] a.msg-link') !== null`, 5*time.Second)
		b.screenshot("sampling-expanded")

		// Keyboard: Home, down, right opens, left closes, Enter opens the message.
		b.run("focus the tree", chromedp.Focus(chromedp.CSS(`[role=tree] > li[role=treeitem]`)))
		b.run("keys", chromedp.KeyEvent(kb.Home), chromedp.KeyEvent(kb.ArrowDown))
		if m := eval[string](b, `document.activeElement.dataset.method`); m != "initialize" {
			t.Errorf("after Home, ArrowDown the focus is on %q, want initialize", m)
		}
		b.run("open", chromedp.KeyEvent(kb.ArrowRight))
		if e := eval[string](b, `document.activeElement.getAttribute('aria-expanded')`); e != "true" {
			t.Errorf("ArrowRight: aria-expanded %q", e)
		}
		b.run("close", chromedp.KeyEvent(kb.ArrowLeft))
		if e := eval[string](b, `document.activeElement.getAttribute('aria-expanded')`); e != "false" {
			t.Errorf("ArrowLeft: aria-expanded %q", e)
		}
		b.run("enter", chromedp.KeyEvent(kb.Enter))
		b.waitFor("the message page", `/\/messages\/\d+$/.test(location.pathname) && document.querySelector('details.raw-json') !== null`, 5*time.Second)
		if m := eval[string](b, `document.querySelector('h1 .method').textContent`); m != "initialize" {
			t.Errorf("Enter opened %q, want the initialize request", m)
		}
		b.checkClean()
	})

	var echoResult uint64
	for m, err := range r.store.Messages(context.Background(), legacy.ID, capture.MessageQuery{NoRaw: true}) {
		if err == nil && m.Kind == protocol.KindResult && echoResult == 0 {
			if q, err := r.store.Message(context.Background(), m.Links.Request); err == nil && q.Name == fixtures.ToolEcho {
				echoResult = m.Seq
			}
		}
	}
	msgURL := fmt.Sprintf("%s/sessions/%s/messages/%d", base, esc(legacy.ID), echoResult)

	t.Run("RawJSONOpens", func(t *testing.T) {
		b.t = t
		b.open(msgURL)
		b.waitFor("the message page", `document.querySelector('details.raw-json') !== null`, 10*time.Second)
		if txt := eval[string](b, `document.querySelector('section.panel .block-text')?.textContent || ''`); !strings.Contains(txt, "hello, tape") {
			t.Errorf("the structured view shows %q, want the text block", txt)
		}
		if n := eval[int](b, `document.querySelectorAll('details.raw-json .jtree').length`); n != 0 {
			t.Error("the raw JSON tree is built before it is opened")
		}
		b.click(`details.raw-json > summary`)
		b.waitFor("the JSON tree", `document.querySelector('details.raw-json[open] .jtree .j-key') !== null`, 5*time.Second)
		keys := eval[[]string](b, `[...document.querySelectorAll('details.raw-json .jtree > .j-node > .j-kids > .j-row > .j-key, details.raw-json .jtree > .j-node > .j-kids > .j-node > .j-row > .j-key')].map(e => e.textContent)`)
		if strings.Join(keys, ",") != `"jsonrpc","id","result"` {
			t.Errorf("top-level keys %q", keys)
		}
		// A nested node opens on click.
		b.click(`details.raw-json .j-kids .j-node .j-toggle`)
		b.waitFor("a nested level", `document.querySelectorAll('details.raw-json .j-toggle[aria-expanded=true]').length >= 2`, 5*time.Second)
		b.screenshot("raw-json")
		b.checkClean()
	})

	t.Run("EditSurvivesReload", func(t *testing.T) {
		b.t = t
		b.open(msgURL)
		b.waitFor("the message page", `document.querySelector('details.edit') !== null`, 10*time.Second)
		b.click(`details.edit > summary`)
		edited := `{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"edited in the browser"}]}}`
		// Invalid JSON first: refused in the page.
		eval[bool](b, `(() => { const a = document.querySelector('textarea.editor'); a.value = '{"broken": '; a.dispatchEvent(new Event('input')); return true })()`)
		b.waitFor("the validation", `document.querySelector('.check.bad') !== null && document.querySelector('button.save-edit').disabled`, 5*time.Second)
		eval[bool](b, `(() => { const a = document.querySelector('textarea.editor'); a.value = `+jsString(edited)+`; a.dispatchEvent(new Event('input')); return true })()`)
		b.waitFor("valid JSON", `!document.querySelector('button.save-edit').disabled`, 5*time.Second)
		b.run("note", chromedp.SendKeys(chromedp.CSS("input.note-input"), "from the browser test"))
		b.click(`button.save-edit`)
		b.waitFor("the edited badge", `document.querySelector('h1 .chip.edited') !== null`, 10*time.Second)
		// The notice outlives the page's re-render.
		b.settle()
		if st := eval[string](b, `document.getElementById('status').textContent`); st != "Saved version 1" {
			t.Errorf("the status line says %q after saving", st)
		}
		b.run("reload", chromedp.Reload())
		b.waitFor("the edited badge after a reload", `document.querySelector('h1 .chip.edited') !== null && document.querySelector('section.panel .block-text') !== null`, 10*time.Second)
		if txt := eval[string](b, `document.querySelector('section.panel .block-text').textContent`); !strings.Contains(txt, "edited in the browser") {
			t.Errorf("after reload the view shows %q", txt)
		}
		// The versions come in a request of their own: wait for them.
		b.waitFor("the recorded version and the edit listed", `document.querySelectorAll('ol.versions > li').length >= 2`, 10*time.Second)
		if n := eval[int](b, `document.querySelectorAll('ol.versions > li').length`); n != 2 {
			t.Errorf("%d versions listed, want the recorded one and the edit", n)
		}
		b.screenshot("edited")
		m, err := r.store.Message(context.Background(), echoResult)
		if err != nil || string(m.Raw) != edited || m.Edited != 1 {
			t.Errorf("in the store: %q edited %d (%v)", m.Raw, m.Edited, err)
		}
		// The tree marks it too.
		b.open(base + "/sessions/" + esc(legacy.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		if n := eval[int](b, `document.querySelectorAll('[role=tree] .chip.edited').length`); n != 1 {
			t.Errorf("%d edited chips in the tree, want 1", n)
		}
		b.checkClean()
	})

	t.Run("LabelsAndExport", func(t *testing.T) {
		b.t = t
		b.open(base + "/sessions/" + esc(legacy.ID))
		b.waitFor("the tree", treeReady, 10*time.Second)
		b.run("labels", chromedp.SetValue(chromedp.CSS("input[name=labels]"), "bug-42, repro"))
		b.click(`.actions-box button`)
		b.waitFor("the label chips", `document.querySelectorAll('.labels .chip.label').length === 2`, 5*time.Second)
		if href := eval[string](b, `[...document.querySelectorAll('.actions-box a.button')].map(a => a.getAttribute('href')).join(' ')`); !strings.Contains(href, "/tape") || !strings.Contains(href, "/har") {
			t.Errorf("export links %q", href)
		}
		b.click(`button.start-replay`)
		b.waitFor("the replay URL", `document.querySelector('.replay-url code')?.textContent === 'http://127.0.0.1:1/mcp'`, 5*time.Second)
		// It is still listed after a reload, with Stop, which stops it.
		b.run("reload", chromedp.Reload())
		b.waitFor("the running replay server", `document.querySelector('.replay-url button.stop-replay') !== null`, 10*time.Second)
		b.shots("replay-running")
		b.click(`.replay-url button.stop-replay`)
		b.waitFor("stopped", `document.querySelector('.replay-url') === null && document.getElementById('status').textContent === 'Replay server stopped'`, 5*time.Second)
		if strings.Join(stopped, ",") != "http://127.0.0.1:1/mcp" {
			t.Errorf("stopped %q", stopped)
		}
		x, err := r.store.Session(context.Background(), legacy.ID)
		if err != nil || strings.Join(x.Labels, ",") != "bug-42,repro" {
			t.Errorf("labels in the store: %q (%v)", x.Labels, err)
		}
		b.screenshot("labels")
		b.checkClean()
	})

	t.Run("LiveTail", func(t *testing.T) {
		b.t = t
		b.open(base + "/live")
		b.waitFor("the live feed", `document.querySelector('.live-state.ok') !== null`, 10*time.Second)
		// What was recorded before the page opened is there at once,
		// errors marked.
		if n := eval[int](b, `document.querySelectorAll('table.live tbody tr').length`); n < 20 {
			t.Errorf("%d messages shown on open, want the recent ones", n)
		}
		if n := eval[int](b, `document.querySelectorAll('table.live tbody tr.is-error').length`); n < 2 {
			t.Errorf("%d errors marked (the fixtures' JSON-RPC error and isError result on each era)", n)
		}
		if !eval[bool](b, `document.querySelector('.live-empty').hidden`) {
			t.Error("the empty state shows beside messages")
		}
		r.runClient(t, fixtures.PathStateless, fixtures.ToolEcho)
		b.waitFor("the new call", `[...document.querySelectorAll('table.live tbody tr')].some(tr => tr.querySelector('.method').textContent === 'tools/call' && tr.cells[5].textContent === 'echo')`, 10*time.Second)
		// The kind filter: errors only.
		eval[bool](b, `(() => { const k = document.querySelector('select.kind-filter'); k.value = 'errors'; k.dispatchEvent(new Event('change')); return true })()`)
		if got := eval[[]string](b, `[...new Set([...document.querySelectorAll('table.live tbody tr:not([hidden])')].map(tr => tr.classList.contains('is-error') ? 'error' : 'other'))]`); strings.Join(got, ",") != "error" {
			t.Errorf("with errors only, rows shown are %q", got)
		}
		b.shots("live-errors")
		eval[bool](b, `(() => { const k = document.querySelector('select.kind-filter'); k.value = ''; k.dispatchEvent(new Event('change')); return true })()`)
		b.shots("live")
		// A row links to its message.
		b.click(`table.live tbody tr:first-child td:last-child a`)
		b.waitFor("the message page", `document.querySelector('details.raw-json') !== null`, 10*time.Second)
		b.checkClean()
	})

	t.Run("ImportAndDelete", func(t *testing.T) {
		b.t = t
		r.settle(t, legacy.ID)
		code, tape, _ := newAPIClient(t, base).do(http.MethodGet, "/api/v1/sessions/"+esc(legacy.ID)+"/tape", nil, nil)
		if code != http.StatusOK {
			t.Fatalf("export: %d", code)
		}
		file := filepath.Join(t.TempDir(), "bug.tape.json")
		if err := os.WriteFile(file, tape, 0o600); err != nil {
			t.Fatal(err)
		}
		b.open(base + "/import")
		b.waitFor("the import page", `document.querySelector('input[type=file]') !== null`, 10*time.Second)
		// A HAR file is named for what it is.
		har := filepath.Join(t.TempDir(), "session.har")
		code, harBody, _ := newAPIClient(t, base).do(http.MethodGet, "/api/v1/sessions/"+esc(legacy.ID)+"/har", nil, nil)
		if code != http.StatusOK || os.WriteFile(har, harBody, 0o600) != nil {
			t.Fatalf("HAR export: %d", code)
		}
		b.allow(`status of 400 .*?/api/v1/tapes`)
		b.run("choose the HAR file", chromedp.SetUploadFiles(chromedp.CSS("input[type=file]"), []string{har}))
		b.click(`main button.primary`)
		b.waitFor("the refusal", `document.querySelector('.import-result .bad')?.textContent.includes('this is a HAR file')`, 10*time.Second)
		if txt := eval[string](b, `document.querySelector('.import-result').textContent`); strings.Contains(txt, "format field") {
			t.Errorf("the HAR refusal: %q", txt)
		}
		b.shots("import-har")
		b.run("choose the tape", chromedp.SetUploadFiles(chromedp.CSS("input[type=file]"), []string{file}))
		b.click(`main button.primary`)
		b.waitFor("the imported session", `document.querySelector('.import-result a') !== null`, 10*time.Second)
		imported := eval[string](b, `document.querySelector('.import-result a').textContent`)
		if imported != legacy.ID+"-2" {
			t.Errorf("imported %q, want %s-2", imported, legacy.ID)
		}
		b.screenshot("imported")
		// Open it and delete it, in two clicks.
		b.click(`.import-result a`)
		b.waitFor("the imported session's tree", treeReady, 10*time.Second)
		b.click(`button.danger`)
		b.click(`button.danger`)
		b.waitFor("the sessions list", `location.pathname === '/sessions' && document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
		if _, err := r.store.Session(context.Background(), imported); err == nil {
			t.Errorf("session %s is still in the store", imported)
		}
		b.checkClean()
	})

	t.Run("Latency", func(t *testing.T) {
		b.t = t
		b.open(base + "/latency")
		b.waitFor("the chart", `document.querySelectorAll('svg.chart circle').length > 0`, 10*time.Second)
		if n := eval[int](b, `[...document.querySelectorAll('table.grid tbody tr')].filter(tr => tr.cells[0].textContent.trim().startsWith('tools/call')).length`); n != 1 {
			t.Errorf("%d tools/call rows in the latency table", n)
		}
		// By default the range fits the data: the points span the chart.
		span := eval[float64](b, `(() => { const xs = [...document.querySelectorAll('svg.chart circle')].map(c => +c.getAttribute('cx')); return (Math.max(...xs) - Math.min(...xs)) / (900 - 64 - 14) })()`)
		if span < 0.5 {
			t.Errorf("the points cover %.0f%% of the chart's width, want the range to fit the data", span*100)
		}
		for _, axis := range []string{"x-tick", "y-tick"} {
			labels := eval[[]string](b, `[...document.querySelectorAll('svg.chart text.`+axis+`')].map(e => e.textContent)`)
			seen := map[string]bool{}
			for _, l := range labels {
				if seen[l] {
					t.Errorf("%s labels repeat: %q", axis, labels)
					break
				}
				seen[l] = true
			}
		}
		// The eight methods with the most samples are charted, each in a
		// colour of its own; "none" is explained where it is listed.
		colours := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('svg.chart circle.dot')].map(p => [p.dataset.method, getComputedStyle(p).fill]))`)
		if len(colours) != 8 {
			t.Errorf("%d series charted, want the 8 with the most samples of the fixtures' many methods: %v", len(colours), colours)
		}
		seen := map[string]string{}
		for m, c := range colours {
			if other, ok := seen[c]; ok {
				t.Errorf("the colour %s is used for %s and %s", c, m, other)
			}
			seen[c] = m
		}
		if l := eval[string](b, `[...document.querySelectorAll('table.grid tbody tr')].find(tr => tr.cells[0].textContent.trim().startsWith('none'))?.textContent || ''`); !strings.Contains(l, "exchanges that carried no JSON-RPC message") {
			t.Errorf("the table's none: %q", l)
		}
		b.shots("latency")
		b.checkClean()
	})

	t.Run("Profiles", func(t *testing.T) {
		b.t = t
		b.open(base + "/profiles")
		b.waitFor("the profiles page", `document.querySelector('input[name=name]') !== null`, 10*time.Second)
		// A bad name is refused in the form, without leaving the page.
		b.run("bad name", chromedp.SendKeys(chromedp.CSS("input[name=name]"), "bad name!"))
		b.click(`form.new-profile button[type=submit]`)
		b.waitFor("the name problem", `document.querySelector('#name-problem').textContent.includes('letters, digits')`, 5*time.Second)
		if p := eval[string](b, `location.pathname`); p != "/profiles" {
			t.Errorf("a bad name navigated to %s", p)
		}
		b.run("name", chromedp.SetValue(chromedp.CSS("input[name=name]"), "ci"))
		b.click(`form.new-profile button[type=submit]`)
		b.waitFor("the new profile's form", `location.pathname === '/profiles/ci' && document.querySelector('.profile-form select[name=provider]') !== null`, 10*time.Second)
		// Not saved yet: it cannot be the default.
		if !eval[bool](b, `document.querySelector('button.make-default').disabled`) {
			t.Error("Make default is offered for a profile that is not saved")
		}
		b.shots("profile-form-new")
		// A profile that breaks the format is refused, naming the field:
		// in the JSON, one click away.
		b.click(`.tabs button:nth-child(2)`)
		b.waitFor("the JSON", `!document.querySelector('textarea.profile-json').hidden && document.querySelector('textarea.profile-json').value.includes('"provider": "mock"')`, 5*time.Second)
		eval[bool](b, `(() => { document.querySelector('textarea.profile-json').value = '{"sampling": {"provider": "psychic"}}'; return true })()`)
		b.allow(`status of 400 .*?/api/v1/profiles/ci`)
		b.click(`button.save-profile`)
		b.waitFor("the refusal", `document.querySelector('.check.bad')?.textContent.includes('sampling.provider')`, 5*time.Second)
		// Back to the form: fill it in, with an ordered override and an
		// elicitation rule.
		eval[bool](b, `(() => { document.querySelector('textarea.profile-json').value = '{"name": "ci", "sampling": {"provider": "mock"}, "faults": [{"match": {"method": "tools/call"}, "delay": "5ms"}]}'; return true })()`)
		b.click(`.tabs button:nth-child(1)`)
		b.waitFor("the form again", `!document.querySelector('.profile-form').hidden`, 5*time.Second)
		b.run("template", chromedp.SetValue(chromedp.CSS(`textarea[name=template]`), "ci says: {{prompt}}"))
		b.run("model", chromedp.SetValue(chromedp.CSS(`input[name=model]`), "ci-model"))
		b.click(`button.add-override`)
		b.click(`button.add-override`)
		eval[bool](b, `(() => { const rows = document.querySelectorAll('ol.override > li'); rows[0].querySelector('input[aria-label="hint pattern"]').value = 'gpt-*'; rows[1].querySelector('input[aria-label="hint pattern"]').value = 'claude-*'; rows[1].querySelector('input[aria-label=model]').value = 'claude-mock'; return true })()`)
		// Order matters: claude-* goes first.
		b.click(`ol.override > li:nth-child(2) button.up`)
		b.click(`button.add-rule`)
		eval[bool](b, `(() => { const r = document.querySelector('ol.rule > li'); r.querySelector('input[aria-label="message pattern"]').value = '*delete*'; r.querySelector('select').value = 'decline'; return true })()`)
		b.shots("profile-form-filled")
		b.click(`button.save-profile`)
		b.waitFor("saved", `document.querySelector('.check.ok')?.textContent === 'Saved' && !document.querySelector('button.make-default').disabled`, 5*time.Second)
		got, err := os.ReadFile(filepath.Join(opts.Profiles, "ci.json"))
		if err != nil {
			t.Fatal(err)
		}
		var saved struct {
			Sampling struct {
				Template, Model string
				Overrides       []struct{ Hint, Model string }
			}
			Elicitation struct {
				Rules []struct{ Message, Action string }
			}
			Faults []json.RawMessage
		}
		if err := json.Unmarshal(got, &saved); err != nil {
			t.Fatalf("the saved profile: %v\n%s", err, got)
		}
		if saved.Sampling.Template != "ci says: {{prompt}}" || saved.Sampling.Model != "ci-model" || len(saved.Sampling.Overrides) != 2 ||
			saved.Sampling.Overrides[0].Hint != "claude-*" || saved.Sampling.Overrides[0].Model != "claude-mock" || saved.Sampling.Overrides[1].Hint != "gpt-*" ||
			len(saved.Elicitation.Rules) != 1 || saved.Elicitation.Rules[0].Action != "decline" || len(saved.Faults) != 1 {
			t.Errorf("the form saved\n%s", got)
		}
		b.click(`a[href="/profiles"]`)
		b.waitFor("the list", `document.querySelector('tr[data-profile=ci]') !== null`, 5*time.Second)
		b.click(`tr[data-profile=ci] button.make-default`)
		b.waitFor("the default", `document.querySelector('tr[data-profile=ci] .chip.ok')?.textContent === 'default'`, 5*time.Second)
		b.shots("profiles")
		if got, err := os.ReadFile(filepath.Join(opts.Profiles, "default-profile")); err != nil || strings.TrimSpace(string(got)) != "ci" {
			t.Errorf("default-profile = %q (%v)", got, err)
		}
		b.checkClean()
	})
}

// TestBrowserHostile opens recorded content built to attack the page: none
// of it runs, none of it becomes a link, and the page stays usable.
func TestBrowserHostile(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	const sid = `hostile-"><img src=x onerror=window.__pwned=1>`
	pwn := `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">`
	now := time.Now()
	var msgs []*capture.Message
	add := func(dir protocol.Direction, kind protocol.Kind, method, name string, raw []byte) uint64 {
		seq := uint64(len(msgs) + 1)
		msgs = append(msgs, &capture.Message{Seq: seq, SessionID: sid, ExchangeID: 1, Direction: dir, Time: now.Add(time.Duration(seq) * time.Millisecond),
			Kind: kind, Method: method, Name: name, ID: []byte(fmt.Sprint(seq)), Batch: -1, Raw: raw, Size: len(raw),
			Findings: []capture.Finding{{Kind: capture.FindingSchema, Message: pwn}}})
		return seq
	}
	// Raw bytes as a hostile peer sends them: no \u003c escapes.
	j := func(v any) []byte {
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		return []byte(strings.TrimSpace(buf.String()))
	}
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"))
	call := add(protocol.ClientToServer, protocol.KindRequest, "tools/call", "javascript:window.__pwned=1",
		j(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "javascript:window.__pwned=1",
			"arguments": map[string]any{"html": pwn, "link": "javascript:window.__pwned=1"}}}))
	result := add(protocol.ServerToClient, protocol.KindResult, "tools/call", "",
		j(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{
			map[string]any{"type": "text", "text": "# Title " + pwn + "\n\n- [click](javascript:window.__pwned=1)\n- `" + pwn + "`\n\n```\n" + pwn + "\n```"},
			map[string]any{"type": "resource_link", "uri": "javascript:window.__pwned=1", "name": pwn},
			map[string]any{"type": "image", "mimeType": "text/html", "data": base64.StdEncoding.EncodeToString([]byte(pwn))},
			map[string]any{"type": "image", "mimeType": "image/svg+xml", "data": base64.StdEncoding.EncodeToString([]byte(`<svg onload="window.__pwned=1"/>`))},
			map[string]any{"type": "image", "mimeType": `image/png" onerror="window.__pwned=1`, "data": png},
			map[string]any{"type": "image", "mimeType": "image/png", "data": png + `"><script>window.__pwned=1</script>`},
			map[string]any{"type": "image", "mimeType": "image/png", "data": png},
			map[string]any{"type": "audio", "mimeType": "audio/wav", "data": "not base64!"},
		}}}))
	msgs[result-1].Links.Request = call
	textarea := add(protocol.ClientToServer, protocol.KindNotification, "notifications/message", "",
		j(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"data": "</textarea><script>window.__pwned=1</script></pre></details>"}}))
	big := add(protocol.ServerToClient, protocol.KindNotification, "notifications/message", "",
		j(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"data": strings.Repeat("A", 5<<20) + pwn}}))
	deep := add(protocol.ClientToServer, protocol.KindNotification, "notifications/deep", "",
		[]byte(`{"jsonrpc":"2.0","method":"notifications/deep","params":`+strings.Repeat("[", 10000)+`"`+strings.ReplaceAll(pwn, `"`, `\"`)+`"`+strings.Repeat("]", 10000)+`}`))
	deepObj := add(protocol.ClientToServer, protocol.KindNotification, "notifications/deep", "",
		[]byte(`{"jsonrpc":"2.0","method":"notifications/deep","params":`+strings.Repeat(`{"a":`, 10000)+`1`+strings.Repeat("}", 10000)+`}`))
	frame := add(protocol.ServerToClient, protocol.KindFrame, "", "", []byte(pwn))
	// Hostile sampling and elicitation requests, drawn by their own views.
	sampling := add(protocol.ServerToClient, protocol.KindRequest, "sampling/createMessage", "",
		j(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": map[string]any{
			"systemPrompt": pwn, "maxTokens": pwn,
			"messages": []any{
				map[string]any{"role": pwn, "content": []any{map[string]any{"type": "text", "text": pwn},
					map[string]any{"type": "image", "mimeType": "image/png", "data": png},
					map[string]any{"type": "tool_use", "id": pwn, "name": "javascript:window.__pwned=1", "input": map[string]any{"x": pwn}}}},
				map[string]any{"role": "user", "content": map[string]any{"type": "tool_result", "toolUseId": pwn, "content": []any{map[string]any{"type": "text", "text": pwn}}}}},
			"modelPreferences": map[string]any{"hints": []any{map[string]any{"name": pwn}}, "costPriority": pwn},
			"tools":            []any{map[string]any{"name": pwn, "description": pwn, "inputSchema": map[string]any{"type": "object", "properties": map[string]any{pwn: map[string]any{"type": pwn, "description": pwn}}}}},
		}}))
	elicitURL := add(protocol.ServerToClient, protocol.KindRequest, "elicitation/create", "",
		j(map[string]any{"jsonrpc": "2.0", "id": 8, "method": "elicitation/create", "params": map[string]any{
			"mode": "url", "message": pwn, "url": "javascript:window.__pwned=1", "elicitationId": pwn}}))
	elicitForm := add(protocol.ServerToClient, protocol.KindRequest, "elicitation/create", "",
		j(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": map[string]any{
			"mode": "form", "message": pwn, "requestedSchema": map[string]any{"type": "object", "required": []any{pwn},
				"properties": map[string]any{pwn: map[string]any{"type": "string", "title": pwn, "description": pwn, "default": pwn,
					"oneOf": []any{map[string]any{"const": pwn, "title": pwn}}}, "nested": map[string]any{"type": "object"}}}}}))
	notUTF8 := add(protocol.ServerToClient, protocol.KindInvalid, "", "", []byte("\xff\xfe<script>window.__pwned=1</script>"))
	err := store.Write(context.Background(), &capture.Batch{
		Sessions: []*capture.Session{{ID: sid, Start: now, End: now.Add(time.Second), Messages: len(msgs), Calls: 1, Findings: len(msgs),
			Client: protocol.Implementation{Name: pwn, Version: "javascript:window.__pwned=1"}, Server: protocol.Implementation{Name: pwn},
			Upstream: "javascript:window.__pwned=1//", Path: pwn, Labels: []string{pwn, "javascript:x"}}},
		Exchanges: []*capture.Exchange{{ID: 1, SessionID: sid, Method: "POST", URL: "/mcp?" + pwn, Status: 200, Start: now,
			RequestHeader: http.Header{"X-Evil": {pwn}}, ResponseHeader: http.Header{"Content-Type": {"text/html"}, "Location": {"javascript:window.__pwned=1"}}}},
		Messages: msgs,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, base := newDash(t, store, tapeOptions(new([]string)))
	b := newBrowser(t)

	safe := func(where string) {
		t.Helper()
		// Nothing ran, nothing was added that could run, and every link and
		// image is ours.
		check := `(() => {
			const bad = [];
			if (window.__pwned !== undefined) bad.push('window.__pwned is set');
			if (document.scripts.length !== 1) bad.push(document.scripts.length + ' scripts');
			for (const a of document.querySelectorAll('a:not(.skip-link)')) { const h = a.getAttribute('href') || ''; if (!h.startsWith('/') || h.startsWith('//')) bad.push('link ' + h); }
			for (const i of document.querySelectorAll('img')) if (!i.src.startsWith('data:image/png;base64,')) bad.push('img ' + i.src.slice(0, 60));
			for (const e of document.querySelectorAll('iframe, object, embed, svg image, [onerror], [onload], [onclick]')) bad.push('element ' + e.tagName);
			return bad;
		})()`
		if bad := eval[[]string](b, check); len(bad) > 0 {
			b.screenshot("unsafe-" + where)
			t.Errorf("%s: %q", where, bad)
		}
		b.checkClean()
	}
	sessionURL := base + "/sessions/" + esc(sid)
	msgURL := func(seq uint64) string { return fmt.Sprintf("%s/messages/%d", sessionURL, seq) }

	b.open(base + "/sessions")
	b.waitFor("the sessions table", `document.querySelector('table.sessions[data-ready] tbody tr') !== null`, 10*time.Second)
	if txt := eval[string](b, `document.querySelector('table.sessions tbody tr').textContent`); !strings.Contains(txt, "<script>") {
		t.Errorf("the hostile client name is not shown as text: %q", txt)
	}
	safe("sessions")
	b.screenshot("sessions")

	b.open(sessionURL)
	b.waitFor("the tree", treeReady, 10*time.Second)
	eval[bool](b, `[...document.querySelectorAll('[role=tree] li[role=treeitem] > .row .toggle')].forEach(t => t.click()), true`)
	safe("session")
	b.screenshot("session")

	for _, seq := range []uint64{call, result, textarea, big, deep, deepObj, frame, notUTF8, sampling, elicitURL, elicitForm} {
		start := time.Now()
		b.open(msgURL(seq))
		b.waitFor(fmt.Sprintf("message %d", seq), `document.querySelector('section.panel h2') !== null && document.querySelector('details.raw-json') !== null`, 30*time.Second)
		// Open everything there is: the raw tree (and its first levels),
		// the raw text, the editor, the versions.
		eval[bool](b, `(() => { for (const d of document.querySelectorAll('details')) { d.open = true; d.dispatchEvent(new Event('toggle')); } return true })()`)
		b.settle() // the folds' toggle events have run
		for range 3 {
			eval[bool](b, `[...document.querySelectorAll('.j-toggle[aria-expanded=false]')].slice(0, 50).forEach(t => t.click()), true`)
		}
		eval[bool](b, `[...document.querySelectorAll('button.more')].slice(0, 5).forEach(b => b.click()), true`)
		took := time.Since(start)
		safe(fmt.Sprintf("message %d", seq))
		b.screenshot(fmt.Sprintf("message-%d", seq))
		// A hang check, not a speed target: under the race detector, with
		// the other packages' tests on the same two cores, the 5 MB
		// message took 11 s once.
		if took > 30*time.Second {
			t.Errorf("message %d took %v to open", seq, took)
		}
		// Still usable: the editor takes a value, navigation works.
		if seq == textarea {
			if v := eval[string](b, `document.querySelector('textarea.editor').value`); !strings.Contains(v, "</textarea><script>") {
				t.Errorf("the editor holds %q, want the recorded text", v)
			}
		}
	}
	// The 5 MB string is cut in the view, with a "show all" that is still text.
	b.open(msgURL(big))
	// Hang checks, bounded as the messages above are (30 s under the race
	// detector with every package's tests on two cores).
	b.waitFor("the big message", `document.querySelector('section.panel .structured') !== null`, 30*time.Second)
	shown := eval[int](b, `document.querySelector('section.panel .structured').textContent.length`)
	if shown > 100000 {
		t.Errorf("the view shows %d characters of a 5 MB string, want it cut", shown)
	}
	b.click(`section.panel .structured button.more`)
	b.waitFor("all of it", `document.querySelector('section.panel .structured').textContent.length > 5000000`, 10*time.Second)
	safe("show all")

	// The deep JSON stops at the depth cap.
	b.open(msgURL(deep))
	b.waitFor("the deep message", `document.querySelector('details.raw-json') !== null`, 30*time.Second)
	b.click(`details.raw-json > summary`)
	b.waitFor("the JSON tree", `document.querySelector('details.raw-json .jtree') !== null`, 5*time.Second)
	for range 70 {
		if !eval[bool](b, `(() => { const t = document.querySelector('details.raw-json .j-toggle[aria-expanded=false]'); if (!t) return false; t.click(); return true })()`) {
			break
		}
	}
	if !eval[bool](b, `[...document.querySelectorAll('details.raw-json .j-row.muted')].some(e => e.textContent.includes('nested deeper than'))`) {
		t.Error("the deep JSON tree has no depth cap")
	}
	safe("deep")
	b.screenshot("deep")
	b.click(`#nav a[data-nav=sessions]`)
	b.waitFor("the sessions page after all that", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
	safe("end")
}

// A stdio server's session (mcptape wrap) says so: the sessions list and
// the session page show its leg and name, and the page its command —
// redacted as recorded.
func TestBrowserStdioSession(t *testing.T) {
	r := newRig(t, nil)
	s := r.rec.OpenStream(&capture.StreamInfo{Name: "weather", Command: capture.Command{
		Args: []string{"node", "build/index.js", "--api-key", "sk-live-0123456789abcdef"}, Dir: "/srv/weather",
	}})
	s.Line(protocol.ClientToServer, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-ai","version":"0.1.0"}}}`))
	s.Line(protocol.ServerToClient, []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"weather","version":"1"}}}`))
	s.Stderr([]byte("weather: ready"))
	s.Stderr([]byte("weather: <b>warning</b> the API key expires soon"))
	s.Close("exited with code 3")
	r.sync(t)
	var id string
	for sess, err := range r.store.Sessions(t.Context(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		id = sess.ID
	}
	b := newBrowser(t)
	b.open(r.srv.URL + "/sessions")
	b.waitFor("the sessions table", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
	if got := eval[string](b, `document.querySelector('table.sessions tbody tr').innerText`); !strings.Contains(got, "stdio: weather") {
		t.Errorf("the sessions row does not say how the session came: %q", got)
	}
	b.shots("sessions-stdio")
	b.open(r.srv.URL + "/sessions/" + id)
	b.waitFor("the session's facts", `document.querySelector('.facts') !== null`, 10*time.Second)
	facts := eval[string](b, `document.querySelector('.facts').innerText`)
	for _, want := range []string{"stdio: weather", "node build/index.js --api-key [redacted]", "/srv/weather", "exited with code 3"} {
		if !strings.Contains(facts, want) {
			t.Errorf("the session page lacks %q:\n%s", want, facts)
		}
	}
	if strings.Contains(facts, "sk-live") {
		t.Errorf("the session page shows the command's secret:\n%s", facts)
	}
	// The server's stderr, as text, with how it ended; and the replay
	// command a stdio session needs (--stdio, for a client config).
	stderr := eval[string](b, `[...document.querySelectorAll('section.panel')].find(s => s.querySelector('h2')?.textContent.startsWith('Standard error'))?.innerText || ''`)
	for _, want := range []string{"Standard error (2 lines)", "weather: ready", "weather: <b>warning</b> the API key expires soon", "exited with code 3"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the stderr section lacks %q:\n%s", want, stderr)
		}
	}
	if cmd := eval[string](b, `document.querySelector('pre.command').textContent`); !strings.Contains(cmd, "mcptape replay server --stdio --tape") {
		t.Errorf("the replay command for a stdio session: %q", cmd)
	}
	b.shots("session-stdio")
	b.checkClean()
}
