package capture

import (
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/mcptape/mcptape/protocol"
)

// StreamInfo describes a stdio leg: one server process, and the client
// that talks to it over the process's stdin and stdout.
type StreamInfo struct {
	// Name names the server (`wrap --name`); it becomes the session's
	// Route.
	Name string
	// Command is the process as launched. The recorder redacts it (an
	// argument or an environment value that looks like a secret) before
	// storing it, and scrubs those secrets from every message too.
	Command Command
}

// Stream reports the traffic of one stdio server to the recorder: every
// line either side wrote, and the server's stderr. It is one session with
// one exchange that lasts as long as the process. Line, Stderr and Close
// must be called from one goroutine per direction at most; each copies
// what it is given and never blocks longer than the recorder's
// backpressure bound.
type Stream struct {
	r      *Recorder
	id     uint64
	broken atomic.Bool // an event was dropped
	ended  atomic.Bool
}

// OpenStream starts recording a stdio server. It returns nil when the
// recorder is closed; a nil *Stream accepts every call and does nothing.
func (r *Recorder) OpenStream(info *StreamInfo) *Stream {
	if r == nil || r.closing.Load() {
		return nil
	}
	s := &Stream{r: r, id: r.nextExchange.Add(1)}
	i := *info
	r.exchanges.Add(1)
	r.inflight.Add(1)
	s.send(event{kind: evStreamOpen, stream: &i})
	return s
}

// ID is the stream's exchange id in the store.
func (s *Stream) ID() uint64 {
	if s == nil {
		return 0
	}
	return s.id
}

func (s *Stream) send(ev event) {
	if s == nil {
		return
	}
	if ev.kind != evEnd && s.broken.Load() {
		// The session is already cut: what follows is not recorded
		// either (a record with a hole in the middle would mislead), but
		// it is counted.
		s.r.dropped.Add(1)
		return
	}
	ev.x = s.id
	if ev.at.IsZero() {
		ev.at = s.r.opts.Now()
	}
	if !s.r.send(ev, true) {
		if !s.broken.Swap(true) && !s.r.closing.Load() {
			s.r.log.Warn("the recording cannot keep up: this stdio session is recorded no further, its traffic goes on", "session", s.id)
		}
		s.r.dropped.Add(1)
	}
}

// Line reports one line a side wrote, without its newline: dir
// ClientToServer for the server's stdin, ServerToClient for its stdout.
func (s *Stream) Line(dir protocol.Direction, line []byte) {
	if s == nil {
		return
	}
	d := append([]byte(nil), line...)
	s.send(event{kind: evLine, dir: dir, data: d, weight: int64(len(d))})
}

// Stderr reports one line the server wrote to its standard error.
func (s *Stream) Stderr(line []byte) {
	if s == nil {
		return
	}
	d := append([]byte(nil), line...)
	s.send(event{kind: evStderr, data: d, weight: int64(len(d))})
}

// Close ends the stream: exit says how the process ended ("exited with
// code 3"), "" when it is not known.
func (s *Stream) Close(exit string) {
	if s == nil || s.ended.Swap(true) {
		return
	}
	s.send(event{kind: evEnd, errText: exit, broken: s.broken.Load()})
	s.r.inflight.Add(-1)
}

// streamOpen starts a stdio stream's session and exchange.
func (p *pipeline) streamOpen(ev event) {
	info := ev.stream
	xs := &exchange{out: p.out, groups: p.groups, stream: true, leg: LegStdio, route: info.Name, mcp: true, reqDone: true, resp: true, respLen: -1}
	cmd := p.out.red.command(info.Command)
	xs.x = Exchange{
		ID: ev.x, Method: "STDIO", URL: strings.Join(cmd.Args, " "), Start: ev.at, FirstByte: ev.at,
		RequestBody: BodyJSON, ResponseBody: BodyJSON,
	}
	p.xs[ev.x] = xs
	st := p.groups.newSession(xs, ev.at, "stdio")
	st.s.Command = &cmd
	xs.sess = st
	xs.x.SessionID = st.s.ID
	st.s.Exchanges++
	// Readers see a stdio session as soon as it starts.
	st.urgent = true
	p.out.dirtyX[ev.x] = xs
}

// maxQuoted bounds how much of a line a finding quotes.
const maxQuoted = 120

// streamLine records one line of a stdio stream.
func (p *pipeline) streamLine(xs *exchange, ev event) {
	n := int64(len(ev.data)) + 1
	if ev.dir == protocol.ClientToServer {
		xs.x.RequestBytes += n
	} else {
		xs.x.ResponseBytes += n
	}
	if len(ev.data) > p.o.MaxMessageSize {
		m := p.out.invalidMsg(xs, ev.dir, ev.data[:p.o.MaxMessageSize], ev.at, FindingOversize,
			fmt.Sprintf("line longer than %d bytes; stored cut", p.o.MaxMessageSize))
		p.out.add(xs, m, nil)
		p.out.touch(xs.sess, ev.at)
		return
	}
	msgs := protocol.Split(ev.data)
	for i := range msgs {
		pm := &msgs[i]
		if pm.Kind == protocol.KindInvalid && pm.Batch < 0 {
			who, reader := "stdout", "the client"
			if ev.dir == protocol.ClientToServer {
				who, reader = "stdin", "the server"
			}
			m := p.out.invalidMsg(xs, ev.dir, ev.data, ev.at, FindingInvalidFrame,
				fmt.Sprintf("a %s line that is not JSON-RPC (%s fails on it, e.g. \"Unexpected token … is not valid JSON\"): %s",
					who, reader, quoteLine(ev.data)))
			p.out.add(xs, m, nil)
			continue
		}
		p.out.message(xs, ev.dir, pm, ev.at, nil, true) // ev.data is the pipeline's
	}
	p.out.touch(xs.sess, ev.at)
}

// streamStderr records a line of the server's standard error.
func (p *pipeline) streamStderr(xs *exchange, ev event) {
	p.out.seq++
	raw, _ := p.out.red.body(ev.data)
	m := &Message{
		Seq: p.out.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: protocol.ServerToClient,
		Time: ev.at, Kind: protocol.KindStderr, Batch: -1, Raw: raw, Size: len(raw),
	}
	p.out.add(xs, m, nil)
	p.out.touch(xs.sess, ev.at)
}

// streamEnd finishes a stdio stream: the process ended.
func (p *pipeline) streamEnd(xs *exchange, ev event) {
	delete(p.xs, xs.x.ID)
	xs.x.End = ev.at
	st := xs.sess
	switch {
	case ev.aborted:
		xs.x.Error, xs.x.Aborted = ev.errText, true
	case ev.errText != "" && st.s.Command != nil:
		// A new Command: a batch on its way to the store holds the old.
		c := *st.s.Command
		c.Exit = ev.errText
		st.s.Command = &c
	}
	if ev.broken {
		st.s.Status = StatusIncomplete
		st.s.Lost++
		st.s.LossReason = fmt.Sprintf("the store could not keep up for %s, so part of the stream was not recorded", p.o.Backpressure)
	}
	st.s.Status = closedUnlessIncomplete(st.s.Status)
	st.urgent = true
	p.out.dirtyX[xs.x.ID] = xs
	p.out.touch(st, ev.at)
}

// quoteLine quotes the start of a line for a finding.
func quoteLine(b []byte) string {
	cut := len(b) > maxQuoted
	if cut {
		b = b[:maxQuoted]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	q := fmt.Sprintf("%q", b)
	if cut {
		q += "…"
	}
	return q
}
