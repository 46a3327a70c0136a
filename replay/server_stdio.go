package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// MaxStdioLine bounds one line a stdio client sends the replay server (as
// the HTTP handler bounds a request body): a longer line is answered with
// a JSON-RPC error and skipped.
const MaxStdioLine = 64 << 20

// CodeFault is the JSON-RPC error code a stdio replay answers in place of
// an injected HTTP status fault: a stdio server has no status to give.
const CodeFault = -32000

// ErrFaultCut is returned by ServeStdio when a dropAfterEvents fault ended
// the connection, as a server that crashed mid-answer would.
var ErrFaultCut = errors.New("a dropAfterEvents fault ended the connection")

// ServeStdio serves one stdio client: newline-delimited JSON-RPC read
// from in (the client's side of the server's stdin) and written to w (its
// stdout), one message per line. The connection is one live client, as
// one HTTP session is: its initialize (or server/discover, or first
// request) gives it a recorded session the way the HTTP handler would,
// whichever transport the tape was recorded over; requests are matched,
// answered and paced the same, server→client requests are written to w
// and the client's answers awaited, the faults and the strict report are
// the same (an injected HTTP status becomes a [CodeFault] error; a
// dropAfterEvents fault ends the connection, see [ErrFaultCut]). What the
// recorded server sent on its own — the standalone GET stream of an HTTP
// recording, the unsolicited messages of a stdio one — is written to w as
// it comes, each after the request that set it off.
//
// ServeStdio returns nil when in ends (the client closed the server's
// stdin) or the server is closed; ctx's error when ctx ends; the write
// error when w fails. A read blocked on in is the caller's to end (close
// it). Logs go to [ServerOptions].Logger, never to w.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, w io.Writer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &stdioConn{s: s, ctx: ctx, cancel: cancel, w: bufio.NewWriterSize(w, 32<<10)}
	lines := make(chan stdioLine)
	go readLines(ctx, in, lines)
	defer func() {
		cancel(nil)
		if c.cur != nil {
			c.cur.end()
		}
		c.answers.Wait()
		c.bg.Wait()
	}()
	for {
		select {
		case ln, ok := <-lines:
			if !ok {
				c.finish()
				return c.err()
			}
			c.dispatch(ln)
		case <-ctx.Done():
			return c.err()
		case <-s.closed:
			return c.err()
		}
	}
}

// stdioConn is one stdio client of a replay server.
type stdioConn struct {
	s       *Server
	ctx     context.Context
	cancel  context.CancelCauseFunc
	answers sync.WaitGroup // the answers under way
	bg      sync.WaitGroup // the session's own streams

	mu sync.Mutex // guards w
	w  *bufio.Writer

	cur *live // the live session; the read loop's alone
}

// err is why the connection ended: nil for the client's end of input or
// the server's Close.
func (c *stdioConn) err() error { return context.Cause(c.ctx) }

// stdioLine is one line from the client, or the sign that one was longer
// than MaxStdioLine.
type stdioLine struct {
	b       []byte
	tooLong bool
}

// readLines sends in's lines until it ends, then closes lines.
func readLines(ctx context.Context, in io.Reader, lines chan<- stdioLine) {
	defer close(lines)
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		var buf []byte
		tooLong := false
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			if !tooLong && len(buf)+len(frag) > MaxStdioLine {
				tooLong, buf = true, nil
			}
			if !tooLong {
				buf = append(buf, frag...)
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if len(buf) > 0 || tooLong {
			select {
			case lines <- stdioLine{b: buf, tooLong: tooLong}:
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// write sends one message on its own line and flushes it; a message
// recorded over HTTP may span lines, and is compacted onto one. A failed
// write ends the connection.
func (c *stdioConn) write(msg []byte) error {
	if bytes.ContainsAny(msg, "\r\n") {
		var b bytes.Buffer
		if json.Compact(&b, msg) == nil {
			msg = b.Bytes()
		} else {
			msg = bytes.Map(func(r rune) rune {
				if r == '\n' || r == '\r' {
					return ' '
				}
				return r
			}, msg)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.w.Write(msg)
	if err == nil {
		err = c.w.WriteByte('\n')
	}
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.cancel(fmt.Errorf("writing to the client: %w", err))
	}
	return err
}

// stdioOut writes a replayed stream as lines.
type stdioOut struct{ c *stdioConn }

func (o stdioOut) send(_ *capture.Message, data []byte) error { return o.c.write(data) }

// frame writes a recorded line that is not JSON-RPC as it was (a stdio
// server's stray output); an SSE frame has no place on stdio.
func (o stdioOut) frame(sm *capture.Message) error {
	if sm.Kind != protocol.KindInvalid || len(bytes.TrimSpace(sm.Raw)) == 0 {
		return nil
	}
	return o.c.write(sm.Raw)
}

// dispatch handles one line from the client. Requests are matched here,
// in the order they came, and answered in the background.
func (c *stdioConn) dispatch(ln stdioLine) {
	s := c.s
	if ln.tooLong {
		s.fail(false, "a stdio client sent a line longer than %d MiB; it was skipped", MaxStdioLine>>20)
		c.write(errorResponse(nil, &RPCError{Code: -32700, Message: fmt.Sprintf("mcptape replay: the line is longer than %d MiB; it was skipped", MaxStdioLine>>20)}))
		return
	}
	line := bytes.TrimRight(ln.b, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	m := protocol.Decode(line)
	switch m.Kind {
	case protocol.KindInvalid:
		c.write(errorResponse(nil, &RPCError{Code: -32700, Message: "mcptape replay: " + m.Problem}))
		return
	case protocol.KindResult, protocol.KindError:
		if c.cur == nil {
			s.fail(true, "the client answered id %s before it began a session", m.ID)
			return
		}
		s.deliver(c.cur, &m)
		return
	case protocol.KindNotification:
		return
	}
	p, _ := protocol.ParseParams(m.Params)
	key := s.matchKey(&m)
	l := c.liveFor(&m, &p, key)
	if l == nil {
		c.write(s.noteMiss(nil, &m, key))
		return
	}
	rc := s.resolve(l, &m, &p, key)
	if rc == nil {
		if m.Method == protocol.MethodPing {
			c.write(responseWithID([]byte(pingResult), m.ID))
			return
		}
		c.write(s.noteMiss(l, &m, key))
		return
	}
	arrived := time.Now()
	l.begin(rc)
	c.answers.Go(func() {
		defer l.finished(rc)
		c.answer(l, rc, &m, &p, arrived)
	})
}

// finish lets the answers under way go out when the client's input ends
// (`echo '{…}' | mcptape replay server --stdio` gets its answer), waiting
// at most maxDrain; a replayed request can get no answer any more.
func (c *stdioConn) finish() {
	if c.cur != nil {
		c.cur.inputEnded()
	}
	done := make(chan struct{})
	go func() { c.answers.Wait(); close(done) }()
	t := time.NewTimer(maxDrain)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.s.log.Warn("the client's input ended; answers still under way are cut", "after", maxDrain)
	case <-c.ctx.Done():
	}
}

// liveFor is the live session a request belongs to: the connection's,
// unless the request begins another — an initialize, or a server/discover
// its session has no answer left for — or none began yet.
func (c *stdioConn) liveFor(m *protocol.Message, p *protocol.Params, key string) *live {
	s := c.s
	switch {
	case m.Method == protocol.MethodInitialize:
	case m.Method == protocol.MethodDiscover && c.cur != nil && s.discoverCall(c.cur, m, false) != nil:
		return c.cur
	case m.Method != protocol.MethodDiscover && c.cur != nil:
		return c.cur
	}
	s.mu.Lock()
	var rs *recSession
	if m.Method == protocol.MethodInitialize {
		rs = s.pickInitialize("", m)
	} else {
		rs = s.pick("", s.fits(m, p.Modern), func(rs *recSession) int { return s.clientDistance(rs, p, m, key) })
	}
	// A legacy session's discover probe is answered without taking the
	// session: its initialize takes it, as over HTTP.
	if rs != nil && (rs.s.Era == protocol.EraModern || m.Method != protocol.MethodDiscover) {
		s.take(rs)
	}
	s.mu.Unlock()
	if rs == nil {
		return nil
	}
	if c.cur != nil {
		c.cur.end()
	}
	l := newLive(rs)
	c.cur = l
	// The stream every stdio client has: list_changed faults write there,
	// and what the recorded server sent on its own.
	c.bg.Go(func() { s.hold(c.ctx, stdioOut{c}, l, &openStream{}) })
	start, at := time.Now(), rs.s.Start
	if len(rs.calls) > 0 {
		at = rs.calls[0].req.Time
	}
	c.bg.Go(func() { c.standalone(l, at, start) })
	return l
}

// standalone replays what the recorded server sent on its own (the GET
// stream of an HTTP recording), each message after the request that set
// it off, paced from the session's start: at, recorded; start, live. On
// one pipe a message also follows what that request's own stream sent
// before it in the recording.
func (c *stdioConn) standalone(l *live, at, start time.Time) {
	s := c.s
	pc := &pacer{prevRec: at, prevLive: start}
	for _, sm := range l.rs.get {
		trigger := l.rs.trigger(sm.Seq)
		if !s.pace(c.ctx, l, pc, sm, trigger, nil) {
			return
		}
		l.waitStream(c.ctx, l.rs.callAt(trigger), sm.Seq, s.opts.MaxGap+s.opts.AnswerTimeout)
		if !s.emit(c.ctx, stdioOut{c}, l, &call{}, sm, &protocol.Message{}, &protocol.Params{}) {
			return
		}
	}
}

// answer replays a recorded call's stream to the client, after its faults.
func (c *stdioConn) answer(l *live, rc *call, m *protocol.Message, p *protocol.Params, arrived time.Time) {
	s := c.s
	fp, ok := s.planFaults(c.ctx, m.Method, p.Name)
	switch {
	case !ok:
		return
	case fp.status != 0:
		c.write(errorResponse(m.ID, &RPCError{Code: CodeFault, Message: fmt.Sprintf(
			"mcptape replay: injected fault: HTTP status %d (a stdio server has no HTTP status; this error stands for it)", fp.status)}))
		return
	case fp.err != nil:
		c.write(errorResponse(m.ID, fp.err))
		return
	}
	if rc.x != nil && rc.x.ResponseBody != capture.BodySSE && s.responseOf(rc) == nil {
		// A JSON exchange of an HTTP recording that holds no answer: over
		// HTTP the client gets CodeNoAnswer, not a stream held open.
		c.write(s.noteUnanswered(l, rc, m, p))
		return
	}
	if s.replayStream(c.ctx, stdioOut{c}, l, rc, m, p, &fp, arrived) == streamCut {
		s.log.Warn("a dropAfterEvents fault ends the stdio connection", "method", m.Method, "name", p.Name)
		c.cancel(ErrFaultCut)
	}
}
