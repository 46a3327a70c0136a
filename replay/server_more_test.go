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
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
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

// openLegacy opens a legacy session at u with the initialize the tape's
// first session recorded, and returns the headers its requests carry.
func openLegacy(t *testing.T, tape *replay.Tape, u string) map[string]string {
	t.Helper()
	var initParams json.RawMessage
	for _, m := range tape.Sessions[0].Messages {
		if m.Direction == protocol.ClientToServer && m.Method == "initialize" {
			initParams, _, _, _ = protocol.Member(m.Raw, "params")
		}
	}
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
	return map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
}

func modernCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,%s}}`, id, tool, args, modernMeta)
}

var modernHeaders = map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}

// countingServer is a raw stateless server that numbers its answers
// 1, 2, 3, … as text content, in the order the requests come.
func countingServer(t *testing.T) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m := protocol.Decode(b)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"content\":[{\"type\":\"text\",\"text\":\"%d\"}]}}\n\n", m.ID, n.Add(1))
	}))
	t.Cleanup(up.Close)
	return up
}

// counterTape records a raw stateless server whose "count" tool answers
// 1, 2, 3 to three identical calls.
func counterTape(t *testing.T) *replay.Tape {
	t.Helper()
	return recordTape(t, countingServer(t).URL, func(px string) {
		for i := 1; i <= 3; i++ {
			if _, _, err := post(t, px+"/mcp", modernCall(i, "count", `{}`), modernHeaders); err != nil {
				t.Fatal(err)
			}
		}
	})
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
	// The closest request is named by its own tool, not the live one's.
	_, b, _ = post(t, hs.URL+fixtures.PathStateless, modernCall(9, "ech0", `{"text":"hello, tape"}`), modernHeaders)
	if got := resultText(t, b); !strings.Contains(got, "no recorded tools/call ech0 matches") || !strings.Contains(got, "(tools/call echo); it differs in params.name") {
		t.Errorf("miss of a misspelt tool: %q", got)
	}
	_, b, _ = post(t, hs.URL+fixtures.PathStateless, `{"jsonrpc":"2.0","id":8,"method":"prompts/list","params":{`+modernMeta+`}}`, modernHeaders)
	if got := resultText(t, b); !strings.Contains(got, "has no prompts/list request at all") {
		t.Errorf("unknown method: %q", got)
	}
	if r := s.Report(); len(r.Misses) != 3 || r.OK() {
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
// differently from the recording, unless the ignore rules leave the
// difference out.
func TestStrictSamplingAnswer(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateful, &fixtures.ClientOptions{ProtocolVersion: protocol.V20251125, Only: []string{"sample"}})
	var callParams, answer json.RawMessage
	for _, m := range tape.Sessions[0].Messages {
		if m.Direction == protocol.ClientToServer && m.Method == "tools/call" {
			callParams, _, _, _ = protocol.Member(m.Raw, "params")
		}
		if m.Direction == protocol.ClientToServer && m.Kind == protocol.KindResult && m.Method == "sampling/createMessage" {
			answer, _, _, _ = protocol.Member(m.Raw, "result")
		}
	}
	// The recorded answer, but for the text.
	answer, ok := protocol.SetMember(answer, []byte(`"a different answer"`), "content", "text")
	if !ok {
		t.Fatalf("the recorded sampling answer has no content.text: %s", answer)
	}
	for _, tc := range []struct {
		name    string
		matcher *replay.Matcher
		fails   bool
	}{
		{"differs", nil, true},
		{"ignored", replay.NewMatcher(replay.IgnorePaths("content.text")), false},
		{"ignored for the method", replay.NewMatcher(replay.IgnorePathsFor("sampling/createMessage", "content")), false},
		{"ignored for another method", replay.NewMatcher(replay.IgnorePathsFor("tools/call", "content")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true, Matcher: tc.matcher})
			u := hs.URL + fixtures.PathStateful
			h := openLegacy(t, tape, u)
			req, _ := http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+string(callParams)+`}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range h {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
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
					post(t, u, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+string(answer)+`}`, h)
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
			if !tc.fails {
				if !r.OK() {
					t.Errorf("strict replay failed on an ignored difference: %q", r.Failures)
				}
				return
			}
			if len(r.Failures) != 1 || !strings.Contains(r.Failures[0], "answer to sampling/createMessage differs from the recording: result.content.text: live \"a different answer\"") {
				t.Errorf("strict report: %q", r.Failures)
			}
		})
	}
}

// Two replays of one tape, each by a fresh strict replay server, give the
// client the same messages in the same order but for ids, and miss nothing.
func TestReplaysAreDeterministic(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape, _ := record(t, era.path, nil)
			transcript := func() []string {
				s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
				store := recordStore(t, hs.URL, func(px string) { runClient(t, px+era.path, nil) })
				ctx := context.Background()
				if r := s.Report(); len(r.Misses) != 0 || !r.OK() || r.Served == 0 {
					t.Fatalf("strict replay: served %d, misses %q, failures %q", r.Served, r.Misses, r.Failures)
				}
				// Exchanges in the order they started, each with its
				// messages in order. (Concurrent streams, two
				// subscriptions/listen say, interleave their messages
				// either way, so messages are not compared across
				// exchanges.)
				byX := map[uint64][]string{}
				var xs []uint64
				for s := range store.Sessions(ctx, capture.SessionQuery{}) {
					for m := range store.Messages(ctx, s.ID, capture.MessageQuery{}) {
						raw := m.Raw
						if v, ok := protocol.SetMember(raw, []byte(`0`), "id"); ok {
							raw = v
						}
						if v, ok := protocol.SetMember(raw, []byte(`0`), "params", "requestId"); ok {
							raw = v // notifications/cancelled names an id too
						}
						if byX[m.ExchangeID] == nil {
							xs = append(xs, m.ExchangeID)
						}
						byX[m.ExchangeID] = append(byX[m.ExchangeID], fmt.Sprintf("%v %v %s %s", m.Direction, m.Kind, m.Method, raw))
					}
				}
				sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
				var out []string
				for _, x := range xs {
					out = append(out, strings.Join(byX[x], "\n"))
				}
				return out
			}
			a, b := transcript(), transcript()
			if d := cmp.Diff(a, b); d != "" {
				t.Fatalf("two replays differ (-first +second):\n%s", d)
			}
			if len(a) < 20 {
				t.Fatalf("the replays carried only %d exchanges", len(a))
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

// A strict replay compares an MRTR retry's inputResponses with the
// recorded ones under the configured ignore rules: a different answer is
// a failure, unless the path that differs is ignored.
func TestStrictInputResponses(t *testing.T) {
	tape, err := replay.LoadTape("testdata/client/tools.tape.json")
	if err != nil {
		t.Fatal(err)
	}
	var first, retry json.RawMessage
	for _, m := range tape.Sessions[0].Messages {
		if m.Kind != protocol.KindRequest || m.Name != "sample" {
			continue
		}
		params, _, _, _ := protocol.Member(m.Raw, "params")
		if _, _, _, ok := protocol.Member(params, "inputResponses"); ok {
			retry = params
		} else {
			first = params
		}
	}
	if first == nil || retry == nil {
		t.Fatal("the tape has no sample call with an MRTR retry")
	}
	changed, ok := protocol.SetMember(retry, []byte(`"something else"`), "inputResponses", "sample", "content", "text")
	if !ok {
		t.Fatalf("no inputResponses.sample.content.text in %s", retry)
	}
	for _, tc := range []struct {
		name    string
		matcher *replay.Matcher
		want    string // in the one failure; empty: none
	}{
		{"differs", replay.NewMatcher(), `the inputResponses of tools/call sample differ from the recording: params.inputResponses.sample.content.text: live "something else", recorded "sampled: Say hello to the tape."`},
		{"ignored", replay.NewMatcher(replay.IgnorePaths("inputResponses.sample.content.text")), ""},
		{"ignored for the method", replay.NewMatcher(replay.IgnorePathsFor("tools/call", "inputResponses.sample.content")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true, Matcher: tc.matcher})
			u := hs.URL + tape.Sessions[0].Session.Path
			_, b, err := post(t, u, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+string(first)+`}`, modernHeaders)
			if err != nil || !bytes.Contains(b, []byte(`"input_required"`)) {
				t.Fatalf("first round: %v %s", err, b)
			}
			_, b, err = post(t, u, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+string(changed)+`}`, modernHeaders)
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, b); got != "2 sampled: Say hello to the tape." {
				t.Errorf("the retry got %q, want the recorded result", got)
			}
			r := s.Report()
			switch {
			case tc.want == "" && !r.OK():
				t.Errorf("strict replay failed on an ignored path: %q", r.Failures)
			case tc.want != "" && (len(r.Failures) != 1 || !strings.Contains(r.Failures[0], tc.want)):
				t.Errorf("strict report %q, want one failure with %q", r.Failures, tc.want)
			}
		})
	}
}
