package capture_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// TestFindingsOnTheWire covers findings the other tests leave out: an
// Mcp-Method header that disagrees with the body, a server→client request
// on a 2026-07-28 session, roots asked of a client that did not declare
// them, and the age of a request never answered.
func TestFindingsOnTheWire(t *testing.T) {
	t.Run("Mcp-Method disagrees with the body", func(t *testing.T) {
		d := newDriver(t, nil)
		d.exchange(modernCall(1, "tools/list", "", map[string]string{"Mcp-Method": "prompts/list"},
			sse(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[]}}`)))
		ms := d.messages("s01") // synced
		var found string
		for x := range d.store.Exchanges(context.Background(), "s01") {
			for _, f := range x.FindingList {
				found += string(f.Kind) + ": " + f.Message + "\n"
			}
		}
		if !strings.Contains(found, `header-mismatch: Mcp-Method is "prompts/list" but the body's method is "tools/list"`) {
			t.Errorf("exchange findings: %q", found)
		}
		if len(ms) != 2 || ms[1].Links.Request != ms[0].Seq {
			t.Errorf("the call is still linked despite the finding: %d messages", len(ms))
		}
	})
	t.Run("server→client request on a 2026-07-28 session", func(t *testing.T) {
		d := newDriver(t, nil)
		d.exchange(modernCall(1, "tools/call", `"name":"ask"`, map[string]string{"Mcp-Name": "ask"},
			sse(`{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`),
			sse(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)))
		ms := d.messages("s01")
		if len(ms) != 3 || !strings.Contains(findingsOf(ms[1]), "server→client request sampling/createMessage on a 2026-07-28 session") {
			t.Fatalf("findings of the stream's request: %q", findingsOf(ms[1]))
		}
		if ms[2].Links.Request != ms[0].Seq {
			t.Errorf("the call's result is not linked to the call")
		}
	})
	t.Run("roots asked of a client without the capability", func(t *testing.T) {
		d := newDriver(t, nil)
		d.exchange(initialize(protocol.V20251125)) // declares nothing
		d.exchange(ex{method: "POST", path: "/mcp", reqHeader: map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-11-25"},
			body:       `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`,
			respHeader: map[string]string{"Content-Type": "text/event-stream"},
			resp: []string{sse(`{"jsonrpc":"2.0","id":0,"method":"roots/list"}`),
				sse(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)}})
		ms := d.messages("s01")
		if len(ms) != 5 || !strings.Contains(findingsOf(ms[3]), "did not declare the roots capability") {
			t.Errorf("roots/list findings: %q", findingsOf(ms[len(ms)-2]))
		}
	})
	t.Run("a request never answered says how long it waited", func(t *testing.T) {
		d := newDriver(t, nil)
		d.exchange(modernCall(1, "tools/list", "", nil, ": hanging\n\n"))
		d.exchange(modernCall(2, "prompts/list", "", nil, sse(`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","prompts":[]}}`)))
		d.messages("s01") // synced
		tr, err := capture.SessionTree(context.Background(), d.store, "s01")
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		tr.WriteText(&text, &capture.TextOptions{NoTimes: true})
		if !regexp.MustCompile(`unanswered: no response \d+(\.\d+)?(µs|ms|s) after the request`).MatchString(text.String()) {
			t.Errorf("no age on the unanswered finding:\n%s", text.String())
		}
		if strings.Count(text.String(), "unanswered") != 1 {
			t.Errorf("only tools/list is unanswered:\n%s", text.String())
		}
	})
}
