package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// noSamplingClient connects a go-sdk client with no sampling handler, so
// it declares no sampling capability. version "" lets go-sdk negotiate
// (2026-07-28 on the stateless endpoint).
func noSamplingClient(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "no-sampling", Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var o *mcp.ClientSessionOptions
	if version != "" {
		o = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: &http.Transport{Proxy: nil}}}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s failed: %s", name, strings.Join(parts, "\n"))
	}
	return strings.Join(parts, "\n")
}

// mockProfile answers sampling from templates: fixture's model hint picks
// an override; get_weather is called for a tool loop.
const mockProfile = `{"name":"quick-mock","sampling":{"template":"default template: {{prompt}} {{toolResults}}","model":"mock-default",
"overrides":[{"hint":"fix*","template":"fixture override: {{prompt}}","model":"mock-fixture"}],
"toolUse":[{"name":"get_weather","input":{"city":"Paris"}}]}}`

// TestRecordAnswerSampling: `record --answer sampling=profile:quick-mock`
// in front of the fixture server, with a go-sdk client that declares no
// sampling capability: on both eras sample and sample_tools complete,
// answered from the profile (the override that matches the request's
// model hint for sample, the default template for sample_tools, whose
// requests have no hints), and the record marks every change.
func TestRecordAnswerSampling(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "profiles", "quick-mock.json"), []byte(mockProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data,
		"--dashboard", "127.0.0.1:0", "--answer", "sampling=profile:quick-mock")
	proxyURL := r.wait(t, "point your MCP client at ")
	base := strings.TrimSuffix(proxyURL, fixtures.PathStateful)
	for _, era := range []struct{ name, path, version string }{
		{"legacy", fixtures.PathStateful, protocol.V20251125},
		{"2026-07-28", fixtures.PathStateless, ""},
	} {
		t.Run(era.name, func(t *testing.T) {
			cs := noSamplingClient(t, base+era.path, era.version)
			if got := toolText(t, cs, fixtures.ToolSample, map[string]any{"prompt": "hello"}); got != "fixture override: hello" {
				t.Errorf("sample: %q, want the override that matches the model hint", got)
			}
			if got := toolText(t, cs, fixtures.ToolSampleTools, map[string]any{"question": "weather in Paris?"}); got != "default template: weather in Paris? Paris: sunny, 21 C" {
				t.Errorf("sample_tools: %q, want the default template with the tool's result", got)
			}
		})
	}
	ctx := context.Background()
	st, err := openRead(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var added, answered, byMcptape int
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range m.Findings {
				switch {
				case f.Kind != capture.FindingIntercepted:
				case strings.Contains(f.Message, "--answer added the sampling capability"):
					added++
				case strings.Contains(f.Message, "--answer sampling=profile:quick-mock"):
					answered++
				}
				if f.Kind == capture.FindingIntercepted && strings.Contains(f.Message, "sent by mcptape") {
					byMcptape++
				}
			}
		}
	}
	if added == 0 || answered < 4 || byMcptape < 4 {
		t.Errorf("the record marks %d capabilities added, %d requests answered by mcptape, %d messages sent by mcptape", added, answered, byMcptape)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
}

// TestRecordAnswerFlags: --answer and --intercept say what they want.
func TestRecordAnswerFlags(t *testing.T) {
	data := t.TempDir()
	// A profile that leaves sampling to a person cannot answer without a
	// dashboard (it used to crash the recorder at the first sampling request).
	if err := os.MkdirAll(profilesDir(data), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profilesDir(data), "byhand.json"), []byte(`{"sampling":{"provider":"manual"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--answer", "sampling"}, "want KIND=profile[:NAME] or KIND=person"},
		{[]string{"--answer", "tools=person"}, "KIND one of sampling, elicitation, roots"},
		{[]string{"--answer", "sampling=robot"}, "from a testing profile (profile or profile:NAME) or by a person"},
		{[]string{"--answer", "sampling=profile:nope"}, "no testing profile \"nope\""},
		{[]string{"--answer", "sampling=person", "--dashboard", "off"}, "needs the dashboard"},
		{[]string{"--answer", "sampling=profile:byhand", "--dashboard", "off"}, `the testing profile "byhand" leaves sampling to a person`},
		{[]string{"--intercept", "tools/call:["}, "--intercept \"tools/call:[\""},
		{[]string{"--intercept", "tools/call", "--dashboard", "off"}, "drop --dashboard off"},
	} {
		args := append([]string{"record", "--upstream", "http://127.0.0.1:1/mcp", "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "127.0.0.1:0"}, c.args...)
		code, _, errOut := mcptape(t, args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want it to say %q", c.args, code, errOut, c.want)
		}
	}
}

// TestSend: `mcptape send` through a recorder in front of the fixture
// server: a tools/call with a custom header (the server's answer printed,
// the header recorded), a call whose sampling request the --profile
// answers (printed with the answer), and a malformed body (the server's
// refusal printed, the body recorded and flagged).
func TestSend(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off")
	proxyURL := r.wait(t, "point your MCP client at ")

	code, out, errOut := mcptape(t, "send", "--to", proxyURL, "tools/call", `{"name":"echo","arguments":{"text":"sent by hand"}}`, "-H", "X-Debug: from-send")
	if code != 0 || !strings.Contains(out, `"text":"sent by hand"`) {
		t.Fatalf("send tools/call: exit %d\n%s\n%s", code, out, errOut)
	}
	profile := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(profile, []byte(mockProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = mcptape(t, "send", "--to", proxyURL, "--profile", profile, "tools/call", `{"name":"sample","arguments":{"prompt":"hi"}}`)
	if code != 0 || !strings.Contains(out, "<- {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\"") ||
		!strings.Contains(out, "# answered from the testing profile") || !strings.Contains(out, "fixture override: hi") {
		t.Fatalf("send with a sampling request: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("send printed:\n%s", out)
	code, out, errOut = mcptape(t, "send", "--to", proxyURL, "--body", `{"jsonrpc":"2.0","id":7,"method":"tools/ca`)
	if code == 0 || !strings.Contains(out, "HTTP 400") {
		t.Fatalf("send of a malformed body: exit %d\n%s\n%s", code, out, errOut)
	}

	ctx := context.Background()
	st, err := openRead(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var header, flagged bool
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for x, err := range st.Exchanges(ctx, s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			header = header || x.RequestHeader.Get("X-Debug") == "from-send"
		}
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind == protocol.KindInvalid && string(m.Raw) == `{"jsonrpc":"2.0","id":7,"method":"tools/ca` {
				for _, f := range m.Findings {
					flagged = flagged || f.Kind == capture.FindingInvalidFrame
				}
			}
		}
	}
	if !header || !flagged {
		t.Errorf("recorded: the custom header %v, the malformed body flagged %v", header, flagged)
	}
	if code, _, e := mcptape(t, "send", "tools/list"); code != exitUsage || !strings.Contains(e, "--to is required") {
		t.Errorf("send without --to: %d %s", code, e)
	}
}

// TestSendModern: `mcptape send` to a 2026-07-28 server through a
// recorder speaks 2026-07-28 (the version the server offers), answers the
// input_required rounds of a sampling call from --profile (retrying with
// inputResponses and the echoed requestState), prints the final result,
// and the recorder keeps it as a modern session.
func TestSendModern(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	r := startRecord(t, "--upstream", up.URL+fixtures.PathStateless)
	data, proxyURL := r.data, r.url
	profile := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(profile, []byte(mockProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := mcptape(t, "send", "--to", proxyURL, "--profile", profile, "tools/call", `{"name":"sample","arguments":{"prompt":"hi"}}`)
	if code != 0 || !strings.Contains(out, "# 2026-07-28") || !strings.Contains(out, "2 rounds") || !strings.Contains(out, "inputResponses") || !strings.Contains(out, "fixture override: hi") {
		t.Fatalf("send to a 2026-07-28 server: exit %d\n%s\n%s", code, out, errOut)
	}
	var modern bool
	for _, s := range lsJSON(t, data) {
		modern = modern || s.Era == protocol.EraModern && s.Version == "2026-07-28"
	}
	if !modern {
		t.Errorf("the recorder holds no 2026-07-28 session of the send: %+v", lsJSON(t, data))
	}
}

// heldList is GET /api/v1/intercept.
type heldList struct {
	Held []capture.HeldMessage `json:"held"`
}

// waitHeld polls the dashboard until something is held.
func waitHeld(t *testing.T, c *dashClient) capture.HeldMessage {
	t.Helper()
	var held capture.HeldMessage
	fixtures.Eventually(t, 15*time.Second, func() error {
		var l heldList
		if code := c.do(http.MethodGet, "/api/v1/intercept", &l); code != http.StatusOK || len(l.Held) == 0 {
			return fmt.Errorf("nothing was held (GET /api/v1/intercept: %d)", code)
		}
		held = l.Held[0]
		return nil
	})
	return held
}

func (c *dashClient) post(path, body string) int {
	c.t.Helper()
	res, err := c.hc.Do(withJSON(pageRequest(c.hc, c.base, http.MethodPost, path, strings.NewReader(body))))
	if err != nil {
		c.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func withJSON(r *http.Request) *http.Request {
	r.Header.Set("Content-Type", "application/json")
	return r
}

// TestRecordAnswerPerson: `record --answer sampling=person` on a
// 2026-07-28 session: the sampling input request of an input_required
// round waits on the dashboard; a person's answer (through its API, as the
// Intercept page sends it) goes into the retry mcptape sends, and the
// client, which declares no sampling, gets the final result.
func TestRecordAnswerPerson(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	dashURL, out, _ := startCmd(t, "dashboard at ", "record", "--upstream", up.URL+fixtures.PathStateless, "--listen", "127.0.0.1:0",
		"--data", t.TempDir(), "--dashboard", "127.0.0.1:0", "--answer", "sampling=person")
	proxyURL := outputValue(out.String(), "point your MCP client at ")
	c := newDashClient(t, dashURL)
	cs := noSamplingClient(t, proxyURL, "")
	got := make(chan string, 1)
	go func() { got <- toolText(t, cs, fixtures.ToolSample, map[string]any{"prompt": "for a person"}) }()
	h := waitHeld(t, c)
	if h.What != capture.HeldAnswer || h.Method != protocol.MethodSampling || h.Key != "sample" || !strings.Contains(string(h.Raw), "for a person") {
		t.Fatalf("held: %+v", h)
	}
	if code := c.post("/api/v1/intercept/"+h.ID, `{"action":"answer","result":{"role":"assistant","content":{"type":"text","text":"a person's answer"},"model":"human"}}`); code != http.StatusOK {
		t.Fatalf("answering: %d", code)
	}
	select {
	case text := <-got:
		if text != "a person's answer" {
			t.Errorf("sample returned %q", text)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not return")
	}
}

// TestRecordStopForwardsHeld: stopping `record --intercept` sends what it
// holds on unchanged: the client gets the server's answer.
func TestRecordStopForwardsHeld(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", t.TempDir(),
		"--dashboard", "127.0.0.1:0", "--intercept", "tools/call:echo")
	proxyURL := r.wait(t, "point your MCP client at ")
	dashURL := r.wait(t, "dashboard at ")
	c := newDashClient(t, dashURL)
	cs := noSamplingClient(t, proxyURL, protocol.V20251125)
	got := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "held when it stopped"}})
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- res.Content[0].(*mcp.TextContent).Text
	}()
	waitHeld(t, c)
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	select {
	case text := <-got:
		if text != "held when it stopped" {
			t.Errorf("the client got %q, want the server's answer to the call as it was sent", text)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held call never went on")
	}
}

// TestRecordAnswerElicitationRoots: `--answer elicitation=profile
// --answer roots=profile` (the default profile) with a client that
// declares neither: on both eras the fixture's elicit_form gets the
// profile's accept with its content, and roots the profile's roots.
func TestRecordAnswerElicitationRoots(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	dir := filepath.Join(data, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prof := `{"name":"forms","elicitation":{"rules":[{"message":"*yourself*","action":"accept","content":{"name":"Grace","age":85}}]},"roots":[{"uri":"file:///work/project","name":"project"}]}`
	if err := os.WriteFile(filepath.Join(dir, "forms.json"), []byte(prof), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "default-profile"), []byte("forms"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data,
		"--dashboard", "off", "--answer", "elicitation=profile", "--answer", "roots=profile")
	base := strings.TrimSuffix(r.wait(t, "point your MCP client at "), fixtures.PathStateful)
	for _, era := range []struct{ name, path, version string }{
		{"legacy", fixtures.PathStateful, protocol.V20251125},
		{"2026-07-28", fixtures.PathStateless, ""},
	} {
		t.Run(era.name, func(t *testing.T) {
			cs := noSamplingClient(t, base+era.path, era.version)
			// (go-sdk's legacy server fills in the schema's defaults too.)
			if got := toolText(t, cs, fixtures.ToolElicitForm, nil); !strings.HasPrefix(got, `action=accept content={"age":85,"name":"Grace"`) {
				t.Errorf("elicit_form: %q", got)
			}
			if got := toolText(t, cs, fixtures.ToolRoots, nil); got != "file:///work/project project" {
				t.Errorf("roots: %q", got)
			}
		})
	}
}

// TestRecordAnswerPersonLegacy: `record --answer sampling=person` on a
// 2025-11-25 session, whose server asks for sampling with a request of its
// own on the call's stream: the request waits on the dashboard; the
// person's answer (posted through its API, as the Intercept page sends it)
// is what the server gets, in a POST mcptape sends for the client, which
// declares no sampling and never sees the request; the call completes;
// and the record marks the capability mcptape added, the request it
// answered, and the answer it sent.
func TestRecordAnswerPersonLegacy(t *testing.T) {
	// What the server got: every POST body it was sent.
	var mu sync.Mutex
	var bodies []string
	fx := fixtures.Handler(nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		fx.ServeHTTP(w, r)
	}))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data,
		"--dashboard", "127.0.0.1:0", "--answer", "sampling=person")
	proxyURL := r.wait(t, "point your MCP client at ")
	c := newDashClient(t, r.wait(t, "dashboard at "))
	cs := noSamplingClient(t, proxyURL, protocol.V20251125)
	got := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixtures.ToolSample, Arguments: map[string]any{"prompt": "for a person, legacy"}})
		switch {
		case err != nil:
			got <- "error: " + err.Error()
		case len(res.Content) == 0:
			got <- "no content"
		default:
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				got <- tc.Text
			} else {
				got <- "not text"
			}
		}
	}()
	h := waitHeld(t, c)
	if h.What != capture.HeldAnswer || h.Method != protocol.MethodSampling || !strings.Contains(string(h.Raw), "for a person, legacy") {
		t.Fatalf("held: %+v (%s)", h, h.Raw)
	}
	const answer = `{"role":"assistant","content":{"type":"text","text":"a person's legacy answer"},"model":"human","stopReason":"endTurn"}`
	if code := c.post("/api/v1/intercept/"+h.ID, `{"action":"answer","result":`+answer+`}`); code != http.StatusOK {
		t.Fatalf("answering: %d", code)
	}
	select {
	case text := <-got:
		if text != "a person's legacy answer" {
			t.Fatalf("sample returned %q, want the person's answer as the server got it", text)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not return")
	}

	// The server got the person's answer as the client's response to its
	// request, and an initialize that declares sampling.
	mu.Lock()
	var answered, declared bool
	for _, b := range bodies {
		m := protocol.Decode([]byte(b))
		if m.Kind == protocol.KindResult && strings.Contains(string(m.Result), "a person's legacy answer") && strings.Contains(string(m.Result), `"model":"human"`) {
			answered = true
		}
		if m.Method == "initialize" && strings.Contains(string(m.Params), `"sampling"`) {
			declared = true
		}
	}
	mu.Unlock()
	if !answered || !declared {
		t.Errorf("the server got the person's answer %v, a sampling capability %v; bodies:\n%s", answered, declared, strings.Join(bodies, "\n"))
	}

	ctx := context.Background()
	st, err := openRead(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var added, request, sent bool
	var legacy bool
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		legacy = legacy || s.Version == protocol.V20251125
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range m.Findings {
				if f.Kind != capture.FindingIntercepted {
					continue
				}
				switch {
				case m.Method == "initialize" && m.Kind == protocol.KindRequest && strings.Contains(f.Message, "--answer added the sampling capability"):
					added = true
				case m.Direction == protocol.ServerToClient && m.Kind == protocol.KindRequest && m.Method == protocol.MethodSampling &&
					strings.Contains(f.Message, "answered by mcptape for the client") && strings.Contains(f.Message, "person"):
					request = true
				case m.Direction == protocol.ClientToServer && m.Kind == protocol.KindResult && strings.Contains(f.Message, "sent by mcptape") &&
					strings.Contains(string(m.Raw), "a person's legacy answer"):
					sent = true
				}
			}
		}
	}
	if !legacy || !added || !request || !sent {
		t.Errorf("the record: a 2025-11-25 session %v; marks the capability added %v, the request answered by a person %v, the answer sent by mcptape %v",
			legacy, added, request, sent)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
}
