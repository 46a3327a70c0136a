package dashboard_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// recordedCall lists the tools and calls echo through the recorder, and
// returns the seq of the recorded call.
func recordedCall(t *testing.T, ir *interceptRig) (session string, seq uint64) {
	t.Helper()
	cs := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "as recorded"}}); err != nil {
		t.Fatal(err)
	}
	ir.sync(t)
	for s, err := range ir.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range ir.store.Messages(ctx, s.ID, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind == protocol.KindRequest && m.Name == "echo" {
				return s.ID, m.Seq
			}
		}
	}
	t.Fatal("the echo call is not recorded")
	return "", 0
}

// TestBrowserSendAgain: "Send again" on a recorded tools/call opens the
// editor with the tool's form; with a changed argument and a header of
// the person's own it goes through the recorder to the live server in a
// session the dashboard opens itself; the answer is shown and set against
// the recorded one; and the record has it, as the dashboard's client.
func TestBrowserSendAgain(t *testing.T) {
	ir := newInterceptRig(t, "")
	session, seq := recordedCall(t, ir)
	b := newBrowser(t)
	b.open(ir.srv.URL + "/sessions/" + session + "/messages/" + strconv.FormatUint(seq, 10))
	b.waitFor("the message page", `document.querySelector('a.send-again') !== null`, 10*time.Second)
	b.click("a.send-again")
	b.waitFor("the editor", `document.querySelector('main[data-ready] .pane-form [data-field="text"] input') !== null`, 10*time.Second)
	if v := eval[string](b, `document.querySelector('.pane-form [data-field="text"] input').value`); v != "as recorded" {
		t.Errorf("the form starts from %q, want the recorded argument", v)
	}
	b.run("a changed argument", chromedp.SetValue(chromedp.CSS(`.pane-form [data-field="text"] input`), "changed on the page"))
	b.run("a header name", chromedp.SetValue(chromedp.CSS(".header-row input.header-name"), "X-From-Dashboard"))
	b.run("a header value", chromedp.SetValue(chromedp.CSS(".header-row input.header-value"), "yes"))
	b.click("button.send")
	b.waitFor("the answer", `document.querySelector('.send-result[data-done] .sent-response') !== null`, 20*time.Second)
	text := eval[string](b, `document.querySelector('.send-result').textContent`)
	if !strings.Contains(text, "changed on the page") {
		t.Errorf("the answer shows %q", text)
	}
	if diff := eval[string](b, `document.querySelector('.diff-table')?.textContent || ''`); !strings.Contains(diff, "result.content[0].text") ||
		!strings.Contains(diff, "as recorded") || !strings.Contains(diff, "changed on the page") {
		t.Errorf("the diff against the recorded answer: %q", diff)
	}
	b.shots("send-again")

	// A raw body that is not JSON goes only once confirmed.
	b.click("button.mode-raw")
	b.run("a broken body", chromedp.SetValue(chromedp.CSS("textarea.raw-body"), `{"jsonrpc":"2.0","id":5,"method":"tools/ca`))
	b.click("button.send")
	b.waitFor("the refusal", `document.querySelector('.send-editor .check').textContent.includes('not JSON')`, 5*time.Second)
	b.click("input.raw-malformed-ok")
	b.click("button.send")
	b.waitFor("the server's answer to it", `document.querySelector('.send-result[data-done] .sent')?.dataset.status === '400'`, 20*time.Second)
	b.checkClean()

	ir.sync(t)
	var sent, header, malformed bool
	ctx := context.Background()
	for s, err := range ir.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Client.Name != "mcptape-dashboard" {
			continue
		}
		for x, err := range ir.store.Exchanges(ctx, s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			header = header || x.RequestHeader.Get("X-From-Dashboard") == "yes"
		}
		for m, err := range ir.store.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			sent = sent || m.Kind == protocol.KindRequest && strings.Contains(string(m.Raw), "changed on the page")
			malformed = malformed || m.Kind == protocol.KindInvalid && strings.Contains(string(m.Raw), `"method":"tools/ca`)
		}
	}
	if !sent || !header || !malformed {
		t.Errorf("recorded as the dashboard's client: the call %v, the header %v, the malformed body %v", sent, header, malformed)
	}
}

// TestBrowserTools: the Tools page lists the tools of the latest
// tools/list; a call composed from the form of the fixture's compose tool,
// whose schema has every kind of property, reaches the server with every
// argument as typed (each control, checked as you type); the tool's
// history shows it, and sends it again in one click.
func TestBrowserTools(t *testing.T) {
	ir := newInterceptRig(t, "")
	recordedCall(t, ir)
	b := newBrowser(t)
	b.open(ir.srv.URL + "/tools")
	tool := `details.tool[data-tool="compose"]`
	b.waitFor("the tools", `document.querySelector('main[data-ready] `+tool+`') !== null`, 10*time.Second)
	b.click(tool + " > summary")
	f := func(field string) string { return tool + ` .tool-form [data-field="` + field + `"]` }
	b.waitFor("the form", `document.querySelector('`+f("title")+` input') !== null`, 5*time.Second)

	// Each kind has its control, and the marks.
	for sel, what := range map[string]string{
		f("body") + " textarea":                    "a textarea for a long string",
		f("temperature") + " input[type=range]":    "a slider for a number with both bounds",
		f("retries") + " input[type=number]":       "a numeric input",
		f("dry_run") + " input.switch":             "a switch",
		f("priority") + " select":                  "a select for an enum",
		f("format") + " select":                    "a select for a titled oneOf",
		f("tags") + " .chips-editor":               "a chip editor",
		f("recipients") + " button.add-item":       "repeating sub-forms",
		f("options") + " details.sub-form":         "a collapsible sub-form",
		f("extra") + " textarea.json-editor":       "a JSON editor",
		f("legacy_mode") + " .chip.deprecated":     "the deprecated mark",
		f("title") + " .required-mark":             "the required mark",
		f("temperature") + " button.default-badge": "the default badge",
		f("title") + " button.example":             "examples to click",
		f("title") + " .description":               "the description under the field",
	} {
		if !eval[bool](b, `document.querySelector('`+sel+`') !== null`) {
			t.Errorf("no %s (%s)", what, sel)
		}
	}
	input := func(sel, v string) {
		b.t.Helper()
		b.run("set "+sel, chromedp.SetValue(chromedp.CSS(sel), v))
		eval[bool](b, `(document.querySelector('`+sel+`').dispatchEvent(new Event('input', {bubbles: true})), true)`)
	}
	// Checked as you type: the pattern, then an example fixes it.
	input(f("title")+" input", "1 report")
	b.waitFor("the pattern's complaint", `document.querySelector('`+f("title")+` .field-error').textContent.includes('does not match the pattern')`, 5*time.Second)
	b.click(f("title") + " button.example")
	b.waitFor("the complaint gone", `document.querySelector('`+f("title")+` .field-error').hidden`, 5*time.Second)
	input(f("body")+" textarea", "line one\nline two")
	b.click(f("temperature") + " button.default-badge")
	input(f("retries")+" input", "3")
	b.click(f("dry_run") + " input.switch") // default true, so: false
	b.run("priority", chromedp.SetValue(chromedp.CSS(f("priority")+" select"), "2"))
	b.run("format", chromedp.SetValue(chromedp.CSS(f("format")+" select"), "0"))
	for _, tag := range []string{"alpha", "beta"} {
		b.run("tag", chromedp.SetValue(chromedp.CSS(f("tags")+" input.chip-input"), tag))
		b.click(f("tags") + " button.add-chip")
	}
	b.click(f("recipients") + " button.add-item")
	input(f("recipients")+` [data-field="recipients[0].name"] input`, "Ada")
	input(f("recipients")+` [data-field="recipients[0].email"] input`, "ada@example.com")
	input(f("options")+` [data-field="options.margin"] input[type=number]`, "12")
	input(f("extra")+" textarea", "42")
	b.screenshot("tools-form")
	b.click(tool + " button.send-tool")
	b.waitFor("the answer", `document.querySelector('`+tool+` .tool-result-box[data-done] .sent-response') !== null`, 20*time.Second)
	got := eval[string](b, `document.querySelector('`+tool+` .tool-result-box .sent-response').textContent`)
	i := strings.Index(got, "compose: ")
	if i < 0 {
		t.Fatalf("the answer: %q", got)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(got[i+len("compose: "):], "\n", 2)[0]), &args); err != nil {
		t.Fatalf("the answer %q: %v", got, err)
	}
	want := map[string]any{"title": "Weekly report", "body": "line one\nline two", "temperature": 0.7, "retries": 3.0, "dry_run": false,
		"priority": "high", "format": "md", "tags": []any{"alpha", "beta"},
		"recipients": []any{map[string]any{"name": "Ada", "email": "ada@example.com"}}, "options": map[string]any{"margin": 12.0}, "extra": 42.0}
	wj, _ := json.Marshal(want)
	aj, _ := json.Marshal(args)
	if string(wj) != string(aj) {
		t.Errorf("the server got\n %s\nwant\n %s", aj, wj)
	}
	// The history has the call; one click sends it again.
	b.waitFor("the history", `document.querySelectorAll('`+tool+` .history-table tbody tr').length === 1`, 10*time.Second)
	b.click(tool + " .history-table tbody tr button.resend")
	b.waitFor("sent again", `document.querySelectorAll('`+tool+` .history-table tbody tr').length === 2`, 20*time.Second)
	b.shots("tools")
	b.checkClean()
}
