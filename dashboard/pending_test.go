package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/protocol"
)

// samplingParams is what a live server asks, with hostile text in it.
const samplingParams = `{"messages":[{"role":"user","content":{"type":"text","text":"Say hello <script>alert(1)</script>"}}],` +
	`"systemPrompt":"You are <b>bold</b>","modelPreferences":{"hints":[{"name":"claude-3"}]},"maxTokens":100}`

const goodAnswer = `{"role":"assistant","content":{"type":"text","text":"hello from a person"},"model":"human","stopReason":"endTurn"}`

type pendingList struct {
	Active   bool `json:"active"`
	Requests []struct {
		ID     string          `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Since  time.Time       `json:"since"`
		AgeMs  int64           `json:"ageMs"`
	} `json:"requests"`
}

type asked struct {
	res json.RawMessage
	err error
}

// ask runs p.Ask in the background.
func ask(ctx context.Context, p *dashboard.Pending, method, params string) chan asked {
	ch := make(chan asked, 1)
	go func() {
		res, err := p.Ask(ctx, method, json.RawMessage(params))
		ch <- asked{res, err}
	}()
	return ch
}

// The pending tests run in a synctest bubble, on its clock, the dashboard
// reached in memory (newMemDash): once every goroutine is blocked
// (synctest.Wait), whatever was asked is listed and whatever was answered
// has returned, with no polling and no sleeping.

// waitPending lists the pending requests once everything has settled,
// and wants n of them.
func waitPending(t *testing.T, c *apiClient, n int) pendingList {
	t.Helper()
	synctest.Wait()
	var l pendingList
	c.get("/api/v1/pending", &l)
	if len(l.Requests) != n {
		t.Fatalf("%d pending requests, want %d", len(l.Requests), n)
	}
	return l
}

func stillWaiting(t *testing.T, ch chan asked) {
	t.Helper()
	synctest.Wait()
	select {
	case a := <-ch:
		t.Fatalf("Ask returned before an answer: %s, %v", a.res, a.err)
	default:
	}
}

// answered is what Ask returned, once everything has settled.
func answered(t *testing.T, ch chan asked) asked {
	t.Helper()
	synctest.Wait()
	select {
	case a := <-ch:
		return a
	default:
		t.Fatal("Ask did not return after the answer")
		return asked{}
	}
}

func TestPendingAPI(t *testing.T) { synctest.Test(t, testPendingAPI) }

func testPendingAPI(t *testing.T) {
	p := dashboard.NewPending()
	t.Cleanup(func() { p.Close() })
	_, c := newMemDash(t, smallStore(t), &dashboard.Options{Pending: p})

	var info struct {
		Features map[string]bool `json:"features"`
	}
	c.get("/api/v1/info", &info)
	if !info.Features["pending"] {
		t.Errorf("info: features %v lack pending", info.Features)
	}
	if l := waitPending(t, c, 0); !l.Active {
		t.Errorf("an empty queue is not active: %+v", l)
	}

	// Ask blocks until a POST answers it.
	ch := ask(context.Background(), p, protocol.MethodSampling, samplingParams)
	l := waitPending(t, c, 1)
	q := l.Requests[0]
	if q.Method != "sampling/createMessage" || q.ID == "" || q.AgeMs < 0 || q.Since.IsZero() {
		t.Errorf("listed %+v", q)
	}
	var got, want any
	_ = json.Unmarshal(q.Params, &got)
	_ = json.Unmarshal([]byte(samplingParams), &want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("params (-asked +listed):\n%s", d)
	}
	stillWaiting(t, ch)

	// Bad answers: 400 with a message that says what to fix, and the
	// request stays pending.
	for _, tc := range []struct {
		body string
		says string
	}{
		{`{"result":[1,2]}`, "result must be a JSON object, not a list"},
		{`{"result":"hi"}`, "result must be a JSON object, not a string"},
		{`{"result":{"content":{"type":"text","text":"x"},"model":"m"}}`, `result.role is missing or wrong`},
		{`{"result":{"role":"assistant","model":"m"}}`, "result.content is missing"},
		{`{"result":{"role":"assistant","content":{"text":"x"},"model":"m"}}`, "block 0 has no type"},
		{`{"result":{"role":"assistant","content":[],"model":"m"}}`, "non-empty list"},
		{`{"result":{"role":"assistant","content":{"type":"text","text":"x"}}}`, "result.model is missing"},
		{`{"result":{"role":"assistant","content":{"type":"text","text":"x"},"model":""}}`, "result.model is missing"},
		{`{"result":` + goodAnswer + `,"error":{"code":-1,"message":"no"}}`, "not both"},
		{`{}`, `give {"result": {...}} or {"error"`},
		{`{"error":{"message":"no"}}`, "error.code is missing"},
		{`{"error":{"code":-1}}`, "error.message is missing"},
		{`{"result":{"role":"assistant"`, "reading the request body"},
		{`{"answer":{}}`, "unknown field"},
	} {
		code, b, _ := c.do(http.MethodPost, "/api/v1/pending/"+q.ID, []byte(tc.body), nil)
		var e struct{ Error, Code string }
		_ = json.Unmarshal(b, &e)
		if code != http.StatusBadRequest || e.Code != "bad_request" || !strings.Contains(e.Error, tc.says) {
			t.Errorf("answer %s: %d %s, want 400 saying %q", tc.body, code, b, tc.says)
		}
	}
	waitPending(t, c, 1)
	stillWaiting(t, ch)

	// CSRF and origin checks, as for every change.
	for name, hdr := range map[string]map[string]string{
		"no CSRF token":  {"X-CSRF-Token": ""},
		"wrong token":    {"X-CSRF-Token": strings.Repeat("0", 40)},
		"another origin": {"Origin": "http://evil.example"},
		"another site":   {"Sec-Fetch-Site": "cross-site"},
	} {
		code, b, _ := c.do(http.MethodPost, "/api/v1/pending/"+q.ID, []byte(`{"result":`+goodAnswer+`}`), hdr)
		if code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", name, code, b)
		}
	}
	waitPending(t, c, 1)
	stillWaiting(t, ch)

	// A good answer: Ask returns it, the queue empties, a second answer
	// finds nothing.
	var ok map[string]string
	c.send(http.MethodPost, "/api/v1/pending/"+q.ID, []byte(`{"result":`+goodAnswer+`}`), &ok)
	if ok["answered"] != q.ID {
		t.Errorf("answer: %v", ok)
	}
	if a := answered(t, ch); a.err != nil || string(a.res) != goodAnswer {
		t.Errorf("Ask returned %s, %v; want the answer", a.res, a.err)
	}
	waitPending(t, c, 0)
	if code, b, _ := c.do(http.MethodPost, "/api/v1/pending/"+q.ID, []byte(`{"result":`+goodAnswer+`}`), nil); code != http.StatusNotFound || !contains(b, "answered already") {
		t.Errorf("a second answer: %d %s", code, b)
	}

	// An error answer reaches the asker as a *protocol.ErrorInfo.
	ch = ask(context.Background(), p, protocol.MethodSampling, samplingParams)
	q = waitPending(t, c, 1).Requests[0]
	c.send(http.MethodPost, "/api/v1/pending/"+q.ID, map[string]any{"error": map[string]any{"code": -1, "message": "User rejected the sampling request"}}, nil)
	a := answered(t, ch)
	var ei *protocol.ErrorInfo
	if !errors.As(a.err, &ei) || ei.Code != -1 || ei.Message != "User rejected the sampling request" {
		t.Errorf("Ask returned %s, %v; want the person's error", a.res, a.err)
	}

	// A result for another method need only be an object.
	other := ask(context.Background(), p, "elicitation/create", `{"message":"ok?"}`)
	q = waitPending(t, c, 1).Requests[0]
	c.send(http.MethodPost, "/api/v1/pending/"+q.ID, []byte(`{"result":{"action":"decline"}}`), nil)
	if a := answered(t, other); a.err != nil || string(a.res) != `{"action":"decline"}` {
		t.Errorf("elicitation: %s, %v", a.res, a.err)
	}
}

// A request whose asker gives up leaves the queue; closing the queue ends
// every wait.
func TestPendingGivesUp(t *testing.T) { synctest.Test(t, testPendingGivesUp) }

func testPendingGivesUp(t *testing.T) {
	p := dashboard.NewPending()
	_, c := newMemDash(t, smallStore(t), &dashboard.Options{Pending: p})

	ctx, cancel := context.WithCancel(context.Background())
	ch := ask(ctx, p, protocol.MethodSampling, samplingParams)
	q := waitPending(t, c, 1).Requests[0]
	cancel()
	if a := answered(t, ch); !errors.Is(a.err, context.Canceled) {
		t.Errorf("Ask after cancel: %s, %v", a.res, a.err)
	}
	waitPending(t, c, 0)
	if code, b, _ := c.do(http.MethodPost, "/api/v1/pending/"+q.ID, []byte(`{"result":`+goodAnswer+`}`), nil); code != http.StatusNotFound {
		t.Errorf("answering a withdrawn request: %d %s", code, b)
	}

	ch = ask(context.Background(), p, protocol.MethodSampling, samplingParams)
	waitPending(t, c, 1)
	p.Close()
	if a := answered(t, ch); !errors.Is(a.err, dashboard.ErrPendingClosed) {
		t.Errorf("Ask after Close: %v", a.err)
	}
	if _, err := p.Ask(context.Background(), protocol.MethodSampling, nil); !errors.Is(err, dashboard.ErrPendingClosed) {
		t.Errorf("Ask on a closed queue: %v", err)
	}
	waitPending(t, c, 0)
}

// Without Options.Pending the API says no replay client waits.
func TestPendingNone(t *testing.T) {
	_, base := newDash(t, smallStore(t), nil)
	c := newAPIClient(t, base)
	var l pendingList
	c.get("/api/v1/pending", &l)
	if l.Active || len(l.Requests) != 0 {
		t.Errorf("without a queue: %+v", l)
	}
	if code, b, _ := c.do(http.MethodPost, "/api/v1/pending/1", []byte(`{"result":{}}`), nil); code != http.StatusNotImplemented || !contains(b, "no replay client waits") {
		t.Errorf("answering without a queue: %d %s", code, b)
	}
	if code, _, _ := c.do(http.MethodGet, "/pending", nil, nil); code != http.StatusOK {
		t.Errorf("the /pending page: %d", code)
	}
}

// New pending requests are announced on the live tail.
func TestPendingLive(t *testing.T) { synctest.Test(t, testPendingLive) }

func testPendingLive(t *testing.T) {
	p := dashboard.NewPending()
	t.Cleanup(func() { p.Close() })
	_, c := newMemDash(t, smallStore(t), &dashboard.Options{Pending: p})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readLive(t, c.hc, c.base, func() {
		synctest.Wait() // the tail is open and has said nothing is pending
		ask(ctx, p, protocol.MethodSampling, samplingParams)
	}, func(typ, data string) bool {
		return typ == "pending" && data == `{"count":1}`
	})
}
