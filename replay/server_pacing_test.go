package replay_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// getStreamTape is a legacy session recorded with these times after its
// start: initialize; the standalone GET stream opened at 10 ms; a tools/call
// at 100 ms answered at 110 ms; on the GET stream, two log notifications
// the call set off, at 150 ms and 160 ms; the client's DELETE at 163 ms.
func getStreamTape() *replay.Tape {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	x := func(id uint64, method string, status int, body capture.BodyKind, ms int) *capture.Exchange {
		return &capture.Exchange{ID: id, SessionID: "s", Method: method, URL: "/mcp", Status: status, Start: at(ms), End: at(ms + 1),
			RequestHeader: http.Header{}, ResponseHeader: http.Header{}, ResponseBody: body}
	}
	msg := func(seq, xid uint64, dir protocol.Direction, ms int, raw string, links capture.Links) *capture.Message {
		d := protocol.Decode([]byte(raw))
		return &capture.Message{Seq: seq, SessionID: "s", ExchangeID: xid, Direction: dir, Time: at(ms), Kind: d.Kind, Method: d.Method,
			ID: d.ID, Raw: []byte(raw), Size: len(raw), Batch: -1, Links: links}
	}
	c2s, s2c := protocol.ClientToServer, protocol.ServerToClient
	return &replay.Tape{Sessions: []*replay.TapeSession{{
		Session: &capture.Session{ID: "s", Era: protocol.EraLegacy, Version: "2025-11-25", Path: "/mcp", Opening: "initialize", Start: t0},
		Exchanges: []*capture.Exchange{
			x(1, "POST", 200, capture.BodyJSON, 0), x(2, "POST", 202, capture.BodyEmpty, 2), x(3, "GET", 200, capture.BodySSE, 10),
			x(4, "POST", 200, capture.BodyJSON, 100), x(5, "DELETE", 200, capture.BodyEmpty, 163),
		},
		Messages: []*capture.Message{
			msg(1, 1, c2s, 0, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, capture.Links{}),
			msg(2, 1, s2c, 1, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"logging":{}},"serverInfo":{"name":"s","version":"1"}}}`, capture.Links{Request: 1}),
			msg(3, 2, c2s, 2, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, capture.Links{}),
			msg(4, 4, c2s, 100, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"go","arguments":{}}}`, capture.Links{}),
			msg(5, 4, s2c, 110, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"went"}]}}`, capture.Links{Request: 4}),
			msg(6, 3, s2c, 150, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"n1"}}`, capture.Links{}),
			msg(7, 3, s2c, 160, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"n2"}}`, capture.Links{}),
		},
	}}}
}

// streamWriter is an http.ResponseWriter that hands each write of a
// streaming response over as it happens, with the (bubble) time.
type streamWriter struct {
	h      http.Header
	code   int
	writes chan streamWrite
}

type streamWrite struct {
	at   time.Time
	data string
}

func newStreamWriter() *streamWriter {
	return &streamWriter{h: http.Header{}, writes: make(chan streamWrite, 64)}
}

func (w *streamWriter) Header() http.Header { return w.h }
func (w *streamWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *streamWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.writes <- streamWrite{time.Now(), string(b)}
	return len(b), nil
}
func (w *streamWriter) Flush() {}

// legacyRequest is a request of the live session sid (none when empty).
func legacyRequest(ctx context.Context, method, sid, body string) *http.Request {
	r := httptest.NewRequestWithContext(ctx, method, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		r.Header.Set("Mcp-Session-Id", sid)
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return r
}

// openGetStream initializes a live session of getStreamTape's server and
// opens its GET stream; it returns the session id and the stream's writes,
// closed when the stream handler returns.
func openGetStream(t *testing.T, s *replay.Server, ctx context.Context) (string, chan streamWrite, *sync.WaitGroup) {
	t.Helper()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, legacyRequest(ctx, "POST", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
	sid := w.Result().Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	s.ServeHTTP(httptest.NewRecorder(), legacyRequest(ctx, "POST", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	gw := newStreamWriter()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(gw.writes)
		s.ServeHTTP(gw, legacyRequest(ctx, "GET", sid, ""))
	})
	return sid, gw.writes, &wg
}

// notes reads the log notifications a GET stream carries, with the time
// each arrived, until the stream ends or n have come.
func notes(writes chan streamWrite, n int) (data []string, at []time.Time) {
	for w := range writes {
		for _, d := range []string{"n1", "n2"} {
			if strings.Contains(w.data, `"data":"`+d+`"`) {
				data, at = append(data, d), append(at, w.at)
			}
		}
		if len(data) == n {
			break
		}
	}
	return data, at
}

// A notification on the standalone GET stream is paced from the later, in
// the recording, of the stream's previous event and the request that set
// it off, counted from when that happened live: a client slower than the
// recorded one gets it the recorded 50 ms after its call, not that plus
// the gap since the stream opened.
func TestGetStreamPacedFromItsTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s, err := replay.NewServerHandler(getStreamTape(), &replay.ServerOptions{Timing: replay.TimingRecorded, Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sid, writes, wg := openGetStream(t, s, ctx)
		time.Sleep(500 * time.Millisecond) // a slower client than the recorded one
		called := time.Now()
		w := httptest.NewRecorder()
		s.ServeHTTP(w, legacyRequest(ctx, "POST", sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"go","arguments":{}}}`))
		if !strings.Contains(w.Body.String(), `"went"`) {
			t.Fatalf("tools/call: %d %s", w.Code, w.Body)
		}
		data, at := notes(writes, 2)
		if len(data) != 2 {
			t.Fatalf("the GET stream carried %q", data)
		}
		for i, want := range []time.Duration{50 * time.Millisecond, 60 * time.Millisecond} {
			if got := at[i].Sub(called); got != want {
				t.Errorf("%s came %v after the call that set it off; recorded %v", data[i], got, want)
			}
		}
		cancel()
		wg.Wait()
		if r := s.Report(); !r.OK() {
			t.Errorf("strict replay: %q", r.Failures)
		}
	})
}

// What the recording carried on the GET stream before the client's DELETE
// reaches a client that sends its DELETE sooner than the recorded one did,
// before the session ends; the DELETE is answered after.
func TestDeleteDeliversWhatWasRecordedBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s, err := replay.NewServerHandler(getStreamTape(), &replay.ServerOptions{Timing: replay.TimingRecorded, Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sid, writes, wg := openGetStream(t, s, ctx)
		s.ServeHTTP(httptest.NewRecorder(), legacyRequest(ctx, "POST", sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"go","arguments":{}}}`))
		time.Sleep(5 * time.Millisecond)
		deleted := time.Now()
		dw := newStreamWriter()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeHTTP(dw, legacyRequest(ctx, "DELETE", sid, ""))
		}()
		data, at := notes(writes, 2)
		if strings.Join(data, ",") != "n1,n2" {
			t.Fatalf("after a DELETE the GET stream carried %q, want n1,n2 (recorded before the DELETE)", data)
		}
		for i := range at {
			if at[i].Sub(deleted) > 0 {
				t.Errorf("%s came %v after the DELETE; what was recorded before it goes at once", data[i], at[i].Sub(deleted))
			}
		}
		<-done
		if dw.code != http.StatusOK {
			t.Errorf("DELETE: %d", dw.code)
		}
		wg.Wait() // the GET stream ended with the session
		w := httptest.NewRecorder()
		s.ServeHTTP(w, legacyRequest(ctx, "POST", sid, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`))
		if w.Code != http.StatusNotFound || !bytes.Contains(w.Body.Bytes(), []byte("session not found")) {
			t.Errorf("a request after DELETE: %d %s", w.Code, w.Body)
		}
	})
}

// A call's response waits for no later request. Each direction is timed
// apart when recording (a stdio wrap reads the client's and the server's
// pipes on their own), so a recording can show the client's next request
// a few microseconds before the response the client waited for; that
// request sets the response off no more than any other.
func TestResponseWaitsForNoLaterRequest(t *testing.T) {
	tape := getStreamTape()
	ts := tape.Sessions[0]
	at := ts.Messages[3].Time // the call, at 100 ms
	msg := func(seq uint64, dir protocol.Direction, d time.Duration, raw string, links capture.Links) *capture.Message {
		m := protocol.Decode([]byte(raw))
		return &capture.Message{Seq: seq, SessionID: "s", ExchangeID: 4, Direction: dir, Time: at.Add(d), Kind: m.Kind, Method: m.Method,
			ID: m.ID, Raw: []byte(raw), Size: len(raw), Batch: -1, Links: links}
	}
	// The call at 100 ms; the client's next request at 110 ms; the
	// call's response stamped 6 µs after it.
	ts.Messages = append(ts.Messages[:4],
		msg(5, protocol.ClientToServer, 10*time.Millisecond, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, capture.Links{}),
		msg(6, protocol.ServerToClient, 10*time.Millisecond+6*time.Microsecond, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"went"}]}}`, capture.Links{Request: 4}),
		msg(7, protocol.ServerToClient, 11*time.Millisecond, `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}`, capture.Links{Request: 5}))
	ts.Exchanges[3].ResponseBody = capture.BodySSE
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingRecorded, Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		w := httptest.NewRecorder()
		s.ServeHTTP(w, legacyRequest(ctx, "POST", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
		sid := w.Result().Header.Get("Mcp-Session-Id")
		start := time.Now()
		w = httptest.NewRecorder()
		s.ServeHTTP(w, legacyRequest(ctx, "POST", sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"go","arguments":{}}}`))
		if !strings.Contains(w.Body.String(), `"went"`) {
			t.Fatalf("tools/call: %d %s", w.Code, w.Body)
		}
		if took := time.Since(start); took != 10*time.Millisecond+6*time.Microsecond {
			t.Errorf("the call's response came after %v; recorded after 10.006ms", took)
		}
	})
}
