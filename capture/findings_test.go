package capture_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

func findingsOf(m *capture.Message) string {
	var out []string
	for _, f := range m.Findings {
		out = append(out, string(f.Kind)+": "+f.Message)
	}
	return strings.Join(out, "\n")
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`

func modernCall(id int, method, params string, headers map[string]string, resp ...string) ex {
	h := map[string]string{"Content-Type": "application/json", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	for k, v := range headers {
		h[k] = v
	}
	if params != "" {
		params += ","
	}
	return ex{method: "POST", path: "/mcp", reqHeader: h,
		body:       fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, params, modernMeta),
		respHeader: map[string]string{"Content-Type": "text/event-stream"}, resp: resp}
}

func sse(s string) string { return "data: " + s + "\n\n" }

func compact(t *testing.T, s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestHeaderAndSchemaFindings(t *testing.T) {
	d := newDriver(t, nil)
	tools := `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[
	 {"name":"deploy","inputSchema":{"type":"object","properties":{
	   "region":{"type":"string","x-mcp-header":"Region"},
	   "count":{"type":"integer","x-mcp-header":"Count"},
	   "ratio":{"type":"number","x-mcp-header":"Ratio"},
	   "tags":{"type":"array","items":{"type":"string","x-mcp-header":"Tag"}}},
	   "required":["region"]},
	  "outputSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}},
	 {"name":"dup","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}},
	 {"name":"bad","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"has space"}}}}]}}`
	d.exchange(modernCall(1, "tools/list", "", nil, sse(compact(t, tools))))
	d.exchange(modernCall(2, "tools/call", `"name":"deploy","arguments":{"region":"Zürich","count":3}`,
		map[string]string{"Mcp-Name": "deploy", "Mcp-Param-Region": protocol.EncodeHeaderValue("Zürich"), "Mcp-Param-Count": "3"},
		sse(`{"jsonrpc":"2.0","id":2,"result":{"content":[],"structuredContent":{"ok":true}}}`)))
	d.exchange(modernCall(3, "tools/call", `"name":"deploy","arguments":{"region":"eu","count":3}`,
		map[string]string{"Mcp-Name": "deploy", "Mcp-Param-Region": "us"},
		sse(`{"jsonrpc":"2.0","id":3,"result":{"content":[],"structuredContent":{"ok":"yes"}}}`)))
	d.exchange(modernCall(4, "tools/call", `"name":"deploy","arguments":{"count":"three"}`,
		map[string]string{"Mcp-Name": "other", "Mcp-Param-Count": "three", "Mcp-Param-Region": "eu"},
		sse(`{"jsonrpc":"2.0","id":4,"result":{"content":[]}}`)))
	ms := d.messages("s01")
	if len(ms) != 8 {
		t.Fatalf("%d messages", len(ms))
	}
	list := findingsOf(ms[1])
	for _, want := range []string{`"Ratio" on ratio: the property's type is "number"`, `"Tag" on tags/items is not reachable`, `declared twice`, `"has space" on a is not an HTTP token`} {
		if !strings.Contains(list, want) {
			t.Errorf("tools/list findings lack %q:\n%s", want, list)
		}
	}
	if f := findingsOf(ms[2]) + findingsOf(ms[3]); f != "" {
		t.Errorf("a conforming call got findings:\n%s", f)
	}
	bad := findingsOf(ms[4])
	if !strings.Contains(bad, `Mcp-Param-Region is "us" but argument region of "deploy" is eu`) || !strings.Contains(bad, "Mcp-Param-Count is missing") {
		t.Errorf("mismatching headers:\n%s", bad)
	}
	if !strings.Contains(findingsOf(ms[5]), "does not validate against its outputSchema") {
		t.Errorf("bad structuredContent: %q", findingsOf(ms[5]))
	}
	worst := findingsOf(ms[6])
	for _, want := range []string{"do not validate against its inputSchema", `Mcp-Param-Region is sent but argument region of "deploy" is absent`} {
		if !strings.Contains(worst, want) {
			t.Errorf("call 4 findings lack %q:\n%s", want, worst)
		}
	}
	if !strings.Contains(findingsOf(ms[7]), "declares an outputSchema but its result has no structuredContent") {
		t.Errorf("missing structuredContent: %q", findingsOf(ms[7]))
	}
	var x *capture.Exchange
	for e := range d.store.Exchanges(context.Background(), "s01") {
		if e.ID == ms[6].ExchangeID {
			x = e
		}
	}
	if x == nil || len(x.FindingList) == 0 || !strings.Contains(x.FindingList[0].Message, `Mcp-Name is "other"`) {
		t.Errorf("Mcp-Name mismatch not on the exchange: %+v", x)
	}
}

func TestCapabilityAndStreamFindings(t *testing.T) {
	d := newDriver(t, nil)
	init := initialize(protocol.V20251125) // declares no capabilities
	d.exchange(init)
	h := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-11-25"}
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`,
		respHeader: map[string]string{"Content-Type": "text/event-stream"},
		resp: []string{sse(`{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`),
			sse(`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"mode":"url","message":"m","url":"https://x.invalid","elicitationId":"e1"}}`),
			sse(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)}})
	d.exchange(ex{method: "GET", path: "/mcp", reqHeader: map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": "sess-2025-11-25"},
		respHeader: map[string]string{"Content-Type": "text/event-stream"},
		resp: []string{sse(`{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"e1"}}`),
			sse(`{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"nobody"}}`)}})
	ms := d.messages("s01")
	// 0 init 1 result 2 call 3 sampling 4 elicitation 5 result 6 complete 7 complete(orphan)
	if !strings.Contains(findingsOf(ms[3]), "did not declare the sampling capability") {
		t.Errorf("sampling: %q", findingsOf(ms[3]))
	}
	if !strings.Contains(findingsOf(ms[4]), "did not declare the elicitation capability") {
		t.Errorf("elicitation: %q", findingsOf(ms[4]))
	}
	if ms[6].Links.Request != ms[4].Seq {
		t.Errorf("elicitation/complete linked to %d, want the elicitation request %d", ms[6].Links.Request, ms[4].Seq)
	}
	if !strings.Contains(findingsOf(ms[7]), `elicitationId "nobody"`) {
		t.Errorf("unknown elicitationId: %q", findingsOf(ms[7]))
	}

	// 2026: input requests against the call's own capabilities; a listen
	// stream's rules; an altered requestState.
	m := newDriver(t, nil)
	m.exchange(modernCall(1, "tools/call", `"name":"ask"`, map[string]string{"Mcp-Name": "ask"},
		sse(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"st-1","inputRequests":{"login":{"method":"elicitation/create","params":{"mode":"form","message":"m","requestedSchema":{"type":"object","properties":{}}}},"llm":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}}}}`)))
	m.exchange(modernCall(2, "tools/call", `"name":"ask","requestState":"st-forged","inputResponses":{}`, map[string]string{"Mcp-Name": "ask"},
		sse(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)))
	m.exchange(modernCall(3, "subscriptions/listen", `"notifications":{"toolsListChanged":true}`, nil,
		sse(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":3}}}`),
		sse(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":9}}}`),
		sse(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"_meta":{"io.modelcontextprotocol/subscriptionId":3}}}`)))
	mm := m.messages("s01")
	if f := findingsOf(mm[1]); !strings.Contains(f, `input request "login": elicitation/create asked of a client that did not declare the elicitation capability`) || strings.Contains(f, "llm") {
		t.Errorf("input requests vs the call's capabilities: %q", f)
	}
	if !strings.Contains(findingsOf(mm[2]), "requestState matches no input_required result") || mm[2].Links.Previous != 0 {
		t.Errorf("forged requestState: %q, previous %d", findingsOf(mm[2]), mm[2].Links.Previous)
	}
	if f := findingsOf(mm[5]); f != "" {
		t.Errorf("acknowledgement: %q", f)
	}
	if !strings.Contains(findingsOf(mm[6]), "subscriptionId 9 differs from the id 3") {
		t.Errorf("wrong subscription id: %q", findingsOf(mm[6]))
	}
	if !strings.Contains(findingsOf(mm[7]), "on a subscriptions/listen stream") {
		t.Errorf("progress on a listen stream: %q", findingsOf(mm[7]))
	}
}

// Hostile ordering: an answer that the recorder indexes before the request
// it answers, interleaved streams of two calls with equal ids on both
// sides, a request never answered, a response on the GET stream.
func TestHostileOrdering(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(initialize(protocol.V20251125))
	h := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-11-25"}
	// Call 9's stream carries sampling request 5, but the client's answer
	// POST reaches the recorder before the stream event does.
	early := d.stream(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t9"}}`, h)
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":5,"result":{"role":"assistant","content":{"type":"text","text":"early"}}}`, status: 202})
	early.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}`)))
	early.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":9,"result":{"content":[]}}`)))
	early.End("", false)
	// Two calls whose streams interleave; each carries a server request
	// with id 0 and 1, and the client's ids are 10 and 11.
	begin := func(id int) *capture.Tap {
		req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(""))
		req.RemoteAddr = "127.0.0.1:1"
		for k, v := range h {
			req.Header.Set(k, v)
		}
		tap := d.rec.Begin(capture.RequestFrom(req, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t%d"}}`, id, id)), true))
		tap.Response(200, http.Header{"Content-Type": {"text/event-stream"}}, false)
		return tap
	}
	a, b := begin(10), begin(11)
	a.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":0,"method":"roots/list"}`)))
	b.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)))
	b.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":11,"result":{"content":[]}}`)))
	a.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":10,"result":{"content":[]}}`)))
	a.End("", false)
	b.End("", false)
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}`, status: 202})
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":0,"result":{"roots":[]}}`, status: 202})
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"never"}}`,
		respHeader: map[string]string{"Content-Type": "text/event-stream"}, resp: []string{": still working\n\n"}})
	d.exchange(ex{method: "GET", path: "/mcp", reqHeader: map[string]string{"Mcp-Session-Id": "sess-2025-11-25"},
		respHeader: map[string]string{"Content-Type": "text/event-stream"}, resp: []string{sse(`{"jsonrpc":"2.0","id":12,"result":{}}`)}})
	ms := d.messages("s01")
	by := map[string]*capture.Message{}
	for _, m := range ms {
		key := fmt.Sprintf("%v %v %s %s", m.Direction, m.Kind, m.Method, m.ID)
		if m.Name != "" {
			key += " " + m.Name
		}
		by[key] = m
	}
	get := func(k string) *capture.Message {
		m := by[k]
		if m == nil {
			t.Fatalf("no message %q; have %v", k, keys(by))
		}
		return m
	}
	sampling, answer := get("s2c request sampling/createMessage 5"), get("c2s result sampling/createMessage 5")
	if answer.Links.Request != sampling.Seq || answer.Seq > sampling.Seq || len(answer.Findings) != 0 {
		t.Errorf("early answer (seq %d): links %+v findings %q; want a link to the sampling request (seq %d) and no finding",
			answer.Seq, answer.Links, findingsOf(answer), sampling.Seq)
	}
	if sampling.Links.Parent != get("c2s request tools/call 9 t9").Seq || hasFinding(sampling, capture.FindingDuplicateID) {
		t.Errorf("the early-answered sampling request: parent %d findings %q", sampling.Links.Parent, findingsOf(sampling))
	}
	ca, cb := get("c2s request tools/call 10 t10"), get("c2s request tools/call 11 t11")
	ra, rb := get("s2c request roots/list 0"), get("s2c request roots/list 1")
	if ra.Links.Parent != ca.Seq || rb.Links.Parent != cb.Seq {
		t.Errorf("interleaved streams: roots/list 0 under %d (want %d), 1 under %d (want %d)", ra.Links.Parent, ca.Seq, rb.Links.Parent, cb.Seq)
	}
	if get("c2s result roots/list 1").Links.Request != rb.Seq || get("c2s result roots/list 0").Links.Request != ra.Seq {
		t.Error("answers to interleaved server requests linked wrongly")
	}
	if get("s2c result tools/call 10 t10").Links.Request != ca.Seq || get("s2c result tools/call 11 t11").Links.Request != cb.Seq {
		t.Error("results of interleaved calls linked wrongly")
	}
	if !strings.Contains(findingsOf(get("s2c result tools/call 12 never")), "standalone GET stream") {
		t.Error("a response on the GET stream has no finding")
	}
	tr, err := capture.SessionTree(context.Background(), d.store, "s01")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	tr.WriteText(&text, &capture.TextOptions{NoTimes: true})
	if !strings.Contains(text.String(), "[>] tools/call t9 [success]\n  +-- sampling/createMessage\n        result: \"early\"\n") ||
		strings.Contains(text.String(), "orphan") {
		t.Errorf("the early answer is not shown under its sampling request:\n%s", text.String())
	}
}

func keys(m map[string]*capture.Message) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestUnansweredAndTasks(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(modernCall(1, "tools/call", `"name":"research"`, map[string]string{"Mcp-Name": "research"},
		sse(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"task-7","status":"working"}}`)))
	d.exchange(modernCall(2, "tasks/get", `"taskId":"task-7"`, nil, sse(`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","taskId":"task-7","status":"completed"}}`)))
	d.exchange(modernCall(3, "tools/list", "", nil, ": hanging\n\n"))
	ms := d.messages("s01")
	if ms[2].Links.Task != ms[0].Seq {
		t.Errorf("tasks/get links to %d, want the call that created the task (%d)", ms[2].Links.Task, ms[0].Seq)
	}
	tr, err := capture.SessionTree(context.Background(), d.store, "s01")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	tr.WriteText(&text, &capture.TextOptions{NoTimes: true})
	out := text.String()
	if !strings.Contains(out, "+-- tasks/get") {
		t.Errorf("tasks/get not nested under the call that created the task:\n%s", out)
	}
	if !strings.Contains(out, "unanswered: no response") {
		t.Errorf("the hanging tools/list has no unanswered finding:\n%s", out)
	}
}

// TestElicitationFindings: a form elicitation's answer is validated against
// its requestedSchema when it is recorded, on both eras; a schema outside
// the flat-primitive rule is a finding; and the session, the tree and the
// messages count the same findings, those of exchanges included.
func TestElicitationFindings(t *testing.T) {
	const form = `{"type":"object","properties":{"name":{"type":"string","title":"Name"},"age":{"type":"integer","minimum":0},"color":{"type":"string","enum":["red","blue"]}},"required":["name"]}`
	const nested = `{"type":"object","properties":{"address":{"type":"object","properties":{"city":{"type":"string"}}},"tags":{"type":"array","items":{"type":"string"}}}}`
	d := newDriver(t, nil)
	init := initialize(protocol.V20251125)
	init.body = strings.Replace(init.body, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1)
	d.exchange(init)
	h := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-11-25"}
	elicit := func(id int, schema string) string {
		return sse(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"elicitation/create","params":{"mode":"form","message":"who?","requestedSchema":%s}}`, id, schema))
	}
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask"}}`,
		respHeader: map[string]string{"Content-Type": "text/event-stream"},
		resp:       []string{elicit(10, form), elicit(11, form), elicit(12, form), elicit(13, nested)}})
	answer := func(id int, result string) {
		d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, id, result), status: 202})
	}
	answer(10, `{"action":"accept","content":{"name":"Ada","age":36,"color":"red"}}`)
	answer(11, `{"action":"accept","content":{"age":"old","color":"green"}}`)
	answer(12, `{"action":"decline","content":{"name":"Ada"}}`)
	answer(13, `{"action":"accept","content":{"address":{"city":"Paris"}}}`)
	ms := d.messages("s01")
	by := map[string]*capture.Message{}
	for _, m := range ms {
		if m.Direction == protocol.ClientToServer && m.Kind == protocol.KindResult {
			by["answer "+string(m.ID)] = m
		}
		if m.Method == protocol.MethodElicitation && m.Kind == protocol.KindRequest {
			by["ask "+string(m.ID)] = m
		}
	}
	if f := findingsOf(by["answer 10"]); f != "" {
		t.Errorf("a valid answer got findings: %q", f)
	}
	// Every problem, in name order, the same on every run.
	if f := findingsOf(by["answer 11"]); !strings.Contains(f, "elicitation answer does not validate against the form's requestedSchema: \"name\" is required; \"age\": ") ||
		!strings.Contains(f, "; \"color\": ") {
		t.Errorf("an answer without the required name, with a wrong age and color: %q", f)
	}
	if f := findingsOf(by["answer 12"]); !strings.Contains(f, `elicitation answer "decline" carries content`) {
		t.Errorf("a decline with content: %q", f)
	}
	if f := findingsOf(by["ask 10"]); f != "" {
		t.Errorf("a flat form got findings: %q", f)
	}
	f := findingsOf(by["ask 13"])
	for _, want := range []string{`property "address" is an object; a form is flat`, `property "tags" is an array that is not a multi-select enum`} {
		if !strings.Contains(f, "elicitation form outside the flat-primitive rule: "+want) {
			t.Errorf("the nested form's findings lack %q: %q", want, f)
		}
	}

	// 2026-07-28: the form is an MRTR input request; its answer comes in
	// the retry's inputResponses. One exchange also has a routing header
	// that disagrees with its body: a finding of the exchange.
	m := newDriver(t, nil)
	m.exchange(modernCall(1, "tools/call", `"name":"ask"`, map[string]string{"Mcp-Name": "ask"},
		sse(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"st-1","inputRequests":{"who":{"method":"elicitation/create","params":{"mode":"form","message":"m","requestedSchema":`+form+`}},"where":{"method":"elicitation/create","params":{"message":"m","requestedSchema":`+nested+`}}}}}`)))
	m.exchange(modernCall(2, "tools/call", `"name":"ask","requestState":"st-1","inputResponses":{"who":{"action":"accept","content":{"name":7}},"where":{"action":"cancel"}}`,
		map[string]string{"Mcp-Name": "ask"},
		sse(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)))
	m.exchange(modernCall(3, "tools/list", "", map[string]string{"Mcp-Method": "tools/call"},
		sse(`{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}`)))
	mm := m.messages("s01")
	if f := findingsOf(mm[1]); !strings.Contains(f, `input request "where": elicitation form outside the flat-primitive rule: property "address"`) || strings.Contains(f, `"who": elicitation form`) {
		t.Errorf("the input_required result's findings: %q", f)
	}
	if f := findingsOf(mm[2]); !strings.Contains(f, `input response "who": elicitation answer does not validate`) || strings.Contains(f, `"where"`) {
		t.Errorf("the retry's findings: %q", f)
	}

	for _, dr := range []*driver{d, m} {
		s := dr.session("s01")
		tr, _ := dr.tree("s01")
		onMessages := 0
		for _, x := range dr.messages("s01") {
			onMessages += len(x.Findings)
		}
		onNodes := 0
		for _, r := range tr.Roots {
			r.Walk(func(n *capture.Node) {
				for _, f := range n.Findings {
					if f.Kind != capture.FindingUnanswered {
						onNodes++
					}
				}
			})
		}
		if s.Findings != tr.Findings || onNodes != s.Findings || s.Findings == 0 {
			t.Errorf("session %d findings, tree %d, on its nodes %d (on messages %d): want one count", s.Findings, tr.Findings, onNodes, onMessages)
		}
	}
	// The exchange's finding is the header-mismatch one, on its call's node.
	tr, _ := m.tree("s01")
	var onList string
	for _, r := range tr.Roots {
		if r.Method == "tools/list" {
			for _, f := range r.Findings {
				onList += string(f.Kind) + ": " + f.Message
			}
		}
	}
	if !strings.Contains(onList, `header-mismatch: Mcp-Method is "tools/call" but the body's method is "tools/list"`) {
		t.Errorf("the tools/list node's findings: %q", onList)
	}
}
