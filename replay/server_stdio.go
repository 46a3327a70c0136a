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
	c := &stdioConn{s: s, ctx: ctx, cancel: cancel, w: bufio.NewWriterSize(w, 32<<10), out: w}
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

	mu  sync.Mutex // guards w
	w   *bufio.Writer
	out io.Writer // what w writes to

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

// inOrder waits until what c's recorded session sent on its own before
// sm is out: one pipe carries both, in the recorded order.
func (o stdioOut) inOrder(ctx context.Context, l *live, c *call, sm *msgRef) {
	l.waitOwn(ctx, c.rs, sm.Seq, o.c.s.opts.MaxGap+o.c.s.opts.AnswerTimeout)
}

// settle waits until the client read the pipe the connection writes to
// (see settler), or settleGap where it cannot tell.
func (o stdioOut) settle(ctx context.Context, written time.Time) {
	if !waitRead(ctx, o.c.out, maxSettle) {
		sleepUntil(ctx, written.Add(settleGap))
	}
}

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
	key, f := s.keyAndFacts(&m, nil)
	var rc *call
	var pools []*pool
	l := c.cur
	if m.Method == protocol.MethodInitialize {
		var exact bool
		if rc, exact = s.chooseInit(s.freePools(), &m, f); rc != nil {
			if rc.rs.sid {
				l = c.begin(rc.rs)
				s.mu.Lock()
				s.take(rc.rs)
				s.mu.Unlock()
			} else if l == nil || l.rs != nil {
				l = c.begin(nil)
			}
			s.served(l, rc, &m, &p, exact, false, nil)
		}
	}
	if rc == nil {
		if l == nil || (l.rs == nil && m.Method == protocol.MethodDiscover && c.startsOver(l, &m, key, f)) {
			l = c.begin(nil)
		}
		pools = s.freePools()
		if l.rs != nil {
			pools = []*pool{l.rs.pool}
		}
		rc = s.resolve(l, pools, &m, &p, key, f, nil)
	}
	if rc == nil {
		if m.Method == protocol.MethodPing {
			c.write(responseWithID([]byte(pingResult), m.ID))
			return
		}
		c.write(s.noteMiss(l, &m, f, pools))
		return
	}
	arrived := time.Now()
	l.begin(rc)
	c.answers.Go(func() {
		defer l.finished(rc)
		c.answer(l, rc, &m, &p, arrived)
	})
}

// freePools are the free pools of every route: a stdio client names none.
func (s *Server) freePools() []*pool {
	out := make([]*pool, 0, len(s.free))
	for _, p := range s.free {
		out = append(out, p)
	}
	return out
}

// startsOver reports whether a server/discover of l's has been answered
// with every recorded discover like it already: the client began again.
func (c *stdioConn) startsOver(l *live, m *protocol.Message, key string, f *reqFacts) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return c.s.peek(&l.use, c.s.freePools(), m, key, f) == matchUsed
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

// begin makes a new live client the connection's: the session rs (nil:
// a client without one, answered from every recorded session). What the
// recorded sessions it is answered from sent on their own goes out as
// they come, and list_changed faults write on the connection too.
func (c *stdioConn) begin(rs *recSession) *live {
	s := c.s
	if c.cur != nil {
		c.cur.end()
	}
	l := newLive(rs)
	c.cur = l
	c.bg.Go(func() { s.hold(c.ctx, stdioOut{c}, l, &openStream{}) })
	start := time.Now()
	own := func(rs *recSession) {
		l.startOwn(rs)
		at := rs.s.Start
		if len(rs.calls) > 0 {
			at = rs.calls[0].req.Time
		}
		c.bg.Go(func() { c.standalone(l, rs, at, start) })
	}
	l.onTake = own
	if rs != nil {
		l.taken[rs] = true
		own(rs)
	}
	return l
}

// standalone replays what the recorded server sent on its own (the GET
// stream of an HTTP recording), each message after the request that set
// it off, paced from the session's start: at, recorded; start, live. On
// one pipe a message also follows what that request's own stream sent
// before it in the recording.
func (c *stdioConn) standalone(l *live, rs *recSession, at, start time.Time) {
	s := c.s
	pc := &pacer{prevRec: at, prevLive: start}
	defer func() { l.ownAt(rs, len(rs.get), 0, true) }()
	for i, sm := range rs.get {
		trigger := rs.trigger(sm.Seq)
		l.ownAt(rs, i, trigger, false)
		if !s.pace(c.ctx, l, rs, pc, sm, trigger, nil) {
			return
		}
		l.ownAt(rs, i, 0, false)
		l.waitStream(c.ctx, rs.callAt(trigger), sm.Seq, s.opts.MaxGap+s.opts.AnswerTimeout)
		if !s.emit(c.ctx, stdioOut{c}, l, &call{rs: rs}, sm, &protocol.Message{}, &protocol.Params{}) {
			return
		}
		l.ownAt(rs, i+1, 0, false)
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
