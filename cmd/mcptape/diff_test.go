package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/replay"
)

// TestDiffSameClientAgrees: two runs of the official TypeScript client
// against server-everything, recorded, agree: `diff` of the two sessions,
// and of one of them against its own tape, exits 0 — once told that
// toggle-subscriber-updates' answer quotes the server's session id, which
// differs from run to run (without that, diff reports exactly that path).
func TestDiffSameClientAgrees(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rec := recordEverything(t, ctx)
	for range 2 {
		if rep, err := interop.RunClient(ctx, rec.base+"/mcp", nil); err != nil || !rep.OK {
			t.Fatalf("the TypeScript client: %v %+v", err, rep)
		}
	}
	var ids []string
	for _, s := range lsJSON(t, rec.data) {
		if s.Calls > 0 {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("%d sessions with calls, want 2", len(ids))
	}
	code, out, _ := mcptape(t, "diff", "--data", rec.data, "--json", ids[0], ids[1])
	var rep replay.DiffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if code != 1 || len(rep.Answers) != 1 || rep.Answers[0].Call != "tools/call toggle-subscriber-updates #1" || len(rep.Answers[0].Diffs) != 1 ||
		rep.Answers[0].Diffs[0].Path != "result.content[0].text" || len(rep.Catalog)+len(rep.OnlyA)+len(rep.OnlyB) != 0 {
		t.Errorf("diff of two runs: exit %d, %+v; want only toggle-subscriber-updates' text, which quotes the session id", code, rep)
	}
	volatile := "tools/call toggle-subscriber-updates=result.content[0].text"
	code, out, errOut := mcptape(t, "diff", "--data", rec.data, "--ignore-in", volatile, ids[0], ids[1])
	if code != 0 || !strings.Contains(out, "SAME: ") {
		t.Fatalf("diff of two runs of the same client: exit %d:\n%s%s", code, out, errOut)
	}
	tape := filepath.Join(t.TempDir(), "run.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", rec.data, "-o", tape, "-q", ids[1]); code != 0 {
		t.Fatal(errOut)
	}
	if code, out, errOut := mcptape(t, "diff", "--data", rec.data, tape, ids[0], "--ignore-in", volatile); code != 0 {
		t.Errorf("diff of a tape and a session: exit %d:\n%s%s", code, out, errOut)
	}
}

// runListEcho runs a go-sdk client named name against url: tools/list,
// then echo "hi".
func runListEcho(t *testing.T, ctx context.Context, url, name string) {
	t.Helper()
	cs := mcpClient(t, ctx, url, name)
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixtures.ToolEcho, Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
}

// TestDiffServerChanged: the same client against a server that then
// changed one tool's schema, removed another, and answers echo in capitals
// is reported exactly that way: the schema change as a path with both
// types, the removed tool, and the echo answer's changed text as a path;
// `diff` exits 1, and --ignore leaves the path out.
func TestDiffServerChanged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := fixtures.NewServer(nil)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer up.Close()
	rec := startRecord(t, "--upstream", up.URL+"/mcp")
	runListEcho(t, ctx, rec.url, "same-client")

	cs := mcpClient(t, ctx, rec.url, "probe")
	tools, err := cs.ListTools(ctx, nil)
	cs.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		switch tl.Name {
		case fixtures.ToolAdd:
			changed := *tl
			var schema map[string]any
			b, _ := json.Marshal(tl.InputSchema)
			_ = json.Unmarshal(b, &schema)
			schema["properties"].(map[string]any)["b"].(map[string]any)["type"] = "string"
			changed.InputSchema = schema
			srv.AddTool(&changed, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		case fixtures.ToolEcho:
			srv.AddTool(tl, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in struct{ Text string }
				_ = json.Unmarshal(req.Params.Arguments, &in)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil
			})
		}
	}
	srv.RemoveTools(fixtures.ToolFail)
	runListEcho(t, ctx, rec.url, "same-client")
	var runs []string // newest first
	for _, s := range lsJSON(t, rec.data) {
		if s.Client.Name == "same-client" {
			runs = append(runs, s.ID)
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs recorded", len(runs))
	}
	a, b := runs[1], runs[0]

	code, out, errOut := mcptape(t, "diff", "--data", rec.data, "--json", a, b)
	if code != 1 {
		t.Fatalf("diff: exit %d, want 1:\n%s%s", code, out, errOut)
	}
	var rep replay.DiffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, out)
	}
	wantCatalog := []capture.CatalogChange{
		{Kind: "tool", Name: fixtures.ToolAdd, Change: "changed", Path: "inputSchema.properties.b.type", Old: `"integer"`, New: `"string"`},
		{Kind: "tool", Name: fixtures.ToolFail, Change: "removed"},
	}
	if d := cmp.Diff(wantCatalog, rep.Catalog); d != "" {
		t.Errorf("catalog changes (-want +got):\n%s", d)
	}
	if len(rep.Answers) != 1 || rep.Answers[0].Call != "tools/call echo #1" || len(rep.Answers[0].Diffs) != 1 ||
		rep.Answers[0].Diffs[0] != (replay.Difference{Path: "result.content[0].text", Recorded: `"hi"`, Live: `"HI"`}) {
		t.Errorf("answers that changed: %+v; want tools/call echo #1 at result.content[0].text, \"hi\" then \"HI\"", rep.Answers)
	}
	if len(rep.OnlyA)+len(rep.OnlyB)+len(rep.Unlisted) != 0 {
		t.Errorf("calls only in one: %+v %+v %v", rep.OnlyA, rep.OnlyB, rep.Unlisted)
	}
	var methods []string
	for _, l := range rep.Latency {
		methods = append(methods, l.Method)
		if l.A.Count != 1 || l.B.Count != 1 || l.A.P50 <= 0 || l.B.P95 < l.B.P50 {
			t.Errorf("latency of %s: %+v", l.Method, l)
		}
	}
	if !strings.Contains(strings.Join(methods, ","), "tools/call echo") {
		t.Errorf("latency methods: %v", methods)
	}

	_, text, _ := mcptape(t, "diff", "--data", rec.data, a, b)
	for _, want := range []string{`tool "add": inputSchema.properties.b.type`, `A: "integer"`, `B: "string"`, `tool "fail": removed in B`,
		"tools/call echo #1", "result.content[0].text", "DIFFER: 2 catalog change(s), 1 answer(s) changed", "latency per method"} {
		if !strings.Contains(text, want) {
			t.Errorf("diff output lacks %q:\n%s", want, text)
		}
	}
	_, text, _ = mcptape(t, "diff", "--data", rec.data, a, b, "--ignore", "result.content[0].text")
	if strings.Contains(text, "answers that changed") || !strings.Contains(text, "DIFFER: 2 catalog change(s), 0 answer(s)") {
		t.Errorf("diff --ignore result.content[0].text:\n%s", text)
	}
	if code, _, errOut := mcptape(t, "diff", "--data", rec.data, a); code != exitUsage {
		t.Errorf("diff of one recording: exit %d: %s", code, errOut)
	}
}
