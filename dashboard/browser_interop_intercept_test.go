package dashboard_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
)

// TestBrowserInteropIntercept: the official TypeScript SDK client drives
// server-everything (both from npm) through the recording proxy, and a
// person on the Intercept page, in real Chromium, edits and forwards its
// echo call (server-everything echoes the edit back to the client), answers
// its sampling request in place of the client (the tool returns that
// answer; the client's handler is never asked), declines an elicitation
// and accepts the next through the form generated from its schema (the
// server reads the values typed), and fails get-sum's answer by hand.
func TestBrowserInteropIntercept(t *testing.T) {
	if err := interop.Available(); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	ir := newInterceptRig(t, ev.URL(), "tools/call:echo", "sampling/createMessage", "elicitation/create", "response:tools/call:get-sum")
	t.Cleanup(ir.icpt.Close)
	b := newBrowser(t)
	b.open(ir.srv.URL + "/intercept")
	b.waitFor("the page", `document.querySelector('.held-list[data-ready]') !== null && document.querySelector('#intercept-count[data-live]') !== null`, 10*time.Second)

	type result struct {
		rep *interop.ClientReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := interop.RunClient(ctx, ir.px.URL+"/mcp", &interop.ClientOptions{Steps: interop.StepsIntercept, Timeout: 140 * time.Second})
		done <- result{rep, err}
	}()

	// echo, edited.
	card := heldCard(b, "request", "tools/call")
	b.click(card + " details.edit-box summary")
	// The session listed the tool: the form is offered first; this edit
	// is made as JSON.
	eval[bool](b, `(document.querySelector('`+card+` details.edit-box button.mode-json')?.click(), true)`)
	edited := strings.Replace(eval[string](b, `document.querySelector('`+card+` textarea.edit-json').value`), "interop-hello", "edited in mcptape", 1)
	b.run("the edit", chromedp.SetValue(chromedp.CSS(card+" textarea.edit-json"), edited))
	b.click(card + " button.send-edit")
	b.waitFor("echo gone", `document.querySelector('`+card+`') === null`, 10*time.Second)

	// The sampling request, answered by hand.
	card = heldCard(b, "server-request", protocol.MethodSampling)
	if text := eval[string](b, `document.querySelector('`+card+`').textContent`); !strings.Contains(text, "interop-prompt") {
		t.Errorf("the held sampling request shows %q", text)
	}
	b.run("the answer", chromedp.SetValue(chromedp.CSS(card+" .answer-panel textarea.answer-json"),
		`{"role":"assistant","content":{"type":"text","text":"answered in mcptape by a person"},"model":"a-person","stopReason":"endTurn"}`))
	b.click(card + " .answer-panel button.edit-send")
	b.waitFor("sampling gone", `document.querySelector('`+card+`') === null`, 10*time.Second)

	// The first elicitation, declined; the second, accepted through the form.
	card = heldCard(b, "server-request", protocol.MethodElicitation)
	// Its own card must go: the second elicitation may be held already.
	first := `section.held[data-held-id="` + eval[string](b, `document.querySelector('`+card+`').dataset.heldId`) + `"]`
	b.click(first + " button.elicit-decline")
	b.waitFor("the first elicitation gone", `document.querySelector('`+first+`') === null`, 10*time.Second)
	card = heldCard(b, "server-request", protocol.MethodElicitation)
	f := func(field string) string { return card + ` .elicit-form [data-field="` + field + `"]` }
	b.click(card + " button.elicit-accept")
	b.waitFor("the form refused (name is required)", `document.querySelector('`+card+` > .check').textContent.includes('name required')`, 5*time.Second)
	b.run("a name", chromedp.SetValue(chromedp.CSS(f("name")+" input"), "Ada Lovelace"))
	b.run("an email", chromedp.SetValue(chromedp.CSS(f("email")+" input"), "ada@example.com"))
	b.run("an integer", chromedp.SetValue(chromedp.CSS(f("integer")+" input[type=number]"), "7"))
	eval[bool](b, `(document.querySelector('`+f("integer")+` input[type=number]').dispatchEvent(new Event('input', {bubbles: true})), true)`)
	b.screenshot("everything-elicitation-form")
	b.click(card + " button.elicit-accept")
	b.waitFor("the second elicitation gone", `document.querySelectorAll('section.held[data-method="elicitation/create"]').length === 0`, 10*time.Second)

	// get-sum's answer, failed by hand.
	card = heldCard(b, "response", "tools/call")
	b.run("the message", chromedp.SetValue(chromedp.CSS(card+" input.error-message"), "get-sum failed in mcptape"))
	b.click(card + " button.fail")

	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the client did not finish")
	}
	if r.err != nil {
		t.Fatalf("the TypeScript client: %v", r.err)
	}
	detail := func(name string) string {
		s, _ := r.rep.Step(name)
		return s.Detail
	}
	for step, want := range map[string][]string{
		"observe-echo":          {"Echo: edited in mcptape"},
		"observe-sampling":      {"answered in mcptape by a person", "a-person"},
		"observe-elicitation-1": {"declined"},
		"observe-elicitation-2": {"User provided the requested information", "Name: Ada Lovelace", "Email: ada@example.com", "Favorite Integer: 7"},
		"observe-get-sum":       {"error:", "get-sum failed in mcptape"},
	} {
		for _, w := range want {
			if !strings.Contains(detail(step), w) {
				t.Errorf("%s: the client saw %q, want %q in it", step, detail(step), w)
			}
		}
	}
	if n := r.rep.Counts.Sampling + r.rep.Counts.Elicitation; n != 0 {
		t.Errorf("the client's own handlers answered %d requests; a person answered them all in its place", n)
	}
	b.checkClean()
}
