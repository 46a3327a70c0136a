package dashboard_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/fixtures"
)

// TestBrowserToolsCopyAndHistory: on the Tools page, "Copy as tools/call"
// puts on the clipboard a JSON-RPC tools/call request with the arguments
// as the form has them, and each tool's history shows its recorded calls:
// the arguments, the status (a result, an isError result, a JSON-RPC
// error), the result's summary and the latency.
func TestBrowserToolsCopyAndHistory(t *testing.T) {
	ir := newInterceptRig(t, "")
	cs := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{fixtures.ToolEcho, map[string]any{"text": "as recorded"}},
		{fixtures.ToolSlow, map[string]any{"duration_ms": 300, "steps": 1}},
		{fixtures.ToolFail, nil},
		{fixtures.ToolError, nil},
	} {
		// fail and error fail on purpose.
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: c.args})
	}
	ir.sync(t)

	b := newBrowser(t)
	// The page copies with the Clipboard API, which the test reads back.
	gctx, gcancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer gcancel()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(gctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSetting("granted"), Origin: ir.srv.URL}); err != nil {
			t.Fatalf("granting %s: %v", name, err)
		}
	}
	b.open(ir.srv.URL + "/tools")
	tool := func(name string) string { return `details.tool[data-tool="` + name + `"]` }
	b.waitFor("the tools", `document.querySelector('main[data-ready] `+tool("echo")+`') !== null`, 10*time.Second)

	// Copy as tools/call, with an argument typed in the form.
	echo := tool("echo")
	b.click(echo + " > summary")
	field := echo + ` .tool-form [data-field="text"] input`
	b.waitFor("the form", `document.querySelector('`+field+`') !== null`, 5*time.Second)
	const typed = `typed "in" the <form>`
	b.run("the argument", chromedp.SetValue(chromedp.CSS(field), typed))
	eval[bool](b, `(document.querySelector('`+field+`').dispatchEvent(new Event('input', {bubbles: true})), true)`)
	copyBtn := `[...document.querySelectorAll('` + echo + ` .row-actions button')].find((x) => x.textContent === 'Copy as tools/call')`
	if !eval[bool](b, copyBtn+` !== undefined`) {
		t.Fatal("no Copy as tools/call button")
	}
	eval[bool](b, `(`+copyBtn+`.click(), true)`)
	b.waitFor("copied", `[...document.querySelectorAll('`+echo+` .row-actions button')].some((x) => x.textContent === 'Copied')`, 5*time.Second)
	copied := evalAsync[string](b, `navigator.clipboard.readText()`)
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(copied), &req); err != nil {
		t.Fatalf("the clipboard holds %q: %v", copied, err)
	}
	if req.JSONRPC != "2.0" || len(req.ID) == 0 || string(req.ID) == "null" || req.Method != "tools/call" || req.Params.Name != "echo" ||
		len(req.Params.Arguments) != 1 || req.Params.Arguments["text"] != typed {
		t.Errorf("the clipboard holds %s, want a tools/call request of echo with the form's arguments", copied)
	}

	// The history of each tool, as recorded.
	row := func(name string) string { return tool(name) + ` .history-table tbody tr` }
	cells := func(name string) []string {
		t.Helper()
		if name != "echo" {
			b.click(tool(name) + " > summary")
		}
		b.waitFor(name+"'s history", `document.querySelectorAll('`+row(name)+`').length === 1`, 10*time.Second)
		return eval[[]string](b, `[...document.querySelectorAll('`+row(name)+` td')].map((x) => x.textContent)`)
	}
	// Time, Client, Arguments, Status, Result, Latency, the button.
	if c := cells("echo"); !strings.Contains(c[2], `"as recorded"`) || c[3] != "success" || c[4] != "as recorded" || !strings.HasSuffix(c[5], "s") {
		t.Errorf("echo's history row: %q", c)
	}
	c := cells("slow")
	if !strings.Contains(c[2], `"duration_ms":300`) || c[3] != "success" {
		t.Errorf("slow's history row: %q", c)
	}
	if ms, err := strconv.Atoi(strings.TrimSuffix(c[5], "ms")); err != nil || ms < 300 {
		t.Errorf("slow's latency shows %q, want at least 300ms", c[5])
	}
	if c := cells("fail"); c[3] != "isError" || c[4] != "fixture: deliberate tool failure" {
		t.Errorf("fail's history row: %q", c)
	}
	if c := cells("error"); c[3] != "error" || c[4] != strconv.Itoa(fixtures.ErrorToolCode)+": fixture: deliberate JSON-RPC error" {
		t.Errorf("error's history row: %q", c)
	}
	b.screenshot("tools-history")
	b.checkClean()
}
