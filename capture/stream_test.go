package capture_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/protocol"
)

// A stdio server's traffic is one session of the stdio leg: every line in
// both directions a message, linked as over HTTP (a sampling request to the
// call in flight, the client's answer to it, the result to its call), stderr
// kept as log lines, a stdout line that is not JSON-RPC forwarded and named
// in a finding, and the command's secrets redacted everywhere.
func TestStreamRecordsAStdioSession(t *testing.T) {
	d := newDriver(t, nil)
	s := d.rec.OpenStream(&capture.StreamInfo{Name: "weather", Command: capture.Command{
		Args: []string{"node", "build/index.js", "--api-key", "sk-live-0123456789abcdef", "--port=3000"},
		Env:  []string{"WEATHER_TOKEN=tok-9f8e7d6c5b4a39281706", "NODE_ENV=production"},
		Dir:  "/srv/weather", PID: 4242,
	}})
	in := func(l string) { s.Line(protocol.ClientToServer, []byte(l)) }
	out := func(l string) { s.Line(protocol.ServerToClient, []byte(l)) }
	in(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"claude-ai","version":"0.1.0"}}}`)
	s.Stderr([]byte("weather server starting on stdio"))
	out(`Server listening on port 3000`)
	out(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"weather","version":"1.2.0"}}}`)
	in(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	in(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Paris"},"_meta":{"progressToken":"p1"}}}`)
	out(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1","progress":1}}`)
	out(`{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":9}}`)
	in(`{"jsonrpc":"2.0","id":0,"result":{"role":"assistant","content":{"type":"text","text":"sunny"},"model":"m"}}`)
	out(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"sunny; key sk-live-0123456789abcdef"}]}}`)
	s.Close("exited with code 3")

	ms := d.messages("s01")
	sess := d.session("s01")
	if sess.Leg != capture.LegStdio || sess.Route != "weather" || sess.Era != protocol.EraLegacy || sess.Client.Name != "claude-ai" || sess.Server.Name != "weather" {
		t.Errorf("session = leg %s route %q era %s client %q server %q", sess.Leg, sess.Route, sess.Era, sess.Client.Name, sess.Server.Name)
	}
	if sess.Status != capture.StatusClosed || sess.Command == nil || sess.Command.Exit != "exited with code 3" || sess.Command.PID != 4242 {
		t.Errorf("session status %s command %+v", sess.Status, sess.Command)
	}
	args := strings.Join(sess.Command.Args, " ")
	env := strings.Join(sess.Command.Env, " ")
	if strings.Contains(args, "sk-live") || strings.Contains(env, "tok-9f8e") || !strings.Contains(args, "--port=3000") || !strings.Contains(env, "NODE_ENV=production") {
		t.Errorf("command not redacted as expected: args %q env %q", args, env)
	}
	if len(ms) != 10 || sess.Messages != 10 {
		t.Fatalf("%d messages stored, session counts %d; want 10", len(ms), sess.Messages)
	}
	by := map[string]*capture.Message{}
	for _, m := range ms {
		if strings.Contains(string(m.Raw), "sk-live") {
			t.Errorf("message %d keeps the command's secret: %s", m.Seq, m.Raw)
		}
		switch {
		case m.Kind == protocol.KindStderr:
			by["stderr"] = m
		case m.Kind == protocol.KindInvalid:
			by["garbage"] = m
		case m.Kind == protocol.KindRequest:
			by[m.Method] = m
		case m.Kind == protocol.KindResult:
			by["result "+m.Method] = m
		case m.Kind == protocol.KindNotification:
			by[m.Method] = m
		}
	}
	if m := by["stderr"]; m == nil || string(m.Raw) != "weather server starting on stdio" || m.Direction != protocol.ServerToClient {
		t.Errorf("stderr line = %+v", m)
	}
	if m := by["garbage"]; m == nil || len(m.Findings) == 0 || !strings.Contains(m.Findings[0].Message, `"Server listening on port 3000"`) ||
		m.Findings[0].Kind != capture.FindingInvalidFrame {
		t.Errorf("the stdout line that is not JSON-RPC: %+v", m)
	}
	call, sampling := by[protocol.MethodToolsCall], by[protocol.MethodSampling]
	if call == nil || sampling == nil || sampling.Links.Parent != call.Seq {
		t.Fatalf("sampling request not linked to the call in flight: call %+v sampling %+v", call, sampling)
	}
	if r := by["result "+protocol.MethodSampling]; r == nil || r.Links.Request != sampling.Seq || r.Direction != protocol.ClientToServer {
		t.Errorf("the client's sampling answer = %+v", r)
	}
	if r := by["result "+protocol.MethodToolsCall]; r == nil || r.Links.Request != call.Seq {
		t.Errorf("the call's result = %+v", r)
	}
	if p := by[protocol.MethodProgress]; p == nil || p.Links.Request != call.Seq {
		t.Errorf("progress = %+v", p)
	}
	tree, text := d.tree("s01")
	if tree.Stderr != 1 || !strings.Contains(text, "sampling/createMessage") {
		t.Errorf("tree: %d stderr lines, text:\n%s", tree.Stderr, text)
	}
	var xs []*capture.Exchange
	for x, err := range d.store.Exchanges(t.Context(), "s01") {
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	if len(xs) != 1 || xs[0].Method != "STDIO" || xs[0].End.IsZero() || xs[0].RequestBytes == 0 || xs[0].ResponseBytes == 0 {
		t.Errorf("stream exchange = %+v", xs)
	}
}

// Two stdio servers at once are two sessions; neither's messages land in
// the other.
func TestStreamsAreSessionsOfTheirOwn(t *testing.T) {
	d := newDriver(t, nil)
	a := d.rec.OpenStream(&capture.StreamInfo{Name: "a", Command: capture.Command{Args: []string{"a"}}})
	b := d.rec.OpenStream(&capture.StreamInfo{Name: "b", Command: capture.Command{Args: []string{"b"}}})
	for _, s := range []*capture.Stream{a, b, a, b} {
		s.Line(protocol.ClientToServer, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		s.Line(protocol.ServerToClient, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}
	a.Close("")
	b.Close("")
	for _, id := range []string{"s01", "s02"} {
		ms := d.messages(id)
		if len(ms) != 4 {
			t.Errorf("session %s holds %d messages, want 4", id, len(ms))
		}
	}
}

// When the recording cannot keep up with a stdio server, the session is cut
// and marked, and every line not recorded is counted, not only the first
// (the wrap's note said "1 message could not be recorded" however many
// were lost).
func TestStreamCountsEveryLineItCannotRecord(t *testing.T) {
	mem := memstore.New()
	st := &gatedStore{Store: mem, open: make(chan struct{})}
	rec, err := capture.NewRecorder(context.Background(), st, &capture.RecorderOptions{QueueSize: 4, QueueBytes: 1 << 10, Backpressure: 20 * time.Millisecond, BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := rec.OpenStream(&capture.StreamInfo{Name: "busy"})
	line := []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", 200) + `"}}`)
	const n = 300
	for range n {
		s.Line(protocol.ServerToClient, line)
	}
	close(st.open)
	s.Close("exited with code 0")
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	stats := rec.Stats()
	var sessions []*capture.Session
	for sess, err := range mem.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, sess)
	}
	if len(sessions) != 1 {
		t.Fatalf("%d sessions, want one", len(sessions))
	}
	stored := sessions[0].Messages
	if stats.Dropped == 0 || int(stats.Dropped)+stored != n {
		t.Errorf("%d lines stored and %d counted as dropped, of %d: every line must be one or the other", stored, stats.Dropped, n)
	}
	if sessions[0].Status != capture.StatusIncomplete {
		t.Errorf("session %+v: want it marked incomplete", sessions[0])
	}
}

// While the store does not keep up, a stream's frames wait in its backlog
// file instead of being dropped: a burst many times the queue is recorded
// whole and in order once the store takes writes again, with nothing
// counted lost.
func TestStreamBacklogKeepsABurst(t *testing.T) {
	mem := memstore.New()
	st := &gatedStore{Store: mem, open: make(chan struct{})}
	spill := t.TempDir()
	rec, err := capture.NewRecorder(context.Background(), st, &capture.RecorderOptions{
		QueueSize: 8, QueueBytes: 64 << 10, Backpressure: time.Millisecond, SpillDir: spill,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rec.OpenStream(&capture.StreamInfo{Name: "burst", Command: capture.Command{Args: []string{"burst"}}})
	w := s.Writer(protocol.ServerToClient)
	const n = 20000
	for i := range n {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%d}}`, i)
		w.End()
		if i%50 == 49 {
			w.Flush() // one read's lines
		}
	}
	w.Flush()
	if entries, _ := os.ReadDir(spill); len(entries) != 0 {
		t.Errorf("the backlog left a name in the folder: %v", entries)
	}
	close(st.open)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close("exited with code 0")
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if stats := rec.Stats(); stats.Dropped != 0 || stats.Lost != 0 || stats.Stored != n {
		t.Errorf("stats %+v; want %d stored, none lost", stats, n)
	}
	var sess *capture.Session
	for x, err := range mem.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		sess = x
	}
	next := 0
	for m, err := range mem.Messages(context.Background(), sess.ID, capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`"data":%d}`, next); !strings.Contains(string(m.Raw), want) {
			t.Fatalf("message %d is %s; want the line with %s (in order)", next, m.Raw, want)
		}
		next++
	}
	if next != n || sess.Status != capture.StatusClosed || sess.Lost != 0 {
		t.Errorf("%d messages stored, session %s with %d lost; want %d, closed, none", next, sess.Status, sess.Lost, n)
	}
}

// A frame longer than the recorder keeps in memory goes through a file: it
// is stored whole and classified (a result linked to its request) when it
// fits the message size limit, and cut and marked when it does not.
func TestStreamLongFrames(t *testing.T) {
	d := newDriver(t, &capture.RecorderOptions{SpillDir: t.TempDir(), MaxMessageSize: 4 << 20})
	s := d.rec.OpenStream(&capture.StreamInfo{Name: "long", Command: capture.Command{Args: []string{"long"}}})
	s.Line(protocol.ClientToServer, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}}`))
	w := s.Writer(protocol.ServerToClient)
	body := strings.Repeat("x", 3<<20)
	parts := []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`, body, `"}]}}`}
	for _, part := range parts {
		w.Write([]byte(part))
	}
	w.End()
	w.Write([]byte(strings.Repeat("y", 6<<20)))
	w.End()
	w.Flush()
	s.Close("")
	ms := d.messages("s01")
	if len(ms) != 3 {
		t.Fatalf("%d messages, want 3", len(ms))
	}
	if r := ms[1]; r.Kind != protocol.KindResult || r.Links.Request != ms[0].Seq || r.Size != len(strings.Join(parts, "")) || !strings.HasSuffix(string(r.Raw), `"}]}}`) {
		t.Errorf("the 3 MiB result: kind %s, linked to %d (the request is %d), size %d", r.Kind, r.Links.Request, ms[0].Seq, r.Size)
	}
	if c := ms[2]; c.Size != 4<<20 || len(c.Findings) == 0 || c.Findings[0].Kind != capture.FindingOversize {
		t.Errorf("the 6 MiB line: size %d, findings %v; want it cut at 4 MiB and marked", c.Size, c.Findings)
	}
}

// rawReaderStore is a memory store that takes messages whose bytes are in
// a file (capture.RawReaderTaker), as the spool does, reading them itself.
type rawReaderStore struct{ *memstore.Store }

func (rawReaderStore) TakesRawReaders() {}

func (s rawReaderStore) Write(ctx context.Context, b *capture.Batch) error {
	for i, m := range b.Messages {
		if rr, ok := m.File.(capture.RawReader); ok && m.Raw == nil {
			c := *m
			c.Raw = make([]byte, rr.Len())
			if _, err := rr.ReadAt(c.Raw, 0); err != nil {
				return err
			}
			c.File = nil
			b.Messages[i] = &c
		}
	}
	return s.Store.Write(ctx, b)
}

// A long frame recorded from its skeleton (its bytes never in memory) is
// classified and linked, and not checked against what the skeleton left
// out: a 2 MiB tools/call whose arguments satisfy the tool's schema gets no
// schema finding (its skeleton's arguments are empty).
func TestStreamSkeletonIsNotChecked(t *testing.T) {
	mem := memstore.New()
	rec, err := capture.NewRecorder(context.Background(), rawReaderStore{mem}, &capture.RecorderOptions{SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := rec.OpenStream(&capture.StreamInfo{Name: "big", Command: capture.Command{Args: []string{"big"}}})
	s.Line(protocol.ClientToServer, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	s.Line(protocol.ServerToClient, []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"write","inputSchema":{"type":"object","required":["text"],"properties":{"text":{"type":"string"}}}}]}}`))
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write","arguments":{"text":"` + strings.Repeat("z", 2<<20) + `"}}}`
	s.Line(protocol.ClientToServer, []byte(call))
	s.Line(protocol.ServerToClient, []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`))
	s.Close("")
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ms []*capture.Message
	for sess, err := range mem.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range mem.Messages(context.Background(), sess.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
	}
	if len(ms) != 4 {
		t.Fatalf("%d messages", len(ms))
	}
	c := ms[2]
	if c.Kind != protocol.KindRequest || c.Method != "tools/call" || c.Name != "write" || string(c.Raw) != call || ms[3].Links.Request != c.Seq {
		t.Errorf("the long call: kind %s method %s name %q, whole %v, answered by %d", c.Kind, c.Method, c.Name, string(c.Raw) == call, ms[3].Links.Request)
	}
	if len(c.Findings) != 0 {
		t.Errorf("the long call got findings from its skeleton: %v", c.Findings)
	}
}
