package replay_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

var eras = []struct{ name, path string }{{"legacy", fixtures.PathStateful}, {"modern", fixtures.PathStateless}}

// recordFixture runs the fixture client on path through a recording proxy
// in front of its own fixture server, and returns the tape.
func recordFixture(t *testing.T, path string) *replay.Tape {
	t.Helper()
	return recordTape(t, liveServer(t, nil).URL, func(px string) {
		rep := runClient(t, px+path, nil)
		for _, s := range rep.Steps {
			if s.Err != "" && s.Name != fixtures.ToolError {
				t.Fatalf("recording: step %s failed: %s", s.Name, s.Err)
			}
		}
	})
}

// liveServer is a fresh server for one replay (fixture servers share
// list_changed notifications among the clients of a path).
func liveServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	if h == nil {
		h = fixtures.Handler(nil)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

func replayAgainst(t *testing.T, tape *replay.Tape, target string, opts *replay.ClientOptions) *replay.ClientReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := replay.RunClient(ctx, tape, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func reportText(rep *replay.ClientReport) string {
	var b strings.Builder
	_ = rep.WriteText(&b, true)
	return b.String()
}

// Replaying a recorded session against the server it was recorded from
// finds no difference, on both eras.
func TestReplayClientNoDifference(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape := recordFixture(t, era.path)
			srv := liveServer(t, nil)
			rep := replayAgainst(t, tape, srv.URL, nil)
			if !rep.OK() {
				t.Fatalf("replay against the live fixture server differs:\n%s", reportText(rep))
			}
			// The replay really went through the server's requests: the
			// tool loop took its rounds (2026) or its two sampling
			// requests (legacy), answered from the recording, and the
			// long-lived streams carried their notifications.
			loop := callNamed(rep, "tools/call sample_tools")
			if loop == nil {
				t.Fatalf("no sample_tools call in the report:\n%s", reportText(rep))
			}
			wantRounds, wantIn := 1, `"requests":[{"method":"sampling/createMessage"`
			if era.name == "modern" {
				wantRounds, wantIn = 3, `"rounds":[{"result":{"`
			}
			if loop.Rounds != wantRounds || len(loop.Answers) != 2 || !strings.Contains(string(loop.Live), wantIn) ||
				!strings.Contains(string(loop.Live), "final: Paris: sunny, 21 C; London: light rain, 14 C") {
				t.Errorf("sample_tools: %d rounds, answers %+v, live %s", loop.Rounds, loop.Answers, loop.Live)
			}
			for _, a := range loop.Answers {
				if a.From != "recording" {
					t.Errorf("sample_tools answer %+v not from the recording", a)
				}
			}
			streams := 0
			for _, c := range rep.Sessions[0].Calls {
				if c.Method == "GET" || c.Method == "subscriptions/listen" {
					streams++
					if !strings.Contains(string(c.Live), `"notifications":[`) {
						t.Errorf("%s carried no notifications: %s", c.Title(), c.Live)
					}
				}
			}
			if want := map[string]int{"legacy": 1, "modern": 2}[era.name]; streams != want {
				t.Errorf("%d long-lived streams replayed, want %d", streams, want)
			}
		})
	}
}

func callNamed(rep *replay.ClientReport, title string) *replay.CallResult {
	for _, s := range rep.Sessions {
		for _, c := range s.Calls {
			if strings.HasSuffix(c.Title(), " "+title) || c.Title() == title {
				return c
			}
		}
	}
	return nil
}

// rewriting wraps a handler, replacing strings in request and response
// bodies (same length, so Content-Length stays right) and refusing
// requests that carry one of refuse.
type rewriting struct {
	h       http.Handler
	in, out *strings.Replacer
	refuse  []string
}

func (rw *rewriting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Method == http.MethodPost {
		b, _ := io.ReadAll(r.Body)
		for _, s := range rw.refuse {
			if bytes.Contains(b, []byte(s)) {
				http.Error(w, "stale "+s, http.StatusBadRequest)
				return
			}
		}
		if rw.in != nil {
			b = []byte(rw.in.Replace(string(b)))
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	rw.h.ServeHTTP(&rewriteWriter{ResponseWriter: w, out: rw.out}, r)
}

type rewriteWriter struct {
	http.ResponseWriter
	out *strings.Replacer
}

func (w *rewriteWriter) Write(b []byte) (int, error) {
	if w.out != nil {
		if _, err := w.ResponseWriter.Write([]byte(w.out.Replace(string(b)))); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *rewriteWriter) Flush()                      { _ = http.NewResponseController(w.ResponseWriter).Flush() }
func (w *rewriteWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// shouting is the fixture server whose echo tool shouts.
func shouting() http.Handler {
	return &rewriting{h: fixtures.Handler(nil), out: strings.NewReplacer(`"text":"hello, tape"`, `"text":"HELLO, TAPE"`)}
}

// Against a server whose tool output changed, the replay names the call,
// the path and both values, and nothing else differs.
func TestReplayClientFindsChangedOutput(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape := recordFixture(t, era.path)
			rep := replayAgainst(t, tape, liveServer(t, shouting()).URL, nil)
			if rep.OK() || rep.Problems() != 1 {
				t.Fatalf("want exactly one differing call:\n%s", reportText(rep))
			}
			echo := callNamed(rep, "tools/call echo")
			want := []replay.Difference{{Path: "result.content[0].text", Recorded: `"hello, tape"`, Live: `"HELLO, TAPE"`}}
			if echo == nil || echo.Err != "" || !cmp.Equal(echo.Diffs, want) {
				t.Fatalf("echo: %+v\n%s", echo, reportText(rep))
			}
			text := reportText(rep)
			for _, s := range []string{"DIFF   #", "tools/call echo", "result.content[0].text", `recorded: "hello, tape"`, `live:     "HELLO, TAPE"`, "FAIL: 1 session(s)"} {
				if !strings.Contains(text, s) {
					t.Errorf("the report lacks %q:\n%s", s, text)
				}
			}

			// JUnit: one suite, a testcase per call, one failure naming the path.
			var buf bytes.Buffer
			if err := rep.WriteJUnit(&buf); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Tests    int `xml:"tests,attr"`
				Failures int `xml:"failures,attr"`
				Suites   []struct {
					Name     string `xml:"name,attr"`
					Tests    int    `xml:"tests,attr"`
					Failures int    `xml:"failures,attr"`
					Cases    []struct {
						Name    string `xml:"name,attr"`
						Failure *struct {
							Message string `xml:"message,attr"`
							Text    string `xml:",chardata"`
						} `xml:"failure"`
					} `xml:"testcase"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("JUnit XML does not parse: %v\n%s", err, buf.String())
			}
			calls := len(rep.Sessions[0].Calls)
			if doc.Tests != calls || doc.Failures != 1 || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != calls || doc.Suites[0].Failures != 1 {
				t.Fatalf("JUnit: %d tests, %d failures, %d suites; want %d tests, 1 failure:\n%s", doc.Tests, doc.Failures, len(doc.Suites), calls, buf.String())
			}
			for _, c := range doc.Suites[0].Cases {
				if (c.Failure != nil) != strings.HasSuffix(c.Name, "tools/call echo") {
					t.Errorf("testcase %q: failure %+v", c.Name, c.Failure)
				}
				if c.Failure != nil && !strings.Contains(c.Failure.Text, "result.content[0].text") {
					t.Errorf("the failure does not name the path: %+v", c.Failure)
				}
			}

			// An ignored path is not compared.
			rep = replayAgainst(t, tape, liveServer(t, shouting()).URL, &replay.ClientOptions{Ignore: []string{"result.content[*].text"}})
			if !rep.OK() {
				t.Errorf("with result.content[*].text ignored:\n%s", reportText(rep))
			}
		})
	}
}

// The requestState of an MRTR retry is the one the live server just sent,
// not the recorded one (which a real server may refuse as stale).
func TestReplayClientEchoesLiveRequestState(t *testing.T) {
	tape := recordFixture(t, fixtures.PathStateless)
	h := &rewriting{h: fixtures.Handler(nil),
		out:    strings.NewReplacer(`"requestState":"sample/1"`, `"requestState":"live/s/1"`),
		in:     strings.NewReplacer(`"requestState":"live/s/1"`, `"requestState":"sample/1"`),
		refuse: []string{`"requestState":"sample/1"`}}
	rep := replayAgainst(t, tape, liveServer(t, h).URL, nil)
	if !rep.OK() {
		t.Fatalf("replay with a live requestState:\n%s", reportText(rep))
	}
	if c := callNamed(rep, "tools/call sample"); c == nil || c.Rounds != 2 || !strings.Contains(string(c.Live), "live/s/1") {
		t.Errorf("sample: %+v", c)
	}
}

// What the recording cannot answer, the profile does; where its answers
// change the outcome, the difference shows.
func TestReplayClientAnswersFromProfile(t *testing.T) {
	profile, err := replay.LoadProfile("testdata/profiles/default.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape := recordFixture(t, era.path)
			forgetAnswers(tape)
			rep := replayAgainst(t, tape, liveServer(t, nil).URL, &replay.ClientOptions{Profile: profile})
			sample := callNamed(rep, "tools/call sample")
			if sample == nil || sample.Err != "" || len(sample.Answers) != 1 || sample.Answers[0].From != "profile" {
				t.Fatalf("sample: %+v\n%s", sample, reportText(rep))
			}
			if !strings.Contains(string(sample.Live), `"text":"mock answer to: Say hello to the tape."`) {
				t.Errorf("sample's live result does not come from the profile's template: %s", sample.Live)
			}
			roots := callNamed(rep, "tools/call roots")
			if roots == nil || roots.Err != "" || len(roots.Answers) != 1 || roots.Answers[0].From != "profile" {
				t.Fatalf("roots: %+v", roots)
			}
			// The profile's roots are the fixture client's, so the tool
			// returns what it returned when recorded. (On 2026-07-28 the
			// recording lost its last round with the retries, so there
			// the call differs anyway.)
			if !strings.Contains(string(roots.Live), `file:///fixture/root fixture-root\nfile:///fixture/workspace fixture-workspace`) {
				t.Errorf("roots: live %s", roots.Live)
			}
			if era.name == "legacy" && len(roots.Diffs) > 0 {
				t.Errorf("roots answered from the profile differ: %v", roots.Diffs)
			}
		})
	}
}

// Two replays of one tape cross the wire alike, but for ids.
func TestReplayClientDeterministic(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape := recordFixture(t, era.path)
			first := replayAgainst(t, tape, liveServer(t, nil).URL, nil).Transcript()
			second := replayAgainst(t, tape, liveServer(t, nil).URL, nil).Transcript()
			if len(first) < 50 {
				t.Fatalf("a transcript of %d entries is too short to prove anything", len(first))
			}
			if d := cmp.Diff(first, second); d != "" {
				t.Errorf("two replays differ (-first +second):\n%s", d)
			}
		})
	}
}

// exampleTape is the tape ExampleRunClient replays: a few tool calls of the
// fixture client on 2026-07-28. MCPTAPE_UPDATE=1 records it again.
const exampleTape = "testdata/client/tools.tape.json"

func TestExampleTape(t *testing.T) {
	if os.Getenv(replay.UpdateEnv) != "1" {
		if _, err := replay.LoadTape(exampleTape); err != nil {
			t.Fatalf("%v (MCPTAPE_UPDATE=1 records it)", err)
		}
		return
	}
	store := recordStore(t, liveServer(t, nil).URL, func(px string) {
		runClient(t, px+fixtures.PathStateless, &fixtures.ClientOptions{
			Only: []string{fixtures.ToolEcho, fixtures.ToolAdd, fixtures.ToolSample, fixtures.ToolSampleTools}})
	})
	var buf bytes.Buffer
	if err := replay.Export(context.Background(), store, nil, &buf, "mcptape replay tests"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("testdata/client", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exampleTape, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Sessions with nothing to replay are skipped; sessions the client cannot
// open like the recording did fail with the reason.
func TestReplayClientSessionsItCannotReplay(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	mk := func(id string, s capture.Session, xs []*capture.Exchange, ms ...*capture.Message) *replay.TapeSession {
		s.ID, s.Start = id, at
		for _, m := range ms {
			m.SessionID, m.Batch, m.Time = id, -1, at
		}
		return &replay.TapeSession{Session: &s, Exchanges: xs, Messages: ms}
	}
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	tape := &replay.Tape{Sessions: []*replay.TapeSession{
		mk("http", capture.Session{Opening: "http"}, []*capture.Exchange{{ID: 1, Method: "GET", URL: "/.well-known/oauth-protected-resource", Status: 404}}),
		mk("midway", capture.Session{Era: protocol.EraLegacy, Version: protocol.V20251125, Opening: "mid-session", Path: "/mcp"},
			[]*capture.Exchange{{ID: 2, Method: "POST", URL: "/mcp", Status: 200}},
			&capture.Message{Seq: 1, ExchangeID: 2, Direction: protocol.ClientToServer, Kind: protocol.KindRequest, Method: "tools/list", ID: []byte("1"), Raw: call}),
		mk("sse", capture.Session{Era: protocol.EraLegacy, Version: protocol.V20241105, Opening: "initialize", Path: "/sse"},
			[]*capture.Exchange{{ID: 3, Method: "GET", URL: "/sse", Status: 200, ResponseBody: capture.BodySSE}},
			&capture.Message{Seq: 2, ExchangeID: 3, Direction: protocol.ClientToServer, Kind: protocol.KindRequest, Method: "tools/list", ID: []byte("1"), Raw: call}),
	}}
	rep := replayAgainst(t, tape, liveServer(t, nil).URL, nil)
	if len(rep.Sessions) != 3 {
		t.Fatalf("%d sessions in the report", len(rep.Sessions))
	}
	if s := rep.Sessions[0]; s.Skipped == "" || !s.OK() {
		t.Errorf("the plain-HTTP session: skipped %q, ok %v", s.Skipped, s.OK())
	}
	if s := rep.Sessions[1]; !strings.Contains(s.Err, "holds no initialize") {
		t.Errorf("the mid-session recording: %q", s.Err)
	}
	if s := rep.Sessions[2]; !strings.Contains(s.Err, "2024-11-05 HTTP+SSE") {
		t.Errorf("the HTTP+SSE session: %q", s.Err)
	}
	if rep.OK() || rep.Problems() != 2 {
		t.Errorf("OK %v, %d problems:\n%s", rep.OK(), rep.Problems(), reportText(rep))
	}
	var buf bytes.Buffer
	if err := rep.WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`skipped="1"`, `<skipped message="the session holds no client requests (plain HTTP exchanges, no MCP)"`, `errors="2"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("JUnit lacks %s:\n%s", want, buf.String())
		}
	}
}

// A 2026-07-28 request carries the routing headers: the protocol version of
// its _meta, its method, its name (encoded when not plain ASCII), and the
// Mcp-Param-* headers it was recorded with, unless redacted.
func TestReplayClientModernHeaders(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	req := []byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"météo","arguments":{"region":"eu","key":"k"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":"a","result":{"resultType":"complete","content":[{"type":"text","text":"ok"}]}}`)
	tape := &replay.Tape{Sessions: []*replay.TapeSession{{
		Session: &capture.Session{ID: "m", Era: protocol.EraModern, Version: protocol.V20260728, Path: "/mcp", Start: at},
		Exchanges: []*capture.Exchange{{ID: 1, SessionID: "m", Method: "POST", URL: "/mcp", Status: 200,
			RequestHeader: http.Header{"Mcp-Param-Region": {"eu"}, "Mcp-Param-Api-Key": {capture.Redacted}}}},
		Messages: []*capture.Message{
			{Seq: 1, SessionID: "m", ExchangeID: 1, Direction: protocol.ClientToServer, Time: at, Kind: protocol.KindRequest, Method: "tools/call", ID: []byte(`"a"`), Name: "météo", Batch: -1, Raw: req},
			{Seq: 2, SessionID: "m", ExchangeID: 1, Direction: protocol.ServerToClient, Time: at, Kind: protocol.KindResult, Method: "tools/call", ID: []byte(`"a"`), Batch: -1, Raw: resp, Links: capture.Links{Request: 1}},
		},
	}}}
	var got http.Header
	var body []byte
	srv := liveServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r.Header.Clone(), must(io.ReadAll(r.Body))
		m := protocol.Decode(body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"resultType":"complete","content":[{"type":"text","text":"ok"}]}}`))
	}))
	rep := replayAgainst(t, tape, srv.URL, nil)
	if !rep.OK() {
		t.Fatalf("%s", reportText(rep))
	}
	want := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": protocol.EncodeHeaderValue("météo"),
		"Mcp-Param-Region": "eu", "Mcp-Param-Api-Key": "", "Mcp-Session-Id": "", "Accept": "application/json, text/event-stream"}
	for k, v := range want {
		if got.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, got.Get(k), v)
		}
	}
	if !strings.HasPrefix(got.Get("Mcp-Name"), "=?base64?") {
		t.Errorf("Mcp-Name %q is not in the sentinel form", got.Get("Mcp-Name"))
	}
	// The recorded request, byte for byte, but for a fresh id.
	if want := strings.Replace(string(req), `"id":"a"`, `"id":1`, 1); string(body) != want {
		t.Errorf("sent %s\nwant %s", body, want)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
