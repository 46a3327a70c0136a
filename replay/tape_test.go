package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// handTape is a small tape whose messages carry bytes that a re-encoding
// would change: whitespace and escapes inside a JSON message, a frame that
// is not JSON, and bytes that are not UTF-8.
func handTape() *replay.Tape {
	at := time.Date(2026, 12, 2, 10, 0, 0, 123456000, time.UTC)
	s := &capture.Session{ID: "20261202-100000-abcdef", Era: protocol.EraLegacy, Version: protocol.V20251125,
		Client: protocol.Implementation{Name: "hand", Version: "1"}, Path: "/mcp", Start: at, End: at.Add(time.Second),
		ClientCapabilities: []byte(`{ "roots" : {} }`), Status: capture.StatusClosed}
	x := &capture.Exchange{ID: 7, SessionID: s.ID, Method: "POST", URL: "/mcp", Status: 200, Start: at,
		RequestBody: capture.BodyJSON, ResponseBody: capture.BodySSE,
		Rewritten: `WWW-Authenticate resource_metadata → "http://127.0.0.1:7411/.well-known/oauth-protected-resource/mcp"`}
	req := []byte("{ \"jsonrpc\" : \"2.0\",\n  \"id\" : 1 ,\t\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"\\u00e9t\\u00e9 \\/ \\\"q\\\"\"}}}")
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"été / \"q\""}]}}   `)
	frame := []byte(": keep-alive\r\n\r\n")
	binary := []byte{0xff, 0xfe, 'x', 0x00}
	return &replay.Tape{Created: at, Generator: "test", Sessions: []*replay.TapeSession{{
		Session:   s,
		Exchanges: []*capture.Exchange{x},
		Messages: []*capture.Message{
			{Seq: 10, SessionID: s.ID, ExchangeID: 7, Direction: protocol.ClientToServer, Time: at, Kind: protocol.KindRequest,
				Method: "tools/call", ID: []byte("1"), Name: "echo", Batch: -1, Raw: req, Size: len(req)},
			{Seq: 11, SessionID: s.ID, ExchangeID: 7, Direction: protocol.ServerToClient, Time: at.Add(time.Millisecond), Kind: protocol.KindFrame,
				Batch: -1, Raw: frame, Size: len(frame), SSE: &capture.SSEInfo{}},
			{Seq: 12, SessionID: s.ID, ExchangeID: 7, Direction: protocol.ServerToClient, Time: at.Add(2 * time.Millisecond), Kind: protocol.KindResult,
				Method: "tools/call", ID: []byte("1"), Batch: -1, Raw: resp, Size: len(resp), Links: capture.Links{Request: 10},
				SSE: &capture.SSEInfo{ID: "s_1", Prefix: []byte("id: s_1\ndata: "), Suffix: []byte("\n\n")}, Edited: 2},
			{Seq: 13, SessionID: s.ID, ExchangeID: 7, Direction: protocol.ServerToClient, Time: at.Add(3 * time.Millisecond), Kind: protocol.KindInvalid,
				Batch: -1, Raw: binary, Size: len(binary)},
		},
	}}}
}

// Recorded bytes survive a tape byte for byte: the message itself appears
// verbatim in the document, and reads back unchanged, as do frames that are
// not JSON and bytes that are not UTF-8, and the count of a message's edits.
func TestTapeKeepsRawBytes(t *testing.T) {
	want := handTape()
	var buf bytes.Buffer
	if err := replay.WriteTape(&buf, want); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()
	for _, m := range want.Sessions[0].Messages[:1] {
		if !strings.Contains(doc, `"raw":`+string(m.Raw)+"}") {
			t.Errorf("the tape does not hold message %d verbatim:\n%s", m.Seq, doc)
		}
	}
	if n := strings.Count(doc, `"edited"`); n != 1 || !strings.Contains(doc, `"edited":2`) {
		t.Errorf("the tape holds %d edited fields; want one, \"edited\":2, on the edited message only", n)
	}
	got, err := replay.ReadTape(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Format != replay.TapeFormat || got.Version != replay.TapeVersion || got.Generator != "test" || !got.Created.Equal(want.Created) {
		t.Errorf("header: %+v", got)
	}
	if d := cmp.Diff(want.Sessions, got.Sessions); d != "" {
		t.Errorf("the tape read back differs (-written +read):\n%s", d)
	}

	// The same through a store: Export, then Import into an empty store.
	ctx := context.Background()
	src, dst := memstore.New(), memstore.New()
	ts := want.Sessions[0]
	if err := src.Write(ctx, &capture.Batch{Sessions: []*capture.Session{ts.Session}, Exchanges: ts.Exchanges, Messages: ts.Messages}); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := replay.Export(ctx, src, nil, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	tape, err := replay.ReadTape(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Import(ctx, dst, tape, nil); err != nil {
		t.Fatal(err)
	}
	for x, err := range dst.Exchanges(ctx, ts.Session.ID) {
		if err != nil {
			t.Fatal(err)
		}
		if x.Rewritten != ts.Exchanges[0].Rewritten {
			t.Errorf("exchange %d after export and import: rewritten %q, want %q", x.ID, x.Rewritten, ts.Exchanges[0].Rewritten)
		}
	}
	for _, m := range ts.Messages {
		g, err := dst.Message(ctx, m.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(g.Raw, m.Raw) || g.Edited != m.Edited {
			t.Errorf("message %d after export and import: %q edited %d, want %q edited %d", m.Seq, g.Raw, g.Edited, m.Raw, m.Edited)
		}
	}
}

func TestReadTapeRefuses(t *testing.T) {
	var buf bytes.Buffer
	if err := replay.WriteTape(&buf, handTape()); err != nil {
		t.Fatal(err)
	}
	good := buf.String()
	edit := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("the tape lacks %q", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	for _, tc := range []struct {
		name   string
		doc    string
		target error
		says   string
	}{
		{"empty", "", replay.ErrNotTape, "the file is empty"},
		{"not JSON", "mcptape-tape v1", replay.ErrNotTape, `this is not JSON (it begins with "mcptape-tape v1")`},
		{"an array", "[1,2]", replay.ErrNotTape, "this is a JSON array"},
		// A file that is something else says what it looks like.
		{"a HAR file", `{"log":{"version":"1.2","creator":{"name":"mcptape"},"entries":[]}}`, replay.ErrNotTape, "this is a HAR file"},
		{"a testing profile", `{"name":"ci","sampling":{"provider":"mock"}}`, replay.ErrNotTape, "this is a testing profile; pass it with --profile"},
		{"a JSON-RPC message", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, replay.ErrNotTape, "this is a JSON-RPC message"},
		{"show --json output", "{\"seq\":1,\"dir\":\"c2s\",\"raw\":{\"jsonrpc\":\"2.0\"}}\n{\"seq\":2,\"dir\":\"s2c\"}\n", replay.ErrNotTape, "`mcptape show --json` output"},
		{"a client config", `{"mcpServers":{"x":{"command":"y"}}}`, replay.ErrNotTape, "an MCP client's configuration file"},
		{"gzip", "\x1f\x8b\x08\x00", replay.ErrNotTape, "gzip-compressed"},
		{"HTML", "<!doctype html><p>404", replay.ErrNotTape, "HTML or XML"},
		{"truncated", good[:len(good)*2/3], replay.ErrNotTape, "ends early"},
		{"no format", edit(`"format":"mcptape-tape",`, ""), replay.ErrNotTape, `the format field is ""`},
		{"wrong format", edit(`"format":"mcptape-tape"`, `"format":"har"`), replay.ErrNotTape, `the format field is "har"`},
		{"newer version", edit(`"version":1`, `"version":2`), replay.ErrTapeVersion, "version 2 (this build reads version 1"},
		{"version as text", edit(`"version":1`, `"version":"1"`), replay.ErrTapeInvalid, "a string where a whole number belongs"},
		{"sessions first", `{"sessions":[],"format":"mcptape-tape","version":1}`, replay.ErrNotTape, "must come first"},
		{"no sessions", `{"format":"mcptape-tape","version":1}`, replay.ErrTapeInvalid, "no sessions"},
		{"session without id", edit(`"id":"20261202-100000-abcdef"`, `"id":""`), replay.ErrTapeInvalid, "no session record with an id"},
		{"seq repeats", edit(`"seq":11`, `"seq":10`), replay.ErrTapeInvalid, "seq 10 repeats or goes backwards"},
		{"dangling link", edit(`"links":{"request":10}`, `"links":{"request":99}`), replay.ErrTapeInvalid, "message 12 links to seq 99, which is not in the tape"},
		{"unknown exchange", edit(`"seq":12,"exchange":7`, `"seq":12,"exchange":8`), replay.ErrTapeInvalid, "message 12 names exchange 8"},
		{"bad direction", edit(`"seq":12,"exchange":7,"dir":"s2c"`, `"seq":12,"exchange":7,"dir":"up"`), replay.ErrTapeInvalid, "message 12: dir"},
		{"negative edited", edit(`"edited":2`, `"edited":-1`), replay.ErrTapeInvalid, "message 12: edited is -1"},
		{"unknown leg", edit(`"status":"closed"`, `"status":"closed","leg":"pigeon"`), replay.ErrTapeInvalid, `a session's leg is "pigeon", which this build does not know`},
		{"two raw forms", edit(`"raw":{ "jsonrpc"`, `"rawText":"x","raw":{ "jsonrpc"`), replay.ErrTapeInvalid, "more than one of raw, rawText and rawBase64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replay.ReadTape(strings.NewReader(tc.doc))
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("ReadTape: %v\nwant %v saying %q", err, tc.target, tc.says)
			}
			// OpenTape checks a file as ReadTape checks a document.
			path := filepath.Join(t.TempDir(), "bad.tape.json")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			tape, err := replay.OpenTape(path)
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), path) {
				t.Errorf("OpenTape: %v\nwant %v saying %q and naming the file", err, tc.target, tc.says)
			}
			tape.Close()
		})
	}
}

// OpenTape keeps the sessions' records and an index: a session read from
// the file is the session LoadTape reads, byte for byte, whichever order
// its members come in; a tape imported from the file is the tape imported
// from memory; and a file that changed under an open tape is said to have
// changed, not misread.
func TestOpenTapeReadsOnDemand(t *testing.T) {
	want := handTape()
	want.Sessions = append(want.Sessions, &replay.TapeSession{Session: &capture.Session{ID: "second", Era: protocol.EraModern, Start: want.Created}})
	var buf bytes.Buffer
	if err := replay.WriteTape(&buf, want); err != nil {
		t.Fatal(err)
	}
	// The messages before the exchanges and the session record, as a
	// writer that streams may put them.
	doc := buf.String()
	const sess, msgs = "{\"session\": ", ",\n \"messages\": ["
	i, j := strings.Index(doc, sess), strings.Index(doc, msgs)
	if i < 0 || j < i {
		t.Fatalf("the tape is not laid out as expected:\n%s", doc)
	}
	k := strings.Index(doc[j:], "]},\n{") + j // the end of the first session
	doc = doc[:i] + "{\"messages\": [" + doc[j+len(msgs):k] + "],\n" + doc[i+1:j] + "}" + doc[k+2:]
	path := filepath.Join(t.TempDir(), "hand.tape.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	whole, err := replay.LoadTape(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.Sessions[0], whole.Sessions[0]); d != "" {
		t.Fatalf("the reordered tape reads back differently (-written +read):\n%s", d)
	}
	tape, err := replay.OpenTape(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tape.Close()
	if len(tape.Sessions) != 2 || tape.Sessions[0].Messages != nil || tape.Sessions[0].Exchanges != nil ||
		!cmp.Equal(tape.Sessions[0].Session, want.Sessions[0].Session) {
		t.Fatalf("an opened tape's sessions: %+v", tape.Sessions)
	}
	for i := range want.Sessions {
		got, err := tape.Session(i)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(whole.Sessions[i], got); d != "" {
			t.Errorf("session %d read from the file differs from the one read whole (-whole +from the file):\n%s", i, d)
		}
	}
	ctx := context.Background()
	export := func(tp *replay.Tape) string {
		st := memstore.New()
		if _, err := replay.Import(ctx, st, tp, nil); err != nil {
			t.Fatal(err)
		}
		// Into a store that holds a session already: renumbered.
		if _, err := replay.Import(ctx, st, tp, &replay.ImportOptions{Rename: true}); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := replay.Export(ctx, st, nil, &b, "test"); err != nil {
			t.Fatal(err)
		}
		out, err := replay.ReadTape(&b)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, ts := range out.Sessions {
			lines = append(lines, fmt.Sprintf("%+v", *ts.Session))
			for _, m := range ts.Messages {
				lines = append(lines, fmt.Sprintf("%d %d %+v %q", m.Seq, m.ExchangeID, m.Links, m.Raw))
			}
		}
		return strings.Join(lines, "\n")
	}
	if d := cmp.Diff(export(whole), export(tape)); d != "" {
		t.Errorf("importing the opened tape differs from importing it whole (-whole +opened):\n%s", d)
	}

	if err := os.WriteFile(path, []byte(doc[:len(doc)/2]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tape.Session(0); err == nil || !strings.Contains(err.Error(), "changed since it was opened") && !strings.Contains(err.Error(), "did it change") {
		t.Errorf("a session read from a file cut in two: %v", err)
	}
}

// A tape file that changes under a running replay server does not hang
// it: the request gets what could be read, and the report says the tape
// could not be read (choosing a session reads recorded params, under the
// server's lock: a read error must not need that lock again).
func TestReplayOfAChangedTapeFile(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateful, &fixtures.ClientOptions{Only: []string{"echo"}})
	path := writeTapeFile(t, tape)
	opened, err := replay.OpenTape(path)
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	s, hs := serve(t, opened, &replay.ServerOptions{Timing: replay.TimingFast})
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", hs.URL+fixtures.PathStateful, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	hc := &http.Client{Timeout: 10 * time.Second}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("initialize against a tape cut to nothing: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	r := s.Report()
	if r.OK() || !strings.Contains(strings.Join(r.Failures, "\n"), "reading the tape") {
		t.Errorf("report: %q", r.Failures)
	}
}

// liveStore is a store the recorder writes to while an export reads it:
// the batch lands between the export's read of a session's exchanges and
// its read of the messages.
type liveStore struct {
	*memstore.Store
	late *capture.Batch
}

func (s *liveStore) Messages(ctx context.Context, id string, q capture.MessageQuery) iter.Seq2[*capture.Message, error] {
	if s.late != nil {
		if err := s.Store.Write(ctx, s.late); err != nil {
			panic(err)
		}
		s.late = nil
	}
	return s.Store.Messages(ctx, id, q)
}

// An export while recording writes a tape that reads back: a message
// recorded after the export read the session's exchanges, in an exchange
// that began after that, is left for the next export, with what links to
// it; one recorded meanwhile in an exchange the tape holds is kept.
func TestExportWhileRecording(t *testing.T) {
	ctx := context.Background()
	ts := handTape().Sessions[0]
	st := &liveStore{Store: memstore.New()}
	if err := st.Write(ctx, &capture.Batch{Sessions: []*capture.Session{ts.Session}, Exchanges: ts.Exchanges, Messages: ts.Messages}); err != nil {
		t.Fatal(err)
	}
	at := ts.Messages[len(ts.Messages)-1].Time
	sid := ts.Session.ID
	st.late = &capture.Batch{
		Exchanges: []*capture.Exchange{{ID: 8, SessionID: sid, Method: "POST", URL: "/mcp", Start: at}},
		Messages: []*capture.Message{
			{Seq: 14, SessionID: sid, ExchangeID: 8, Direction: protocol.ClientToServer, Time: at, Kind: protocol.KindRequest,
				Method: "tools/list", ID: []byte("2"), Batch: -1, Raw: []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)},
			{Seq: 15, SessionID: sid, ExchangeID: 7, Direction: protocol.ServerToClient, Time: at, Kind: protocol.KindNotification,
				Method: "notifications/progress", Batch: -1, Raw: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)},
			{Seq: 16, SessionID: sid, ExchangeID: 7, Direction: protocol.ServerToClient, Time: at, Kind: protocol.KindNotification,
				Method: "notifications/message", Batch: -1, Raw: []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`),
				Links: capture.Links{Parent: 14}},
		},
	}
	var buf bytes.Buffer
	counts, err := replay.ExportCounted(ctx, st, nil, &buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	if want := (replay.ExportCounts{Sessions: 1, Messages: 5, Later: 2}); counts != want {
		t.Errorf("the export says it wrote %+v, want %+v", counts, want)
	}
	got, err := replay.ReadTape(&buf)
	if err != nil {
		t.Fatalf("the tape written while recording does not read back: %v", err)
	}
	var seqs []uint64
	for _, m := range got.Sessions[0].Messages {
		seqs = append(seqs, m.Seq)
	}
	if want := []uint64{10, 11, 12, 13, 15}; !slices.Equal(seqs, want) {
		t.Errorf("the tape holds messages %v, want %v", seqs, want)
	}
}

// ExportListed tells its caller the messages a whole store's sessions
// count (a progress report's total) once it has listed them, before the
// tape's first byte.
func TestExportListedSaysTheTotalFirst(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	want := 0
	for i, ts := range handTape().Sessions {
		s := *ts.Session
		s.ID = fmt.Sprintf("listed-%d", i)
		s.Messages = 3 + i
		want += s.Messages
		if err := st.Write(ctx, &capture.Batch{Sessions: []*capture.Session{&s}}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	got, calls := -1, 0
	if _, err := replay.ExportListed(ctx, st, nil, &buf, "test", func(n int) {
		got, calls = n, calls+1
		if buf.Len() != 0 {
			t.Errorf("the total came after %d bytes of the tape", buf.Len())
		}
	}); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || got != want {
		t.Errorf("listed was called %d times, last with %d; want once with %d", calls, got, want)
	}
	// Sessions named by the caller: it knows their total.
	calls = 0
	if _, err := replay.ExportListed(ctx, st, []string{"listed-0"}, io.Discard, "test", func(int) { calls++ }); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Errorf("listed was called for named sessions")
	}
}
