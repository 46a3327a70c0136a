package replay_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

func post(t *testing.T, u, body string, h map[string]string) (int, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

func modernCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,%s}}`, id, tool, args, modernMeta)
}

var modernHeaders = map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}

// counterTape records a raw stateless server whose "count" tool answers
// 1, 2, 3 to three identical calls.
func counterTape(t *testing.T) *replay.Tape {
	t.Helper()
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m := protocol.Decode(b)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"content\":[{\"type\":\"text\",\"text\":\"%d\"}]}}\n\n", m.ID, n.Add(1))
	}))
	defer up.Close()
	store := memstore.New()
	ctx := context.Background()
	rec, _ := capture.NewRecorder(ctx, store, nil)
	u, _ := url.Parse(up.URL)
	p, _ := proxy.New(&proxy.Options{Upstream: u, Recorder: rec})
	px := httptest.NewServer(p)
	for i := 1; i <= 3; i++ {
		if _, _, err := post(t, px.URL+"/mcp", modernCall(i, "count", `{}`), modernHeaders); err != nil {
			t.Fatal(err)
		}
	}
	px.Close()
	rec.Close(ctx)
	var buf bytes.Buffer
	if err := replay.Export(ctx, store, nil, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	tape, err := replay.ReadTape(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return tape
}

func resultText(t *testing.T, body []byte) string {
	t.Helper()
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var v struct {
				ID     json.RawMessage
				Result struct{ Content []struct{ Text string } }
				Error  *struct {
					Code    int
					Message string
				}
			}
			if json.Unmarshal([]byte(d), &v) == nil {
				if v.Error != nil {
					return fmt.Sprintf("error %d: %s", v.Error.Code, v.Error.Message)
				}
				if len(v.Result.Content) > 0 {
					return string(v.ID) + " " + v.Result.Content[0].Text
				}
			}
		}
	}
	var v struct {
		Error struct {
			Code    int
			Message string
		}
	}
	if json.Unmarshal(body, &v) == nil && v.Error.Code != 0 {
		return fmt.Sprintf("error %d: %s", v.Error.Code, v.Error.Message)
	}
	return string(body)
}

func TestRepeatedCallsInRecordedOrder(t *testing.T) {
	s, hs := serve(t, counterTape(t), &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	var got []string
	for i := 0; i < 4; i++ {
		_, b, err := post(t, hs.URL+"/mcp", modernCall(100+i, "count", `{}`), modernHeaders)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resultText(t, b))
	}
	want := []string{"100 1", "101 2", "102 3", "103 3"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("repeated calls got %q, want %q (recorded order, live ids, the last answer repeated)", got, want)
	}
	if r := s.Report(); len(r.Failures) != 1 || !strings.Contains(r.Failures[0], "more often than recorded") {
		t.Errorf("strict report: %q", r.Failures)
	}
}

func TestMissNamesTheClosestRequest(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateless, &fixtures.ClientOptions{Only: []string{"echo", "add"}})
	s, hs := serve(t, tape, nil)
	_, b, err := post(t, hs.URL+fixtures.PathStateless, modernCall(7, "echo", `{"text":"something else"}`), modernHeaders)
	if err != nil {
		t.Fatal(err)
	}
	got := resultText(t, b)
	for _, want := range []string{fmt.Sprintf("error %d", replay.CodeNoMatch), "closest recorded request is seq", "(tools/call echo)",
		`params.arguments.text: live "something else", recorded "hello, tape"`} {
		if !strings.Contains(got, want) {
			t.Errorf("miss answer %q lacks %q", got, want)
		}
	}
	if !bytes.Contains(b, []byte(`"id":7`)) {
		t.Errorf("the miss is not answered with the live id: %s", b)
	}
	_, b, _ = post(t, hs.URL+fixtures.PathStateless, `{"jsonrpc":"2.0","id":8,"method":"prompts/list","params":{`+modernMeta+`}}`, modernHeaders)
	if got := resultText(t, b); !strings.Contains(got, "has no prompts/list request at all") {
		t.Errorf("unknown method: %q", got)
	}
	if r := s.Report(); len(r.Misses) != 2 || r.OK() {
		t.Errorf("report %+v", r)
	}
}

func TestFaults(t *testing.T) {
	tape := counterTape(t)
	cases := []struct {
		name  string
		fault replay.Annotation
		check func(t *testing.T, status int, body []byte, err error, took time.Duration)
	}{
		{"delay", replay.Annotation{Match: replay.Match{Method: "tools/call", Name: "count"}, Delay: replay.Duration(150 * time.Millisecond)},
			func(t *testing.T, status int, body []byte, err error, took time.Duration) {
				if took < 150*time.Millisecond || resultText(t, body) != "1 1" {
					t.Errorf("delay: took %v, answer %q", took, resultText(t, body))
				}
			}},
		{"error", replay.Annotation{Match: replay.Match{Name: "count"}, Error: &replay.RPCError{Code: -32603, Message: "injected"}},
			func(t *testing.T, status int, body []byte, err error, took time.Duration) {
				if got := resultText(t, body); got != "error -32603: injected" {
					t.Errorf("error: %q", got)
				}
			}},
		{"status", replay.Annotation{Match: replay.Match{Method: "tools/call"}, Status: 503},
			func(t *testing.T, status int, body []byte, err error, took time.Duration) {
				if status != 503 {
					t.Errorf("status: %d", status)
				}
			}},
		{"other tool untouched", replay.Annotation{Match: replay.Match{Name: "nope"}, Status: 500},
			func(t *testing.T, status int, body []byte, err error, took time.Duration) {
				if status != 200 || resultText(t, body) != "1 1" {
					t.Errorf("unmatched fault applied: %d %q", status, body)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Faults: []replay.Annotation{tc.fault}})
			start := time.Now()
			status, body, err := post(t, hs.URL+"/mcp", modernCall(1, "count", `{}`), modernHeaders)
			tc.check(t, status, body, err, time.Since(start))
		})
	}
}

// A dropped stream ends abruptly after the given number of events, before
// the result, the way a crashing server's would.
func TestFaultDropStream(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateless, &fixtures.ClientOptions{Only: []string{"slow"}})
	var params json.RawMessage
	for _, m := range tape.Sessions[0].Messages {
		if m.Method == "tools/call" && m.Kind == protocol.KindRequest {
			params, _, _, _ = protocol.Member(m.Raw, "params")
		}
	}
	_, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast,
		Faults: []replay.Annotation{{Match: replay.Match{Method: "tools/call", Name: "slow"}, DropAfterEvents: 2}}})
	_, body, err := post(t, hs.URL+fixtures.PathStateless, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":`+string(params)+`}`, modernHeaders)
	if err == nil {
		t.Errorf("the client saw a clean end: %q", body)
	}
	if n := strings.Count(string(body), "data: "); n != 2 || bytes.Contains(body, []byte(`"result"`)) {
		t.Errorf("got %d events before the drop (want 2, and no result): %q", n, body)
	}
}

// A strict replay fails when the client answers a replayed sampling request
// differently from the recording.
func TestStrictSamplingAnswer(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateful, &fixtures.ClientOptions{ProtocolVersion: protocol.V20251125, Only: []string{"sample"}})
	s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	var initParams, callParams json.RawMessage
	for _, m := range tape.Sessions[0].Messages {
		if m.Direction == protocol.ClientToServer && m.Method == "initialize" {
			initParams, _, _, _ = protocol.Member(m.Raw, "params")
		}
		if m.Direction == protocol.ClientToServer && m.Method == "tools/call" {
			callParams, _, _, _ = protocol.Member(m.Raw, "params")
		}
	}
	u := hs.URL + fixtures.PathStateful
	req, _ := http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+string(initParams)+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	sid := res.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id minted")
	}
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	req, _ = http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+string(callParams)+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	answered, result := false, ""
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "" {
			continue
		}
		m := protocol.Decode([]byte(d))
		if m.Kind == protocol.KindRequest && m.Method == "sampling/createMessage" {
			post(t, u, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"role":"assistant","content":{"type":"text","text":"a different answer"},"model":"other"}}`, h)
			answered = true
		}
		if m.Kind == protocol.KindResult {
			result = d
			break
		}
	}
	if !answered || !strings.Contains(result, `"id":2`) {
		t.Fatalf("sampling request answered %v, result %q", answered, result)
	}
	r := s.Report()
	if r.OK() || !strings.Contains(strings.Join(r.Failures, "\n"), "answer to sampling/createMessage differs from the recording") ||
		!strings.Contains(strings.Join(r.Failures, "\n"), `"a different answer"`) {
		t.Errorf("strict report: %q", r.Failures)
	}
}

// Two replays of one tape give the client the same messages but for ids.
func TestReplaysAreDeterministic(t *testing.T) {
	for _, era := range []struct{ name, path string }{{"legacy", fixtures.PathStateful}, {"modern", fixtures.PathStateless}} {
		t.Run(era.name, func(t *testing.T) {
			tape, _ := record(t, era.path, nil)
			_, hs := serve(t, tape, nil)
			transcript := func() []string {
				store := memstore.New()
				ctx := context.Background()
				rec, _ := capture.NewRecorder(ctx, store, nil)
				u, _ := url.Parse(hs.URL)
				p, _ := proxy.New(&proxy.Options{Upstream: u, Recorder: rec})
				px := httptest.NewServer(p)
				runClient(t, px.URL+era.path, nil)
				px.CloseClientConnections()
				px.Close()
				rec.Close(ctx)
				// One transcript per exchange: concurrent streams (two
				// subscriptions/listen, say) may interleave either way.
				byX := map[uint64][]string{}
				for s := range store.Sessions(ctx, capture.SessionQuery{}) {
					for m := range store.Messages(ctx, s.ID, capture.MessageQuery{}) {
						raw := m.Raw
						if v, ok := protocol.SetMember(raw, []byte(`0`), "id"); ok {
							raw = v
						}
						byX[m.ExchangeID] = append(byX[m.ExchangeID], fmt.Sprintf("%v %v %s %s", m.Direction, m.Kind, m.Method, raw))
					}
				}
				var out []string
				for _, lines := range byX {
					out = append(out, strings.Join(lines, "\n"))
				}
				sort.Strings(out)
				return out
			}
			a, b := transcript(), transcript()
			if strings.Join(a, "\n") != strings.Join(b, "\n") {
				for i := range min(len(a), len(b)) {
					if a[i] != b[i] {
						t.Fatalf("replays differ at message %d:\n%s\n%s", i, a[i], b[i])
					}
				}
				t.Fatalf("replays differ in length: %d and %d messages", len(a), len(b))
			}
		})
	}
}

func TestRecordedTiming(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateless, &fixtures.ClientOptions{Only: []string{"slow"}})
	var recorded time.Duration
	for _, m := range tape.Sessions[0].Messages {
		if m.Method == "tools/call" && m.Kind == protocol.KindRequest {
			for _, r := range tape.Sessions[0].Messages {
				if r.Links.Request == m.Seq && r.Kind.IsResponse() {
					recorded = r.Time.Sub(m.Time)
				}
			}
		}
	}
	if recorded < 50*time.Millisecond {
		t.Fatalf("the slow call took %v when recorded", recorded)
	}
	_, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingRecorded})
	start := time.Now()
	runClient(t, hs.URL+fixtures.PathStateless, &fixtures.ClientOptions{Only: []string{"slow"}})
	if took := time.Since(start); took < recorded*8/10 {
		t.Errorf("replay at recorded pace took %v; the recorded call alone took %v", took, recorded)
	}
}
