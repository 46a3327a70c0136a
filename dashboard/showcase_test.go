//lint:file-ignore SA1019 the showcase client answers sampling and elicitation and offers roots, which the 2026-07-28 revision deprecates but mcptape still records
package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// showcaseModel is the model the showcase client's sampling handler
// answers as: given tools, it calls get_weather for Paris; given tool
// results, it says what they hold; else it describes what it was sent.
func showcaseModel(_ context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	p := req.Params
	res := &mcp.CreateMessageWithToolsResult{Model: "showcase-model", Role: "assistant", StopReason: "endTurn"}
	var last *mcp.SamplingMessageV2
	if len(p.Messages) > 0 {
		last = p.Messages[len(p.Messages)-1]
	}
	if last != nil {
		for _, c := range last.Content {
			if tr, ok := c.(*mcp.ToolResultContent); ok {
				var texts []string
				for _, x := range tr.Content {
					if t, ok := x.(*mcp.TextContent); ok {
						texts = append(texts, t.Text)
					}
				}
				res.Content = []mcp.Content{&mcp.TextContent{Text: "The tools said: " + strings.Join(texts, "; ")}}
				return res, nil
			}
		}
	}
	if len(p.Tools) > 0 && (p.ToolChoice == nil || p.ToolChoice.Mode != "none") {
		res.StopReason = "toolUse"
		res.Content = []mcp.Content{
			&mcp.TextContent{Text: "Let me check the weather first."},
			&mcp.ToolUseContent{ID: "toolu_showcase_1", Name: p.Tools[0].Name, Input: map[string]any{"city": "Paris"}},
		}
		return res, nil
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("I was sent %d messages.", len(p.Messages))}}
	return res, nil
}

// showcaseForms fills forms: the showcase's preferences, the fixture's
// name/age/subscribe; URLs it accepts.
func showcaseForms(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if req.Params.Mode == "url" {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	schema, _ := json.Marshal(req.Params.RequestedSchema)
	if bytes.Contains(schema, []byte(`"toppings"`)) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{
			"email": "ada@example.com", "color": "green", "size": "m", "toppings": []any{"cheese", "olives"}, "quantity": 2, "when": "2026-08-01", "gift": true,
		}}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace", "age": 36, "subscribe": true}}, nil
}

// longQuestion is a sampling message longer than a table cell shows.
var longQuestion = "What do the picture and the sound show? " + strings.Repeat("Describe each colour of the picture and each tone of the sound in detail. ", 5) + "Then check the weather in Paris."

// runShowcase runs the go-sdk client through the rig's proxy on path,
// calling the showcase tools and the fixture's client-feature tools.
func (r *rig) runShowcase(t testing.TB, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	client := mcp.NewClient(&mcp.Implementation{Name: "showcase-client", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageWithToolsHandler: showcaseModel,
		ElicitationHandler:            showcaseForms,
		Capabilities: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{},
			Sampling:    &mcp.SamplingCapabilities{Tools: &mcp.SamplingToolsCapabilities{}},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///work/showcase", Name: "showcase"})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.px.URL + path, HTTPClient: &http.Client{Transport: tr}}, nil)
	if err != nil {
		t.Fatalf("connecting through the proxy to %s: %v", path, err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	call := func(name string, args map[string]any) {
		t.Helper()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}); err != nil && name != fixtures.ToolError {
			t.Errorf("%s %s: %v", path, name, err)
		}
	}
	for _, shape := range fixtures.Shapes {
		call(fixtures.ToolShapes, map[string]any{"shape": shape})
	}
	call(fixtures.ToolForecast, map[string]any{"city": "Paris", "days": 3})
	call(fixtures.ToolSampleMedia, map[string]any{"question": longQuestion})
	call(fixtures.ToolElicitChoices, map[string]any{})
	call(fixtures.ToolElicitForm, map[string]any{})
	call(fixtures.ToolElicitURL, map[string]any{})
	call(fixtures.ToolSampleTools, map[string]any{"question": "Weather in Paris?"})
	call(fixtures.ToolRoots, map[string]any{})
	call(fixtures.ToolError, map[string]any{})
	// A call with progress and a log message.
	if path == fixtures.PathStateful {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	slow := &mcp.CallToolParams{Name: fixtures.ToolSlow, Arguments: map[string]any{"steps": 3, "duration_ms": 30}}
	slow.SetProgressToken("showcase-progress")
	if _, err := cs.CallTool(ctx, slow); err != nil {
		t.Errorf("%s slow: %v", path, err)
	}
	r.sync(t)
}

// rawExchange posts body to the proxy with headers and returns the
// response's headers and body.
func (r *rig) rawExchange(t testing.TB, path, body string, headers map[string]string) (http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.px.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 20 * time.Second}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.Header, string(b)
}

const rawMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw-client","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// runRoutingMismatch sends 2026-07-28 requests whose routing headers
// disagree with their bodies: findings of the exchange.
func (r *rig) runRoutingMismatch(t testing.TB) {
	t.Helper()
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
	h["Mcp-Method"] = "tools/list"
	r.rawExchange(t, fixtures.PathStateless, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+rawMeta+`}}`, h)
	h["Mcp-Method"], h["Mcp-Name"] = "tools/list", "add"
	r.rawExchange(t, fixtures.PathStateless, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},`+rawMeta+`}}`, h)
	r.sync(t)
}

// runBadElicitAnswer is a legacy client that answers the showcase form
// with content its schema refuses (a colour not among the choices, a
// quantity past the maximum): the recorder's finding is on the answer.
func (r *rig) runBadElicitAnswer(t testing.TB) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	post := func(sid, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, r.px.URL+fixtures.PathStateful, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", protocol.V20251125)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"careless-client","version":"1"}}}`)
	sid := res.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	res = post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	call := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"elicit_choices","arguments":{}}}`)
	defer call.Body.Close()
	sc := bufio.NewScanner(call.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m.Method == protocol.MethodElicitation {
			a := post(sid, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"action":"accept","content":{"email":"ada@example.com","color":"purple","size":"m","toppings":["cheese"],"quantity":12}}}`)
			io.Copy(io.Discard, a.Body)
			a.Body.Close()
		}
		if m.Result != nil || m.Error != nil {
			break
		}
	}
	r.sync(t)
}

// seqWhere is the first message of session id for which pick is true.
func (r *rig) seqWhere(t testing.TB, id string, pick func(m *capture.Message) bool) uint64 {
	t.Helper()
	for m, err := range r.store.Messages(context.Background(), id, capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if pick(m) {
			return m.Seq
		}
	}
	t.Fatalf("session %s has no such message", id)
	return 0
}

// sessionOf is the newest session whose client is named client.
func (r *rig) sessionOf(t testing.TB, client, path string) *capture.Session {
	t.Helper()
	for s, err := range r.store.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Client.Name == client && s.Path == path {
			return s
		}
	}
	t.Fatalf("no session of %s on %s", client, path)
	return nil
}

// nestedForm is an elicitation form outside the flat-primitive rule: its
// address property is an object.
const nestedForm = `{"type":"object","properties":{"name":{"type":"string","title":"Your name"},"address":{"type":"object","title":"Address","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"required":["name"]}`

// runStdioChecks records, through the recorder's stdio leg, a hand-built
// session of a server named "checks": a call that sets off an elicitation
// whose form nests an object (a finding inside the call), a tool result
// with isError, a response to no request (a finding of its own), and two
// calls answered with JSON-RPC errors, the last message of all among them.
// It returns the session's id.
func (r *rig) runStdioChecks(t testing.TB) string {
	t.Helper()
	s := r.rec.OpenStream(&capture.StreamInfo{Name: "checks", Command: capture.Command{Args: []string{"checks-server"}}})
	c2s := func(line string) { s.Line(protocol.ClientToServer, []byte(line)) }
	s2c := func(line string) { s.Line(protocol.ServerToClient, []byte(line)) }
	c2s(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"checks-client","version":"1"}}}`)
	s2c(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"checks","version":"1"}}}`)
	c2s(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c2s(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ship","arguments":{}}}`)
	s2c(`{"jsonrpc":"2.0","id":100,"method":"elicitation/create","params":{"message":"Where should the parcel go?","requestedSchema":` + nestedForm + `}}`)
	c2s(`{"jsonrpc":"2.0","id":100,"result":{"action":"accept","content":{"name":"Ada","address":{"street":"12 St James's Square","city":"London"}}}}`)
	s2c(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"shipping to London"}]}}`)
	c2s(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"weigh","arguments":{}}}`)
	s2c(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"the scale is broken"}],"isError":true}}`)
	s2c(`{"jsonrpc":"2.0","id":77,"result":{}}`)
	c2s(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"track","arguments":{}}}`)
	s2c(`{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"no such parcel"}}`)
	c2s(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cancel","arguments":{}}}`)
	s2c(`{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"too late to cancel"}}`)
	s.Close("exited with code 0")
	r.sync(t)
	for sess, err := range r.store.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if sess.Route == "checks" {
			return sess.ID
		}
	}
	t.Fatal("no session of the checks server")
	return ""
}
