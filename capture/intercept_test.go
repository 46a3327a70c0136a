package capture_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/storetest"
	"github.com/mcptape/mcptape/protocol"
)

func TestParseInterceptRule(t *testing.T) {
	for _, c := range []struct {
		in                 string
		kind               capture.InterceptKind
		method, name, back string
		bad                bool
	}{
		{in: "tools/call:delete_*", method: "tools/call", name: "delete_*", back: "tools/call:delete_*"},
		{in: "elicitation/create", method: "elicitation/create", back: "elicitation/create"},
		{in: "response:tools/call", kind: capture.InterceptResponse, method: "tools/call", back: "response:tools/call"},
		{in: "request:sampling/*", method: "sampling/*", back: "sampling/*"},
		{in: "notification:notifications/progress", kind: capture.InterceptNotification, method: "notifications/progress", back: "notification:notifications/progress"},
		{in: "resources/read:file:///etc/*", method: "resources/read", name: "file:///etc/*", back: "resources/read:file:///etc/*"},
		{in: "*", back: "*"},
		{in: "", bad: true},
		{in: "tools/call:[", bad: true},
	} {
		r, err := capture.ParseInterceptRule(c.in)
		if c.bad {
			if !errors.Is(err, capture.ErrBadRule) {
				t.Errorf("%q: err %v, want ErrBadRule", c.in, err)
			}
			continue
		}
		if err != nil || r.Kind != c.kind || r.Method != c.method || r.Name != c.name || !r.Enabled || r.String() != c.back {
			t.Errorf("%q: %+v (%s), %v", c.in, r, r.String(), err)
		}
	}
}

func TestInterceptorMatch(t *testing.T) {
	var none *capture.Interceptor
	if none.Wants(capture.InterceptRequest) {
		t.Fatal("a nil interceptor wants requests")
	}
	rules := mustRules(t, "tools/call:delete_*", "response:tools/*", "elicitation/create")
	i, err := capture.NewInterceptor(rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !i.Wants(capture.InterceptRequest) || !i.Wants(capture.InterceptResponse) || i.Wants(capture.InterceptNotification) {
		t.Error("Wants does not follow the enabled rules")
	}
	for _, c := range []struct {
		kind         capture.InterceptKind
		method, name string
		want         bool
	}{
		{capture.InterceptRequest, "tools/call", "delete_file", true},
		{capture.InterceptRequest, "tools/call", "echo", false},
		{capture.InterceptRequest, "elicitation/create", "", true},
		{capture.InterceptResponse, "tools/list", "", true},
		{capture.InterceptResponse, "prompts/get", "greet", false},
		{capture.InterceptNotification, "notifications/progress", "", false},
	} {
		if _, got := i.Match(c.kind, c.method, c.name); got != c.want {
			t.Errorf("%v %s %s: %v, want %v", c.kind, c.method, c.name, got, c.want)
		}
	}
	// Switched off at run time, a rule no longer holds.
	rules[0].Enabled = false
	if err := i.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	if _, ok := i.Match(capture.InterceptRequest, "tools/call", "delete_file"); ok {
		t.Error("a disabled rule still matches")
	}
}

func mustRules(t *testing.T, specs ...string) []capture.InterceptRule {
	t.Helper()
	var out []capture.InterceptRule
	for _, s := range specs {
		r, err := capture.ParseInterceptRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// hold runs Hold in the background.
func hold(i *capture.Interceptor, ctx context.Context, m capture.HeldMessage) <-chan holdResult {
	ch := make(chan holdResult, 1)
	go func() {
		v, err := i.Hold(ctx, m)
		ch <- holdResult{v, err}
	}()
	return ch
}

type holdResult struct {
	v   capture.Verdict
	err error
}

// waitHeld waits, in a synctest bubble, until the Holds started have
// queued or left, and wants n held.
func waitHeld(t *testing.T, i *capture.Interceptor, n int) []capture.HeldMessage {
	t.Helper()
	synctest.Wait()
	h := i.Held()
	if len(h) != n {
		t.Fatalf("%d held, want %d", len(h), n)
	}
	return h
}

func TestInterceptorHold(t *testing.T) { synctest.Test(t, testInterceptorHold) }

func testInterceptorHold(t *testing.T) {
	i, err := capture.NewInterceptor(mustRules(t, "tools/call"), &capture.InterceptorOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := capture.HeldMessage{What: capture.HeldRequest, Method: "tools/call", Raw: json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)}
	got := hold(i, ctx, req)
	h := waitHeld(t, i, 1)
	if h[0].Deadline.Sub(h[0].Since) != time.Hour || len(h[0].Actions) != 4 {
		t.Errorf("held: %+v", h[0])
	}
	// Verdicts that break the rules leave it held, with a reason.
	for _, v := range []capture.Verdict{
		{Action: capture.ActionEdit, Raw: `{"jsonrpc":`},
		{Action: capture.ActionEdit, Raw: "  "},
		{Action: capture.ActionAnswer, Result: json.RawMessage(`[1]`)},
		{Action: capture.ActionFail, Error: &protocol.ErrorInfo{Message: "no code"}},
		{Action: "drop"},
	} {
		if err := i.Decide(h[0].ID, v); !errors.Is(err, capture.ErrBadVerdict) {
			t.Errorf("%+v: %v, want ErrBadVerdict", v, err)
		}
	}
	// Malformed on purpose is allowed.
	if err := i.Decide(h[0].ID, capture.Verdict{Action: capture.ActionEdit, Raw: `{"jsonrpc":`, Malformed: true}); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || r.v.Action != capture.ActionEdit || r.v.Raw != `{"jsonrpc":` {
		t.Errorf("Hold returned %+v", r)
	}
	if err := i.Decide(h[0].ID, capture.Verdict{Action: capture.ActionForward}); !errors.Is(err, capture.ErrNotHeld) {
		t.Errorf("deciding twice: %v", err)
	}
	// A response may not be answered in place.
	got = hold(i, ctx, capture.HeldMessage{What: capture.HeldResponse, Raw: json.RawMessage(`{}`)})
	h = waitHeld(t, i, 1)
	if err := i.Decide(h[0].ID, capture.Verdict{Action: capture.ActionAnswer, Result: json.RawMessage(`{}`)}); !errors.Is(err, capture.ErrBadVerdict) {
		t.Errorf("answering a response: %v", err)
	}
	// The side that waited went away: the message leaves the queue.
	cctx, cancel := context.WithCancel(ctx)
	got2 := hold(i, cctx, req)
	waitHeld(t, i, 2)
	cancel()
	if r := <-got2; !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled Hold: %+v", r)
	}
	waitHeld(t, i, 1)
	// Stopping sends what is held on unchanged, and what comes later.
	i.Close()
	if r := <-got; r.err != nil || r.v.Action != capture.ActionForward || !r.v.Stopped {
		t.Errorf("after Close: %+v", r)
	}
	if v, err := i.Hold(ctx, req); err != nil || !v.Stopped {
		t.Errorf("Hold after Close: %+v, %v", v, err)
	}
}

func TestInterceptorTimeout(t *testing.T) { synctest.Test(t, testInterceptorTimeout) }

func testInterceptorTimeout(t *testing.T) {
	i, err := capture.NewInterceptor(nil, &capture.InterceptorOptions{Timeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v, err := i.Hold(context.Background(), capture.HeldMessage{What: capture.HeldResponse, Raw: json.RawMessage(`{}`)})
	if err != nil || v.Action != capture.ActionForward || !v.TimedOut || time.Since(start) != 30*time.Millisecond {
		t.Errorf("after the timeout: %+v, %v", v, err)
	}
	if len(i.Held()) != 0 {
		t.Error("a timed-out message is still listed")
	}
}

// TestRecordIntercepted: a held request that a person edited is recorded
// as received (version 0, indexed) with a finding, and what went on as
// version 1 in a Badger store on disk; bytes that are not JSON become a
// message of their own beside it.
func TestRecordIntercepted(t *testing.T) {
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	rec, err := capture.NewRecorder(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)

	send := func(body string, in *capture.Intercepted, respNote *capture.Intercepted, resp string) {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7411/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(protocol.HeaderSessionID, "sess-1")
		req := capture.RequestFrom(r, []byte(body), true)
		req.Intercepted = in
		tap := rec.Begin(req)
		h := http.Header{"Content-Type": {"application/json"}}
		tap.Response(200, h, false)
		tap.Intercepted(protocol.ServerToClient, respNote)
		tap.ResponseBody([]byte(resp))
		tap.End("", false)
	}
	received := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc"}}}`
	sent := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/tmp/x"}}}`
	send(received, &capture.Intercepted{Note: "held 1s, then edited by a person and forwarded", Sent: []byte(sent)},
		&capture.Intercepted{Note: "held 2s, then failed by a person", Sent: []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}`)},
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`, &capture.Intercepted{Note: "held 1s, then edited by a person and forwarded, malformed on purpose", Sent: []byte(`{"jsonrpc":"2.0","id":2,"meth`)},
		nil, `{"jsonrpc":"2.0","id":2,"result":{}}`)
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	msgs := storetest.Messages(t, store)
	if len(msgs) != 5 {
		t.Fatalf("%d messages, want 5 (call, its answer, ping, what went on instead of it, its answer)", len(msgs))
	}
	call, answer, ping, sentPing := msgs[0], msgs[1], msgs[2], msgs[3]
	if call.Name != "delete_file" || call.Edited != 1 || string(call.Raw) != sent || !heldNote(call, "edited by a person") {
		t.Errorf("the call: %+v raw %s", call, call.Raw)
	}
	versions, err := store.MessageEdits(ctx, call.Seq)
	if err != nil || len(versions) != 2 || string(versions[0].Raw) != received || string(versions[1].Raw) != sent {
		t.Errorf("the call's versions: %+v, %v", versions, err)
	}
	if answer.Links.Request != call.Seq || answer.Edited != 1 || !strings.Contains(string(answer.Raw), `"code":-1`) || !heldNote(answer, "failed by a person") {
		t.Errorf("the answer: %+v raw %s", answer, answer.Raw)
	}
	if ping.Method != "ping" || ping.Edited != 0 || !heldNote(ping, "recorded as message #") {
		t.Errorf("the ping: %+v", ping)
	}
	if sentPing.Kind != protocol.KindInvalid || string(sentPing.Raw) != `{"jsonrpc":"2.0","id":2,"meth` || !heldNote(sentPing, "instead of message #") {
		t.Errorf("what went on instead of the ping: %+v raw %s", sentPing, sentPing.Raw)
	}
	if msgs[4].Links.Request != ping.Seq {
		t.Errorf("the ping's answer is not linked to it: %+v", msgs[4].Links)
	}
}

func heldNote(m *capture.Message, text string) bool {
	for _, f := range m.Findings {
		if f.Kind == capture.FindingIntercepted && strings.Contains(f.Message, text) {
			return true
		}
	}
	return false
}
