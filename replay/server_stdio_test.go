package replay_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// writeTapeFile writes tape to a file in the test's temporary directory.
func writeTapeFile(t *testing.T, tape *replay.Tape) string {
	t.Helper()
	var b bytes.Buffer
	if err := replay.WriteTape(&b, tape); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "recorded.tape.json")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A tape recorded over Streamable HTTP, served over stdio: the go-sdk
// fixture client, connected to the replay's stdin and stdout, sees what it
// saw against the real server over HTTP — every step's answer, the
// sampling, elicitation and roots requests it answered, the notifications
// of the GET stream — and the strict replay finds nothing.
func TestStdioServerServesAnHTTPTape(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape, recorded := record(t, era.path, nil)
			ts := replay.NewStdioServer(t, writeTapeFile(t, tape))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			replayed, err := fixtures.RunClient(ctx, "stdio", &fixtures.ClientOptions{Transport: &mcp.IOTransport{Reader: ts.Conn, Writer: ts.Conn}})
			if err != nil {
				t.Fatal(err)
			}
			recorded.URL, replayed.URL = "", ""
			if d := cmp.Diff(recorded, replayed); d != "" {
				t.Errorf("the client saw something else over stdio (-recorded over HTTP +replayed over stdio):\n%s", d)
			}
			if r := ts.Report(); !r.OK() || r.Served < 20 {
				t.Errorf("strict replay over stdio: served %d, failures %q", r.Served, r.Failures)
			}
		})
	}
}

// The stdio replay's errors are lines too: a line that is not JSON gets a
// parse error, a request no recorded one matches a -32010 error naming its
// session, and an injected HTTP status a CodeFault error; the connection
// goes on.
func TestStdioServerErrors(t *testing.T) {
	tape := counterTape(t)
	serve := func(faults []replay.Annotation, lines ...string) []string {
		t.Helper()
		s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingFast, Faults: faults})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := s.ServeStdio(context.Background(), strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
			t.Fatal(err)
		}
		var got []string
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		return got
	}
	// Answers go out as they are ready: errors at once, a recorded answer
	// at its pace. So the lines are checked in any order.
	check := func(got, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
		}
		for _, w := range want {
			if !slices.ContainsFunc(got, func(line string) bool { return strings.Contains(line, w) }) {
				t.Errorf("no line holds %s:\n%s", w, strings.Join(got, "\n"))
			}
		}
	}
	check(serve(nil, `this is not JSON`, modernCall(1, "count", `{}`), modernCall(2, "count", `{"n":1}`)),
		[]string{`"id":null,"error":{"code":-32700`, `"id":1,"result"`,
			`"id":2,"error":{"code":-32010,"message":"mcptape replay: no recorded tools/call count matches this request in recorded session ` + tape.Sessions[0].Session.ID})
	check(serve([]replay.Annotation{{Match: replay.Match{Method: "tools/call", Name: "count"}, Status: 503}}, modernCall(3, "count", `{}`)),
		[]string{`"id":3,"error":{"code":-32000,"message":"mcptape replay: injected fault: HTTP status 503`})
}

// A tape recorded over stdio has no HTTP exchanges (one record stands for
// the server's process): its messages say which call they belong to by
// their links alone, and the replay over stdio answers from them — the
// progress of a call, its response, and what the server sent on its own
// after it; what the server wrote to stderr stays off stdout.
// stdioTape is a session as mcptape wrap records a stdio server: one
// record for the process, the leg stdio, its messages linked: initialize,
// a stderr line, a tools/call "slow" with a progress notification and its
// response, then a log notification the server sent on its own.
func stdioTape() *replay.Tape {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var msgs []*capture.Message
	add := func(dir protocol.Direction, ms int, raw string, links capture.Links) uint64 {
		d := protocol.Decode([]byte(raw))
		seq := uint64(len(msgs) + 1)
		msgs = append(msgs, &capture.Message{Seq: seq, SessionID: "stdio", Direction: dir, Time: t0.Add(time.Duration(ms) * time.Millisecond),
			Kind: d.Kind, Method: d.Method, ID: d.ID, Raw: []byte(raw), Size: len(raw), Batch: -1, Links: links})
		return seq
	}
	c2s, s2c := protocol.ClientToServer, protocol.ServerToClient
	init := add(c2s, 0, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, capture.Links{})
	add(s2c, 1, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"stdio-server","version":"1"}}}`, capture.Links{Request: init})
	add(c2s, 2, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, capture.Links{})
	msgs = append(msgs, &capture.Message{Seq: uint64(len(msgs) + 1), SessionID: "stdio", Direction: s2c, Time: t0.Add(3 * time.Millisecond),
		Kind: protocol.KindStderr, Raw: []byte("server log: ready"), Batch: -1}) // went to stderr: never on stdout
	call := add(c2s, 10, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"recorded-token"}}}`, capture.Links{})
	add(s2c, 12, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"recorded-token","progress":1,"total":1}}`, capture.Links{Request: call})
	add(s2c, 14, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"slow done"}]}}`, capture.Links{Request: call})
	add(s2c, 15, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"on its own"}}`, capture.Links{})
	// As a wrap records it: one "exchange" for the process, the leg stdio.
	for _, m := range msgs {
		m.ExchangeID = 1
	}
	tape := &replay.Tape{Sessions: []*replay.TapeSession{{
		Session:   &capture.Session{ID: "stdio", Era: protocol.EraLegacy, Version: "2025-11-25", Opening: "stdio", Leg: capture.LegStdio, Start: t0},
		Exchanges: []*capture.Exchange{{ID: 1, SessionID: "stdio", Method: "STDIO", URL: "node server.js", Start: t0}},
		Messages:  msgs,
	}}}
	return tape
}

func TestStdioServerServesAStdioTape(t *testing.T) {
	tape := stdioTape()
	s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingRecorded, Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), inR, outW); outW.Close() }()
	// A replay that never answers must fail the test, not hang it.
	watchdog := time.AfterFunc(10*time.Second, func() { inW.CloseWithError(errors.New("timed out")); outR.Close() })
	defer watchdog.Stop()
	sc := bufio.NewScanner(outR)
	next := func() string {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("the stdio replay ended early: %v", sc.Err())
		}
		return sc.Text()
	}
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if got := next(); !strings.Contains(got, `"id":"a","result"`) || !strings.Contains(got, "stdio-server") {
		t.Errorf("initialize: %s", got)
	}
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"live-token"}}}`)
	for _, want := range []string{`"progressToken":"live-token","progress":1`, `"id":"b","result"`, `"data":"on its own"`} {
		if got := next(); !strings.Contains(got, want) {
			t.Errorf("got %s, want it to hold %s", got, want)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := s.Report(); !r.OK() || r.Served != 2 {
		t.Errorf("strict replay: served %d, failures %q", r.Served, r.Failures)
	}
}

// A stdio tape served over HTTP: the calls are answered on their POST
// streams, and what the server sent on its own comes on the standalone
// GET stream.
func TestStdioTapeOverHTTP(t *testing.T) {
	s, hs := serve(t, stdioTape(), &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	tape := &replay.Tape{Sessions: []*replay.TapeSession{{Messages: []*capture.Message{{Direction: protocol.ClientToServer, Method: "initialize",
		Raw: []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)}}}}}
	h := openLegacy(t, tape, hs.URL+"/mcp")
	req, _ := http.NewRequest("GET", hs.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	hc := &http.Client{Timeout: 10 * time.Second} // a stream that never carries it fails the test
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", res.StatusCode)
	}
	_, body, err := post(t, hs.URL+"/mcp", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"p"}}}`, h)
	if err != nil || !strings.Contains(string(body), `"progressToken":"p"`) || !strings.Contains(string(body), `"id":5,"result"`) {
		t.Fatalf("tools/call: %v %s", err, body)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"data":"on its own"`) {
			if r := s.Report(); !r.OK() {
				t.Errorf("strict replay: %q", r.Failures)
			}
			return
		}
	}
	t.Fatalf("the GET stream ended without what the server sent on its own: %v", sc.Err())
}

// On one pipe the replay keeps the recorded order of a call's answer and
// what the server sent on its own before it: server-everything sends
// notifications/tools/list_changed as it registers tools after
// initialize, before the tools/list the client sends next is answered.
// A client that sends tools/list at once gets them first too.
func TestStdioKeepsTheRecordedOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var msgs []*capture.Message
	add := func(dir protocol.Direction, ms int, raw string, links capture.Links) uint64 {
		d := protocol.Decode([]byte(raw))
		seq := uint64(len(msgs) + 1)
		msgs = append(msgs, &capture.Message{Seq: seq, SessionID: "stdio", ExchangeID: 1, Direction: dir, Time: t0.Add(time.Duration(ms) * time.Millisecond),
			Kind: d.Kind, Method: d.Method, ID: d.ID, Raw: []byte(raw), Size: len(raw), Batch: -1, Links: links})
		return seq
	}
	c2s, s2c := protocol.ClientToServer, protocol.ServerToClient
	init := add(c2s, 0, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, capture.Links{})
	add(s2c, 1, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"}}}`, capture.Links{Request: init})
	add(c2s, 2, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, capture.Links{})
	for i := range 3 {
		add(s2c, 30+10*i, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, capture.Links{})
	}
	list := add(c2s, 61, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, capture.Links{})
	add(s2c, 62, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, capture.Links{Request: list})
	tape := &replay.Tape{Sessions: []*replay.TapeSession{{
		Session:   &capture.Session{ID: "stdio", Era: protocol.EraLegacy, Version: "2025-11-25", Opening: "stdio", Leg: capture.LegStdio, Start: t0},
		Exchanges: []*capture.Exchange{{ID: 1, SessionID: "stdio", Method: "STDIO", URL: "node server.js", Start: t0}},
		Messages:  msgs,
	}}}
	for _, timing := range []replay.Timing{replay.TimingRecorded, replay.TimingFast} {
		t.Run(timing.String(), func(t *testing.T) {
			s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: timing, Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			in := strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}` + "\n" +
				`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n")
			var out syncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.ServeStdio(ctx, in, &out); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				m := protocol.Decode([]byte(line))
				got = append(got, m.Kind.String()+" "+m.Method)
			}
			want := []string{"result ", "notification notifications/tools/list_changed", "notification notifications/tools/list_changed",
				"notification notifications/tools/list_changed", "result "}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("the client read %q, want %q", got, want)
			}
		})
	}
}
