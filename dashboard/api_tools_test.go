package dashboard_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/fixtures"
)

// historyCall is one row of GET /api/v1/tools/history.
type historyCall struct {
	Session   string         `json:"session"`
	Seq       uint64         `json:"seq"`
	Client    string         `json:"client"`
	Arguments map[string]any `json:"arguments"`
	Status    string         `json:"status"`
	Summary   string         `json:"summary"`
	Ms        float64        `json:"ms"`
}

// TestToolHistoryAPI: the history of a tool, as the Tools page reads it,
// has every recorded call of it across sessions, newest first, each with
// the arguments the client sent, a summary of the answer, its latency and
// its status: a result, a result with isError, or a JSON-RPC error.
func TestToolHistoryAPI(t *testing.T) {
	ir := newInterceptRig(t, "")
	call := func(cs *mcp.ClientSession, name string, args map[string]any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// fail and error fail on purpose: their answers are the point.
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	}
	first := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := first.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	call(first, fixtures.ToolEcho, map[string]any{"text": "in the first session"})
	second := ir.bareClient(t, ir.px.URL+fixtures.PathStateful)
	call(second, fixtures.ToolEcho, map[string]any{"text": "in the second session"})
	call(second, fixtures.ToolSlow, map[string]any{"duration_ms": 300, "steps": 2})
	call(second, fixtures.ToolFail, map[string]any{})
	call(second, fixtures.ToolError, map[string]any{})
	ir.sync(t)

	c := newAPIClient(t, ir.srv.URL)
	var tools struct {
		Upstreams []struct {
			Upstream string `json:"upstream"`
			Path     string `json:"path"`
		} `json:"upstreams"`
	}
	c.get("/api/v1/tools", &tools)
	if len(tools.Upstreams) != 1 || tools.Upstreams[0].Path != fixtures.PathStateful {
		t.Fatalf("the tools' upstreams: %+v", tools.Upstreams)
	}
	u := tools.Upstreams[0]
	history := func(name string) []historyCall {
		t.Helper()
		var h struct {
			Calls []historyCall `json:"calls"`
		}
		c.get("/api/v1/tools/history?upstream="+url.QueryEscape(u.Upstream)+"&path="+url.QueryEscape(u.Path)+"&name="+url.QueryEscape(name), &h)
		return h.Calls
	}

	echo := history(fixtures.ToolEcho)
	if len(echo) != 2 {
		t.Fatalf("echo's history: %+v, want its two calls", echo)
	}
	for i, want := range []string{"in the second session", "in the first session"} {
		row := echo[i]
		if row.Arguments["text"] != want || len(row.Arguments) != 1 || row.Status != "success" || row.Summary != want ||
			row.Ms <= 0 || row.Client != "bare-client/v1" {
			t.Errorf("echo's call %d: %+v, want the arguments {text: %q}, success, the echoed text, a latency, the client", i, row, want)
		}
	}
	if echo[0].Session == echo[1].Session {
		t.Errorf("echo's two calls are in one session %s, want one in each", echo[0].Session)
	}

	slow := history(fixtures.ToolSlow)
	if len(slow) != 1 || slow[0].Arguments["duration_ms"] != 300.0 || slow[0].Arguments["steps"] != 2.0 || slow[0].Status != "success" {
		t.Fatalf("slow's history: %+v", slow)
	}
	// The latency is the call's, as the recorder timed it: at least the
	// 300 ms the tool took, and nothing like a timeout.
	if ms := slow[0].Ms; ms < 300 || ms > 10_000 {
		t.Errorf("slow took %.1f ms, want at least 300", ms)
	}

	fail := history(fixtures.ToolFail)
	if len(fail) != 1 || fail[0].Status != "isError" || fail[0].Summary != "fixture: deliberate tool failure" || fail[0].Ms <= 0 {
		t.Errorf("fail's history: %+v, want an isError result with its text", fail)
	}
	rpcErr := history(fixtures.ToolError)
	if want := fmt.Sprintf("%d: fixture: deliberate JSON-RPC error", fixtures.ErrorToolCode); len(rpcErr) != 1 || rpcErr[0].Status != "error" ||
		rpcErr[0].Summary != want || rpcErr[0].Ms <= 0 {
		t.Errorf("error's history: %+v, want a JSON-RPC error summarized as %q", rpcErr, want)
	}
	if none := history("no_such_tool"); len(none) != 0 {
		t.Errorf("a tool never called: %+v", none)
	}
}
