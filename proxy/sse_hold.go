package proxy

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// sseHold is the body of an SSE response a rule or --answer may concern:
// the relay reads the stream from it and writes what it returns to
// the client. A pump goroutine reads the upstream; Read splits what it
// read into events and returns each at once, except the events whose
// message is to be held or answered: each of those waits in a goroutine of
// its own (settle), and what it becomes is returned when it is decided,
// wherever the stream has got to by then. So only the held message waits.
//
// The recorder hears of every event here (the tee's reporting is off for
// this body): a held event as it came in, with what became of it, when it
// is released. Read, Close and the Tap run on the relay's
// goroutine.
type sseHold struct {
	c      *callInfo
	up     io.ReadCloser
	ctx    context.Context
	cancel context.CancelFunc
	chunks chan chunk
	// consumed hands the pump's buffer back once Read has split a chunk:
	// one pooled buffer per stream.
	consumed chan struct{}
	done     chan struct{} // the pump has ended

	split    protocol.SSESplitter // Max: maxHold
	out      []byte               // what to return next
	upDone   bool                 // the upstream ended (upErr, or io.EOF)
	upErr    error
	pending  int          // held events not released yet
	released chan release // decided

	wg     sync.WaitGroup
	mu     sync.Mutex
	orphan []release // released after Close began: reported by Close
}

type chunk struct {
	data []byte
	err  error
}

// release is a held event, decided.
type release struct {
	recv []byte // the SSE block as it came in
	msg  []byte // the message in it
	out  []byte // the message to pass on, nil for none
	note *capture.Intercepted
	ack  chan struct{} // closed once the recorder has heard of it
}

func newSSEHold(c *callInfo, up io.ReadCloser) *sseHold {
	h := &sseHold{c: c, up: up, chunks: make(chan chunk), consumed: make(chan struct{}, 1), done: make(chan struct{}), released: make(chan release)}
	h.split.Max = maxHold
	h.ctx, h.cancel = context.WithCancel(c.x.ctx)
	go h.pump()
	return h
}

// pump reads the upstream until it ends or the body is closed.
func (h *sseHold) pump() {
	defer close(h.done)
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	for {
		n, err := h.up.Read(*buf)
		if n > 0 || err != nil {
			select {
			case h.chunks <- chunk{(*buf)[:n], err}:
			case <-h.ctx.Done():
				return
			}
			select {
			case <-h.consumed:
			case <-h.ctx.Done():
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (h *sseHold) Read(p []byte) (int, error) {
	for {
		if len(h.out) > 0 {
			n := copy(p, h.out)
			h.out = h.out[n:]
			return n, nil
		}
		if h.upDone && h.pending == 0 {
			// What is left is an event the stream ended in the middle of:
			// it goes on as it is.
			if rest := h.split.Rest(); len(rest) > 0 {
				h.pass(rest)
				continue
			}
			return 0, h.upErr
		}
		chunks := h.chunks
		if h.upDone {
			chunks = nil
		}
		select {
		case c := <-chunks:
			if len(c.data) > 0 {
				h.split.Feed(c.data, h.segment) // copies what it keeps
			}
			if c.err != nil {
				h.upDone, h.upErr = true, c.err
			}
			h.consumed <- struct{}{}
		case r := <-h.released:
			h.pending--
			h.report(r)
			close(r.ack)
			if r.out != nil {
				h.out = append(h.out, rebuildEvent(r.recv, r.msg, r.out)...)
			}
		case <-h.ctx.Done():
			return 0, context.Cause(h.ctx)
		}
	}
}

// pass reports bytes that go on untouched and queues them.
func (h *sseHold) pass(b []byte) {
	h.c.x.tap.ResponseBody(b)
	h.out = append(h.out, b...)
}

// report tells the recorder of a released event: as it came in, with what
// became of it.
func (h *sseHold) report(r release) {
	h.c.x.tap.Intercepted(protocol.ServerToClient, r.note)
	h.c.x.tap.ResponseBody(r.recv)
}

// segment takes one piece of the stream from the splitter: a whole event,
// or bytes of one too large to hold.
func (h *sseHold) segment(b []byte, event bool) {
	if !event {
		h.pass(b)
		return
	}
	msg, ok := eventMessage(b)
	if !ok || !h.c.concerns(&msg) {
		h.pass(b)
		return
	}
	recv := bytes.Clone(b)
	m := msg
	m.Raw = bytes.Clone(msg.Raw)
	h.pending++
	h.wg.Go(func() {
		out, note, after := h.c.settle(h.ctx, &m)
		r := release{recv: recv, msg: m.Raw, out: out, note: note, ack: make(chan struct{})}
		if note == nil {
			r.note = &capture.Intercepted{}
		}
		select {
		case h.released <- r:
			select {
			case <-r.ack:
			case <-h.ctx.Done():
			}
		case <-h.ctx.Done():
			h.mu.Lock()
			h.orphan = append(h.orphan, r)
			h.mu.Unlock()
		}
		if after != nil {
			after()
		}
	})
}

// eventMessage decodes the one JSON-RPC message an SSE event carries.
func eventMessage(block []byte) (protocol.Message, bool) {
	var ps protocol.SSEParser
	var m protocol.Message
	ok := false
	emit := func(e *protocol.Event) {
		if ok || !e.IsMessage() || protocol.IsBatch(e.Data) {
			return
		}
		m = protocol.Decode(bytes.Clone(e.Data))
		ok = m.Kind.IsRPC()
	}
	ps.Feed(block, emit)
	ps.Close(emit)
	return m, ok
}

// Close ends the stream: the pump and the held events' waits stop, and the
// recorder hears of every held event that never went on.
func (h *sseHold) Close() error {
	h.cancel()
	err := h.up.Close()
	h.wg.Wait()
	<-h.done
	for {
		select {
		case r := <-h.released:
			h.orphan = append(h.orphan, r)
			continue
		default:
		}
		break
	}
	for _, r := range h.orphan {
		if r.note == nil {
			r.note = &capture.Intercepted{}
		}
		r.note.Note += "; the stream to the client ended before it went on"
		r.note.Sent = nil
		h.report(r)
	}
	h.orphan = nil
	return err
}

// rebuildEvent is an SSE block carrying out instead of msg: as received
// when out is msg, else its lines other than data (id, event, retry,
// comments) with out's lines as data.
func rebuildEvent(block, msg, out []byte) []byte {
	if bytes.Equal(msg, out) {
		return block
	}
	var b bytes.Buffer
	for _, line := range splitLines(block) {
		if len(line) == 0 || bytes.HasPrefix(line, []byte("data:")) || bytes.Equal(line, []byte("data")) {
			continue
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	for _, line := range splitLines(out) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// splitLines splits at CRLF, LF and CR, as SSE does.
func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i])
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
	return out
}
