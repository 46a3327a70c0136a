package capture

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mcptape/mcptape/protocol"
)

// The pipeline's side of a Stream: one session and one exchange for the
// conversation, a message per frame.

// streamOpen starts a stream's session and exchange.
func (p *pipeline) streamOpen(ev event) {
	info := ev.stream
	leg := info.leg()
	xs := &exchange{out: p.out, groups: p.groups, stream: true, leg: leg, route: info.Name, mcp: true, reqDone: true, resp: true, respLen: -1}
	var cmd *Command
	if len(info.Command.Args) > 0 {
		c := p.out.red.command(info.Command)
		cmd = &c
	}
	url, method := info.Endpoint, strings.ToUpper(leg.String())
	if url == "" && cmd != nil {
		url = strings.Join(cmd.Args, " ")
	}
	xs.x = Exchange{
		ID: ev.x, Method: method, URL: url, Start: ev.at, FirstByte: ev.at,
		RequestBody: BodyJSON, ResponseBody: BodyJSON,
	}
	p.xs[ev.x] = xs
	st := p.groups.newSession(xs, ev.at, leg.String())
	st.s.Command = cmd
	xs.sess = st
	xs.x.SessionID = st.s.ID
	st.s.Exchanges++
	// Readers see a stream's session as soon as it starts.
	st.urgent = true
	p.out.dirtyX[ev.x] = xs
}

// streamEvent handles an event of a stream's exchange.
func (p *pipeline) streamEvent(xs *exchange, ev event) {
	switch ev.kind {
	case evLine:
		p.streamBlock(xs, ev.block)
	case evEnd:
		p.streamEnd(xs, ev)
	default:
		ev.block.release()
	}
}

// streamBlock records a block of frames, in order.
func (p *pipeline) streamBlock(xs *exchange, b *streamBlock) {
	if b == nil {
		return
	}
	for i := range b.frames {
		f := &b.frames[i]
		if f.file != nil {
			p.streamFileFrame(xs, f)
			continue
		}
		data := b.data[f.off : f.off+f.n : f.off+f.n] // the block is the pipeline's
		if f.kind == evStderr {
			p.streamStderr(xs, f, data)
		} else {
			p.streamLine(xs, f, data)
		}
	}
}

// maxQuoted bounds how much of a line a finding quotes.
const maxQuoted = 120

// sides names a stream's two sides in findings: what the client and the
// server write to, and who reads each.
func (xs *exchange) sides(dir protocol.Direction) (who, reader string) {
	switch {
	case xs.leg == LegStdio && dir == protocol.ClientToServer:
		return "stdin line", "the server"
	case xs.leg == LegStdio:
		return "stdout line", "the client"
	case dir == protocol.ClientToServer:
		return "frame from the client", "the server"
	}
	return "frame from the server", "the client"
}

// countBytes adds a frame's bytes (with its newline) to the exchange.
func (xs *exchange) countBytes(f *streamFrame) {
	n := f.total + 1
	if f.dir == protocol.ClientToServer && f.kind == evLine {
		xs.x.RequestBytes += n
	} else if f.kind == evLine {
		xs.x.ResponseBytes += n
	}
}

// streamLine records one frame held in memory.
func (p *pipeline) streamLine(xs *exchange, f *streamFrame, data []byte) {
	xs.countBytes(f)
	if f.total > int64(p.o.MaxMessageSize) || len(data) > p.o.MaxMessageSize {
		m := p.out.invalid(xs, f.dir, data[:min(len(data), p.o.MaxMessageSize)], true, f.at, FindingOversize,
			fmt.Sprintf("line of %d bytes, longer than %d; stored cut", f.total, p.o.MaxMessageSize))
		p.out.add(xs, m, nil)
		p.out.touch(xs.sess, f.at)
		return
	}
	msgs := protocol.Split(data)
	for i := range msgs {
		pm := &msgs[i]
		if pm.Kind == protocol.KindInvalid && pm.Batch < 0 {
			who, reader := xs.sides(f.dir)
			m := p.out.invalid(xs, f.dir, data, true, f.at, FindingInvalidFrame,
				fmt.Sprintf("a %s that is not JSON-RPC (%s fails on it, e.g. \"Unexpected token … is not valid JSON\"): %s",
					who, reader, quoteLine(data)))
			p.out.add(xs, m, nil)
			continue
		}
		p.out.message(xs, f.dir, pm, f.at, nil, true) // data is the pipeline's
	}
	p.out.touch(xs.sess, f.at)
}

// streamStderr records a line of the server's standard error.
func (p *pipeline) streamStderr(xs *exchange, f *streamFrame, data []byte) {
	p.out.seq++
	raw, _ := p.out.red.body(data)
	m := &Message{
		Seq: p.out.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: protocol.ServerToClient,
		Time: f.at, Kind: protocol.KindStderr, Batch: -1, Raw: raw, Size: len(raw),
	}
	if f.total > int64(len(data)) {
		m.Findings = append(m.Findings, Finding{FindingOversize, fmt.Sprintf("stderr line of %d bytes, longer than %d; stored cut", f.total, p.o.MaxMessageSize)})
	}
	p.out.add(xs, m, nil)
	p.out.touch(xs.sess, f.at)
}

// streamFileFrame records a frame kept on disk (longer than
// streamSpillAt). A writer that reads RawReaders (a spool) gets the file as
// the message's bytes, so that neither side holds the frame in memory; the
// message is classified from the frame's skeleton. Another writer gets
// the frame read back into memory.
func (p *pipeline) streamFileFrame(xs *exchange, f *streamFrame) {
	file := f.file
	f.file = nil
	if _, ok := p.r.store.(RawReaderTaker); !ok || file.failed {
		data, err := file.readAll()
		file.Close()
		if err != nil {
			p.r.log.Warn("reading back a long stream frame", LogKeyError, err)
		}
		if file.failed {
			// The disk refused part of it: what it kept is stored cut.
			f.total = max(f.total, int64(p.o.MaxMessageSize)+1)
		}
		if f.kind == evStderr {
			p.streamStderr(xs, f, data)
		} else {
			p.streamLine(xs, f, data)
		}
		return
	}
	scrubbed, redacted, err := p.out.red.scrubFile(file, p.o.SpillDir)
	if err != nil {
		p.r.log.Warn("redacting a long stream frame", LogKeyError, err)
		file.Close()
		p.streamLost(xs, f)
		return
	}
	file = scrubbed
	xs.countBytes(f)
	var m *Message
	switch {
	case f.kind == evStderr:
		p.out.seq++
		m = &Message{Seq: p.out.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: protocol.ServerToClient,
			Time: f.at, Kind: protocol.KindStderr, Batch: -1}
		if f.total > file.Len() {
			m.Findings = append(m.Findings, Finding{FindingOversize, fmt.Sprintf("stderr line of %d bytes, longer than %d; stored cut", f.total, p.o.MaxMessageSize)})
		}
		p.out.add(xs, m, nil)
	case f.total > file.Len():
		m = p.out.invalid(xs, f.dir, nil, true, f.at, FindingOversize,
			fmt.Sprintf("line of %d bytes, longer than %d; stored cut", f.total, p.o.MaxMessageSize))
		p.out.add(xs, m, nil)
	default:
		m = p.skeletonMessage(xs, f, file)
	}
	if redacted {
		m.Findings = append(m.Findings, Finding{FindingRedacted, "secrets seen in headers were removed from this message"})
		xs.sess.s.Findings++
	}
	p.out.batchBytes -= len(m.Raw)
	m.Raw, m.Size, m.File = nil, int(file.Len()), file
	p.out.batchBytes += m.Size
	p.out.touch(xs.sess, f.at)
}

// skeletonMessage records a long frame from its skeleton (see skeleton):
// the message's kind, method, id and links, without its bytes in memory.
func (p *pipeline) skeletonMessage(xs *exchange, f *streamFrame, file *frameFile) *Message {
	sk, err := skeleton(ioSection(file))
	var msgs []protocol.Message
	if err == nil {
		msgs = protocol.Split(sk)
	}
	switch {
	case err != nil || len(msgs) == 1 && msgs[0].Kind == protocol.KindInvalid && msgs[0].Batch < 0:
		who, reader := xs.sides(f.dir)
		m := p.out.invalid(xs, f.dir, nil, true, f.at, FindingInvalidFrame,
			fmt.Sprintf("a %s that is not JSON-RPC (%s fails on it, e.g. \"Unexpected token … is not valid JSON\"): %s",
				who, reader, quoteLine(file.head(maxQuoted+1))))
		p.out.add(xs, m, nil)
		return m
	case len(msgs) != 1 || msgs[0].Batch >= 0:
		m := p.out.invalid(xs, f.dir, nil, true, f.at, FindingBatch,
			fmt.Sprintf("a JSON-RPC batch of %d bytes, longer than the %d the recorder splits: stored whole, as one frame", file.Len(), streamSpillAt))
		p.out.add(xs, m, nil)
		return m
	}
	p.out.skeletal = true
	m := p.out.message(xs, f.dir, &msgs[0], f.at, nil, true)
	p.out.skeletal = false
	return m
}

// streamLost counts a frame that could not be recorded.
func (p *pipeline) streamLost(xs *exchange, f *streamFrame) {
	xs.sess.s.Lost++
	xs.sess.s.Status = StatusIncomplete
	xs.sess.s.LossReason = "a long line could not be copied for the record"
	p.r.dropped.Add(1)
}

// streamEnd finishes a stream: the process ended, or the connection.
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
	case ev.errText != "":
		xs.x.Error = ev.errText
	}
	if ev.broken {
		st.s.Status = StatusIncomplete
		st.s.Lost += int(max(ev.lost, 1))
		st.s.LossReason = fmt.Sprintf("the recording could not keep up (its queue and its backlog were full, or the backlog's disk failed), so %d frames of the stream were not recorded; the traffic itself went on", max(ev.lost, 1))
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
