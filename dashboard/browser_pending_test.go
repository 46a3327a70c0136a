package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/protocol"
)

// hostileSampling is a sampling request as a hostile live server might
// send it: markup, script, javascript: URLs, a textarea breaker.
const hostileSampling = `{"messages":[` +
	`{"role":"user","content":{"type":"text","text":"Say hello <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\"> [click](javascript:window.__pwned=3) </textarea>"}},` +
	`{"role":"assistant","content":[{"type":"resource_link","uri":"javascript:window.__pwned=4","name":"x"}]}],` +
	`"systemPrompt":"<b onmouseover=\"window.__pwned=5\">You are the fixture model</b>",` +
	`"modelPreferences":{"hints":[{"name":"<i>claude</i>"}],"intelligencePriority":0.8},` +
	`"tools":[{"name":"get_weather","description":"<script>window.__pwned=6</script>weather","inputSchema":{"type":"object"}}],"maxTokens":100}`

// TestBrowserPending: a sampling request a replay client waits on appears
// on /pending without a reload, its hostile content as text; a person
// edits the answer and presses Answer, and Ask returns what they wrote.
func TestBrowserPending(t *testing.T) {
	p := dashboard.NewPending()
	t.Cleanup(func() { p.Close() })
	_, base := newDash(t, smallStore(t), &dashboard.Options{Pending: p})
	b := newBrowser(t)

	b.open(base + "/pending")
	b.waitFor("the pending page", `document.querySelector('.pending-list[data-ready]') !== null && document.querySelector('#pending-count[data-live]') !== null`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll('section.pending').length`); n != 0 {
		t.Fatalf("%d requests shown before any was asked", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := ask(ctx, p, protocol.MethodSampling, hostileSampling)
	b.waitFor("the request, without a reload", `document.querySelector('section.pending[data-method="sampling/createMessage"]') !== null`, 10*time.Second)
	b.waitFor("the nav count", `document.getElementById('pending-count').textContent === '1' && !document.getElementById('pending-count').hidden`, 5*time.Second)
	b.screenshot("pending")

	// The request's content is there, as text only.
	text := eval[string](b, `document.querySelector('section.pending').textContent`)
	for _, want := range []string{"Say hello <script>window.__pwned=1</script><img src=x", "javascript:window.__pwned=4",
		"<b onmouseover=", "<i>claude</i>", "get_weather", "<script>window.__pwned=6</script>weather", "</textarea>"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page lacks the text %q", want)
		}
	}
	if bad := eval[int](b, `document.querySelectorAll('section.pending script, section.pending img, section.pending b, section.pending i, a[href^="javascript"], [onerror], [onmouseover]').length`); bad != 0 {
		t.Errorf("%d elements made from the request's content", bad)
	}
	if pwned := eval[bool](b, `window.__pwned !== undefined`); pwned {
		t.Error("content of the request ran")
	}
	// The editor starts from a template answer.
	var tmpl map[string]any
	if err := json.Unmarshal([]byte(eval[string](b, `document.querySelector('textarea.answer-json').value`)), &tmpl); err != nil ||
		tmpl["role"] != "assistant" || tmpl["model"] == "" || tmpl["stopReason"] != "endTurn" {
		t.Errorf("the template answer: %v, %v", tmpl, err)
	}

	// A bad answer is refused with the reason, and the request stays.
	b.allow(`status of 400 .*?/api/v1/pending/`)
	b.run("a bad answer", chromedp.SetValue(chromedp.CSS("textarea.answer-json"), `{"role":"assistant","model":"human"}`))
	b.click("section.pending button.answer")
	b.waitFor("the refusal", `document.querySelector('section.pending .check.bad')?.textContent.includes('result.content is missing')`, 5*time.Second)
	select {
	case a := <-got:
		t.Fatalf("Ask returned on a bad answer: %s, %v", a.res, a.err)
	default:
	}

	// The person's answer reaches the asker.
	answer := `{"role":"assistant","content":{"type":"text","text":"answered in the browser <b>really</b>"},"model":"a-person","stopReason":"endTurn"}`
	b.run("the answer", chromedp.SetValue(chromedp.CSS("textarea.answer-json"), answer))
	b.click("section.pending button.answer")
	select {
	case a := <-got:
		var want, have any
		_ = json.Unmarshal([]byte(answer), &want)
		if a.err != nil || json.Unmarshal(a.res, &have) != nil || !cmp.Equal(want, have) {
			t.Errorf("Ask returned %s, %v; want %s", a.res, a.err, answer)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Ask did not return after Answer%s", b.problems())
	}
	b.waitFor("the answered request gone", `document.querySelectorAll('section.pending').length === 0 && document.getElementById('pending-count').hidden`, 10*time.Second)

	// Answer with error.
	got = ask(ctx, p, protocol.MethodSampling, `{"messages":[{"role":"user","content":{"type":"text","text":"again"}}],"maxTokens":5}`)
	b.waitFor("the second request", `document.querySelector('section.pending') !== null`, 10*time.Second)
	b.click("section.pending button.answer-error")
	a := <-got
	var ei *protocol.ErrorInfo
	if !errors.As(a.err, &ei) || ei.Code != -1 || ei.Message != "User rejected the sampling request" {
		t.Errorf("Answer with error: Ask returned %s, %v", a.res, a.err)
	}
	b.checkClean()
}

// Without a replay client waiting, the page says how to start one.
func TestBrowserPendingNone(t *testing.T) {
	_, base := newDash(t, smallStore(t), nil)
	b := newBrowser(t)
	b.open(base + "/pending")
	b.waitFor("the page", `document.querySelector('.pending-list[data-ready]') !== null`, 10*time.Second)
	if text := eval[string](b, `document.querySelector('main').textContent`); !strings.Contains(text, "No replay client is waiting") ||
		!strings.Contains(text, "mcptape replay client --tape FILE --target URL --profile manual.json") {
		t.Errorf("the page says %q", text)
	}
	b.checkClean()
}
