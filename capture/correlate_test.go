package capture_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// stream begins an exchange whose request body is body and whose response
// is an SSE stream, for tests that interleave streams.
func (d *driver) stream(body string, h map[string]string) *capture.Tap {
	req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:50000"
	for k, v := range h {
		req.Header.Set(k, v)
	}
	tap := d.rec.Begin(capture.RequestFrom(req, []byte(body), true))
	tap.Response(200, http.Header{"Content-Type": {"text/event-stream"}}, false)
	return tap
}

func (d *driver) tree(session string) (*capture.Tree, string) {
	d.t.Helper()
	tr, err := capture.SessionTree(context.Background(), d.store, session)
	if err != nil {
		d.t.Fatal(err)
	}
	var b strings.Builder
	tr.WriteText(&b, &capture.TextOptions{NoTimes: true})
	return tr, b.String()
}

func hasFinding(m *capture.Message, k capture.FindingKind) bool {
	for _, f := range m.Findings {
		if f.Kind == k {
			return true
		}
	}
	return false
}

// Two calls in flight with the same id in one session (legacy: a client
// that reuses an id): each result is on its own call's stream and links to
// that call, never to the other; the reuse is a finding. On 2026-07-28 the
// same id from the same fingerprint is another client (a second run of the
// same program): two sessions, no finding.
func TestEqualIDsOnInterleavedStreams(t *testing.T) {
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			d := newDriver(t, nil)
			h := map[string]string{"Content-Type": "application/json"}
			call := func(name string) string {
				return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,%s}}`, name, modernMeta)
			}
			if era == "legacy" {
				d.exchange(initialize(protocol.V20251125))
				h["Mcp-Session-Id"] = "sess-2025-11-25"
				call = func(name string) string {
					return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q}}`, name)
				}
			} else {
				h["Mcp-Protocol-Version"] = "2026-07-28"
			}
			a := d.stream(call("a"), h)
			b := d.stream(call("b"), h)
			a.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"from a"}]}}`)))
			b.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"from b"}]}}`)))
			b.End("", false)
			a.End("", false)
			ms := d.messages("s01")
			if era == "modern" {
				ms = append(ms, d.messages("s02")...)
			}
			reqs := map[string]*capture.Message{}
			for _, m := range ms {
				if m.Kind == protocol.KindRequest && m.Method == protocol.MethodToolsCall {
					reqs[m.Name] = m
				}
			}
			if reqs["a"] == nil || reqs["b"] == nil {
				t.Fatalf("calls a and b not both recorded: %d messages", len(ms))
			}
			switch {
			case era == "legacy" && !hasFinding(reqs["b"], capture.FindingDuplicateID):
				t.Errorf("the second call with id 1 has no duplicate-id finding: %q", findingsOf(reqs["b"]))
			case era == "modern" && reqs["a"].SessionID == reqs["b"].SessionID:
				t.Errorf("two 2026-07-28 calls with id 1 from one fingerprint are one session %s; want two", reqs["a"].SessionID)
			case era == "modern" && hasFinding(reqs["b"], capture.FindingDuplicateID):
				t.Errorf("a new client's call has a duplicate-id finding: %q", findingsOf(reqs["b"]))
			}
			for _, m := range ms {
				if m.Kind != protocol.KindResult || m.Method != protocol.MethodToolsCall {
					continue
				}
				want := reqs["a"]
				if strings.Contains(string(m.Raw), "from b") {
					want = reqs["b"]
				}
				if m.Links.Request != want.Seq || m.Name != want.Name {
					t.Errorf("result %s links to %d (%s), want %d (%s)", m.Raw, m.Links.Request, m.Name, want.Seq, want.Name)
				}
				if hasFinding(m, capture.FindingOrphanResponse) {
					t.Errorf("result %s is an orphan: %q", m.Raw, findingsOf(m))
				}
			}
			_, text := d.tree("s01")
			if era == "modern" {
				_, t2 := d.tree("s02")
				text += t2
			}
			for _, want := range []string{"tools/call a [success]\n    result: \"from a\"", "tools/call b [success]\n    result: \"from b\""} {
				if !strings.Contains(text, want) {
					t.Errorf("tree lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

// Server→client requests with equal ids on two legacy streams (a server
// breaking the rules): the client's answers, POSTed separately, say nothing
// of which stream they answer, so they are left unlinked with a finding
// rather than guessed.
func TestEqualServerIDsAreNotGuessed(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(initialize(protocol.V20251125))
	h := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-11-25"}
	a := d.stream(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"a"}}`, h)
	b := d.stream(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"b"}}`, h)
	a.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":0,"method":"roots/list"}`)))
	b.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":0,"method":"roots/list"}`)))
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: `{"jsonrpc":"2.0","id":0,"result":{"roots":[]}}`, status: 202})
	a.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":10,"result":{"content":[]}}`)))
	b.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":11,"result":{"content":[]}}`)))
	a.End("", false)
	b.End("", false)
	ms := d.messages("s01")
	var answer *capture.Message
	var roots []*capture.Message
	for _, m := range ms {
		switch {
		case m.Direction == protocol.ClientToServer && m.Kind == protocol.KindResult:
			answer = m
		case m.Method == protocol.MethodRootsList && m.Kind == protocol.KindRequest:
			roots = append(roots, m)
		}
	}
	if answer == nil || len(roots) != 2 {
		t.Fatalf("answer %v, %d roots/list requests", answer, len(roots))
	}
	if !hasFinding(roots[1], capture.FindingDuplicateID) {
		t.Errorf("the second server request with id 0 has no duplicate-id finding: %q", findingsOf(roots[1]))
	}
	if answer.Links.Request != 0 || !hasFinding(answer, capture.FindingDuplicateID) {
		t.Errorf("an answer to an id two requests share links to %d with findings %q; want no link and a duplicate-id finding",
			answer.Links.Request, findingsOf(answer))
	}
}

// requestState is optional in an input_required result: without it, a
// retry chains to the round whose inputRequests keys its inputResponses
// answer, for the same method and name; a retry whose keys differ, or for
// another tool, is not chained.
func TestMRTRRoundsWithoutRequestState(t *testing.T) {
	d := newDriver(t, nil)
	h := map[string]string{"Mcp-Name": "sample"}
	inputs := `{"jsonrpc":"2.0","id":%d,"result":{"resultType":"input_required","inputRequests":{"llm":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}}}}`
	d.exchange(modernCall(1, "tools/call", `"name":"sample"`, h, sse(fmt.Sprintf(inputs, 1))))
	d.exchange(modernCall(2, "tools/call", `"name":"sample","inputResponses":{"llm":{"role":"assistant","content":{"type":"text","text":"hi"}}}`, h,
		sse(fmt.Sprintf(inputs, 2))))
	d.exchange(modernCall(3, "tools/call", `"name":"sample","inputResponses":{"llm":{"role":"assistant","content":{"type":"text","text":"again"}}}`, h,
		sse(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"done"}]}}`)))
	// Another round trip whose retry answers keys the server did not ask.
	d.exchange(modernCall(4, "tools/call", `"name":"sample"`, h, sse(fmt.Sprintf(inputs, 4))))
	d.exchange(modernCall(5, "tools/call", `"name":"sample","inputResponses":{"other":{"action":"accept"}}`, h,
		sse(`{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`)))
	ms := d.messages("s01")
	req := map[string]*capture.Message{}
	for _, m := range ms {
		if m.Kind == protocol.KindRequest {
			req[string(m.ID)] = m
		}
	}
	if req["2"].Links.Previous != req["1"].Seq || req["3"].Links.Previous != req["2"].Seq {
		t.Errorf("rounds not chained: 2→%d (want %d), 3→%d (want %d)", req["2"].Links.Previous, req["1"].Seq, req["3"].Links.Previous, req["2"].Seq)
	}
	if req["4"].Links.Previous != 0 || req["5"].Links.Previous != 0 {
		t.Errorf("unrelated calls chained: 4→%d, 5→%d", req["4"].Links.Previous, req["5"].Links.Previous)
	}
	if !hasFinding(req["5"], capture.FindingRequestState) {
		t.Errorf("a retry whose inputResponses answer nothing recorded has no finding: %q", findingsOf(req["5"]))
	}
	tr, text := d.tree("s01")
	if len(tr.Roots) != 3 || len(tr.Roots[0].Rounds) != 3 || tr.Roots[0].Status != "success" {
		t.Fatalf("want the first call with 3 rounds, then two calls:\n%s", text)
	}
	if !strings.Contains(text, "+-- round 1 [input_required]\n  |    +-- sampling/createMessage [llm]\n  |          result: \"hi\"") {
		t.Errorf("round 1's input request lacks the answer from round 2:\n%s", text)
	}
}

// 2025-11-25 tasks: a task-augmented tools/call answered with
// {task:{taskId}}; tasks/get, tasks/result (whose result names the task in
// _meta related-task) and the status notification link to the call that
// created the task, and nest under it.
func TestLegacyTasksLinkByTaskID(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(initialize(protocol.V20251125))
	h := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-11-25"}
	post := func(body string, resp ...string) {
		d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, body: body,
			respHeader: map[string]string{"Content-Type": "text/event-stream"}, resp: resp})
	}
	post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"research","task":{"ttl":60000}}}`,
		sse(`{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"task-42","status":"working","createdAt":"2025-11-25T10:00:00Z","ttl":60000}}}`))
	post(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"task-42"}}`,
		sse(`{"jsonrpc":"2.0","id":3,"result":{"taskId":"task-42","status":"working"}}`))
	d.exchange(ex{method: "GET", path: "/mcp", reqHeader: map[string]string{"Mcp-Session-Id": "sess-2025-11-25"},
		respHeader: map[string]string{"Content-Type": "text/event-stream"},
		resp:       []string{sse(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"task-42","status":"completed"}}`)}})
	post(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"task-42"}}`,
		sse(`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"found it"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task-42"}}}}`))
	ms := d.messages("s01")
	var call *capture.Message
	for _, m := range ms {
		if m.Method == protocol.MethodToolsCall && m.Kind == protocol.KindRequest {
			call = m
		}
	}
	if call == nil {
		t.Fatal("no tools/call recorded")
	}
	for _, m := range ms {
		switch {
		case m.Kind == protocol.KindRequest && (m.Method == "tasks/get" || m.Method == "tasks/result"),
			m.Kind == protocol.KindNotification && m.Method == "notifications/tasks/status":
			if m.Links.Task != call.Seq {
				t.Errorf("%s %s links to task %d, want the call that created it (%d)", m.Kind, m.Method, m.Links.Task, call.Seq)
			}
		}
	}
	_, text := d.tree("s01")
	for _, want := range []string{"[>] tools/call research [success]", "  +-- tasks/get", "  +-- notifications/tasks/status", "  +-- tasks/result"} {
		if !strings.Contains(text, want) {
			t.Errorf("tree lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "[>]") != 2 {
		t.Errorf("want two roots (initialize and the call), the task's requests nested:\n%s", text)
	}
}

// Recording noise a replay would trip on: a plain-text answer on the MCP
// path (a server's 405 to a GET) is kept as a frame, not flagged as an
// invalid JSON-RPC message; a request the proxy refused itself is filed
// with its client's plain HTTP, not in the MCP session of that client; and
// a server that mints the same Mcp-Session-Id again after DELETE gets a new
// session, not the closed one.
func TestRecordingNoise(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(initialize(protocol.V20251125))
	key := map[string]string{"Mcp-Session-Id": "sess-" + protocol.V20251125, "Accept": "application/json, text/event-stream"}
	d.exchange(ex{method: "GET", path: "/mcp", reqHeader: key, status: 405,
		respHeader: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, resp: []string{"Method Not Allowed\n"}})
	req := httptest.NewRequest("POST", "http://evil.example.com/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.RemoteAddr = "127.0.0.1:50000"
	req.Header.Set("Mcp-Session-Id", "sess-"+protocol.V20251125)
	r := capture.RequestFrom(req, []byte{}, true)
	r.Refused = true
	tap := d.rec.Begin(r)
	tap.Response(403, http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, true)
	tap.ResponseBody([]byte("mcptape: refused: Host \"evil.example.com\" is not a loopback name\n"))
	tap.End("", false)
	d.exchange(ex{method: "DELETE", path: "/mcp", reqHeader: key, status: 200})
	d.exchange(initialize(protocol.V20251125)) // the same id again
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-" + protocol.V20251125},
		body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, respHeader: map[string]string{"Content-Type": "application/json"},
		resp: []string{`{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`}})

	first := d.messages("s01")
	for _, m := range first {
		if len(m.Findings) > 0 {
			t.Errorf("s01 message %d (%s %s) has findings %q", m.Seq, m.Kind, m.Raw, findingsOf(m))
		}
		if m.Method == "tools/list" {
			t.Errorf("s01, closed by DELETE, got a later session's %s", m.Raw)
		}
	}
	var frame *capture.Message
	for _, m := range first {
		if m.Kind == protocol.KindFrame {
			frame = m
		}
	}
	if frame == nil || string(frame.Raw) != "Method Not Allowed\n" {
		t.Errorf("the 405's text is not kept as a frame in s01: %+v", frame)
	}
	// Its plain answer is kept as a frame (the bodies of plain HTTP
	// exchanges are), no MCP message.
	if s := d.session("s02"); s.Opening != "http" || s.Messages != 1 {
		t.Errorf("the refused request's session: opening %q, %d messages; want an http session with the refusal alone", s.Opening, s.Messages)
	}
	for _, m := range d.messages("s02") {
		if m.Kind != protocol.KindFrame || !strings.Contains(string(m.Raw), "is not a loopback name") {
			t.Errorf("the refused request's session holds %s %q, want the refusal's text as a frame", m.Kind, m.Raw)
		}
	}
	third := d.messages("s03")
	if len(third) != 4 || d.session("s03").Key == "" {
		t.Errorf("the session minted again holds %d messages (key %q), want 4", len(third), d.session("s03").Key)
	}
}

// A server that answers a call after the client's notifications/cancelled
// (go-sdk's server does when the notification wins the race with the
// closed stream): the call stays cancelled in the tree, since the client
// ignores a late answer, and the answer is shown with a note saying so.
func TestAnswerAfterCancellation(t *testing.T) {
	d := newDriver(t, nil)
	d.exchange(initialize(protocol.V20251125))
	h := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-11-25"}
	call := d.stream(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}`, h)
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: h, status: 202,
		body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"gave up"}}`})
	call.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"context canceled"}],"isError":true}}`)))
	call.End("", false)
	d.messages("s01")
	_, text := d.tree("s01")
	want := "tools/call slow [cancelled]\n    result: \"context canceled\"\n    note: answered (isError) after the client cancelled it"
	if !strings.Contains(text, want) {
		t.Errorf("tree lacks %q:\n%s", want, text)
	}
}

// The proxy hands the recorder the end of a round's result once the
// client has read it, so the client's retry may be recorded before the
// input_required result it answers: it is chained all the same, without a
// finding for a requestState that matched nothing yet.
func TestMRTRRetryBeforeItsRound(t *testing.T) {
	d := newDriver(t, nil)
	h := map[string]string{"Mcp-Name": "ask"}
	round := modernCall(1, "tools/call", `"name":"ask"`, h)
	tap := d.begin(round)
	tap.Response(200, http.Header{"Content-Type": {"text/event-stream"}}, false)
	// The retry, recorded whole while the first round's result is still
	// to come; mcptape sent it itself (--answer), which its record says.
	retry := modernCall(2, "tools/call", `"name":"ask","requestState":"st-1","inputResponses":{"llm":{"role":"assistant","content":{"type":"text","text":"hi"}}}`, h)
	hr := httptest.NewRequest(retry.method, "http://127.0.0.1:7411"+retry.path, strings.NewReader(retry.body))
	hr.RemoteAddr = "127.0.0.1:50000"
	for k, v := range retry.reqHeader {
		hr.Header.Set(k, v)
	}
	in := capture.RequestFrom(hr, []byte(retry.body), true)
	in.Intercepted = &capture.Intercepted{Note: "sent by mcptape, not by the client"}
	rt := d.rec.Begin(in)
	rt.Response(200, http.Header{"Content-Type": {"text/event-stream"}}, false)
	rt.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"done"}]}}`)))
	rt.End("", false)
	tap.ResponseBody([]byte(sse(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"st-1","inputRequests":{"llm":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}}}}`)))
	tap.End("", false)
	reqs := map[string]*capture.Message{}
	for _, m := range d.messages("s01") {
		if m.Kind == protocol.KindRequest {
			reqs[string(m.ID)] = m
		}
	}
	if !hasFinding(reqs["2"], capture.FindingIntercepted) {
		t.Errorf("the retry stored again lost what became of it (sent by mcptape): %q", findingsOf(reqs["2"]))
	}
	if req := reqs; req["2"] == nil || req["2"].Links.Previous != req["1"].Seq {
		t.Fatalf("the retry recorded before its round is not chained to it; its findings: %q", findingsOf(req["2"]))
	}
	if hasFinding(reqs["2"], capture.FindingRequestState) {
		t.Errorf("the retry keeps a finding for a requestState its round holds: %q", findingsOf(reqs["2"]))
	}
	if s := d.session("s01"); s.Findings != 1 {
		t.Errorf("the session counts %d findings, want the one saying mcptape sent the retry", s.Findings)
	}
}
