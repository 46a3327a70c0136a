package protocol

import (
	"bytes"
	"strconv"
)

// DefaultMaxEventSize bounds one SSE event's raw size in [SSEParser]; it
// matches go-sdk's client default.
const DefaultMaxEventSize = 16 << 20

// Event is one Server-Sent Events block: the lines up to and including the
// blank line that ends it. A block with only comments or `retry` is an Event
// too, so nothing on the stream is lost.
type Event struct {
	// Raw is the exact bytes of the block, terminator included. When
	// Oversize is set it holds only the first MaxEventSize bytes.
	Raw []byte
	// ID is the value of the last `id:` field in this block; HasID reports
	// whether there was one (an empty id is legal and resets the cursor).
	ID    string
	HasID bool
	// Type is the `event:` field, "" when absent (which means "message").
	Type string
	// Data is the `data:` lines joined with "\n"; HasData reports whether
	// there was at least one data line.
	Data    []byte
	HasData bool
	// Retry is the raw `retry:` value, "" when absent.
	Retry string
	// Comments holds each comment line without its leading colon.
	Comments []string
	// Oversize is set when the block exceeded the parser's limit; Raw and
	// Data are cut at the limit and the rest of the block was discarded.
	Oversize bool
	// Unterminated is set for a final block the stream ended in the middle
	// of (no blank line). A spec-following client discards it.
	Unterminated bool
}

// IsPriming reports whether e is a priming event: an id with empty data
// (2025-11-25, SEP-1699).
func (e *Event) IsPriming() bool { return e.HasID && len(e.Data) == 0 }

// IsMessage reports whether e dispatches a message a client would decode:
// it has data and its type is "" or "message".
func (e *Event) IsMessage() bool {
	return e.HasData && len(e.Data) > 0 && (e.Type == "" || e.Type == "message")
}

// RetryMillis parses Retry; ok is false when absent or not a number.
func (e *Event) RetryMillis() (ms int64, ok bool) {
	if e.Retry == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(e.Retry, 10, 64)
	return n, err == nil
}

// SSEParser incrementally splits an SSE stream into [Event]s. Feed it the
// bytes as they arrive, in any chunking, then call Close at the end of the
// stream. It is not safe for concurrent use.
type SSEParser struct {
	// MaxEventSize bounds one block's raw bytes; zero means DefaultMaxEventSize.
	MaxEventSize int

	buf     []byte // unconsumed bytes
	scan    int    // buf[:scan] holds no line terminator
	cur     Event
	curRaw  []byte
	started bool // cur has at least one line
	bom     bool // the stream's first bytes were examined for a BOM
	discard bool // dropping the rest of an oversize block
	partial bool // the current line's first bytes were dropped
}

func (p *SSEParser) max() int {
	if p.MaxEventSize > 0 {
		return p.MaxEventSize
	}
	return DefaultMaxEventSize
}

// Feed parses b and calls emit for each complete block. emit's Event and its
// slices are only valid during the call.
func (p *SSEParser) Feed(b []byte, emit func(*Event)) {
	p.buf = append(p.buf, b...)
	if !p.bom {
		if len(p.buf) < 3 && bytes.HasPrefix([]byte("\xEF\xBB\xBF"), p.buf) {
			return
		}
		p.bom = true
		p.buf = bytes.TrimPrefix(p.buf, []byte("\xEF\xBB\xBF"))
	}
	start := 0
	for {
		i := bytes.IndexAny(p.buf[start+p.scan:], "\r\n")
		if i < 0 {
			p.scan = len(p.buf) - start
			break
		}
		i += start + p.scan
		end := i + 1
		if p.buf[i] == '\r' {
			if end == len(p.buf) {
				// A lone CR at the end: wait to see whether LF follows.
				p.scan = i - start
				break
			}
			if p.buf[end] == '\n' {
				end++
			}
		}
		p.line(p.buf[start:i], p.buf[start:end], emit)
		start = end
		p.scan = 0
	}
	// Keep the unconsumed partial line, bounded by the event limit.
	rest := p.buf[start:]
	switch {
	case p.discard:
		if len(rest) > 0 {
			p.partial = true
		}
		rest = rest[:0]
		p.scan = 0
	case len(p.curRaw)+len(rest) > p.max():
		p.started = true
		p.overflow(rest)
		p.partial = true
		rest = rest[:0]
		p.scan = 0
	}
	p.buf = append(p.buf[:0], rest...)
}

// Close ends the stream: a block in progress is emitted with Unterminated
// set (its partial last line included in Raw).
func (p *SSEParser) Close(emit func(*Event)) {
	if len(p.buf) > 0 {
		tail := p.buf
		p.line(bytes.TrimRight(tail, "\r"), tail, nil)
		p.buf = p.buf[:0]
		p.scan = 0
	}
	if p.started {
		p.cur.Unterminated = true
		p.dispatch(emit)
	}
}

func (p *SSEParser) overflow(rest []byte) {
	if room := p.max() - len(p.curRaw); room > 0 {
		p.curRaw = append(p.curRaw, rest[:min(room, len(rest))]...)
	}
	p.cur.Oversize = true
	p.discard = true
}

// line handles one line; raw includes its terminator. emit is nil for the
// partial line at the end of the stream.
func (p *SSEParser) line(line, raw []byte, emit func(*Event)) {
	blank := len(line) == 0 && !p.partial
	p.partial = false
	if blank && emit != nil {
		if !p.discard {
			p.curRaw = append(p.curRaw, raw...)
		}
		p.started = true
		p.dispatch(emit)
		return
	}
	p.started = true
	if p.discard {
		return
	}
	if len(p.curRaw)+len(raw) > p.max() {
		p.overflow(raw)
		return
	}
	p.curRaw = append(p.curRaw, raw...)
	if len(line) == 0 {
		return
	}
	if line[0] == ':' {
		p.cur.Comments = append(p.cur.Comments, string(bytes.TrimPrefix(line[1:], []byte(" "))))
		return
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	switch string(field) {
	case "data":
		if p.cur.HasData {
			p.cur.Data = append(p.cur.Data, '\n')
		}
		p.cur.Data = append(p.cur.Data, value...)
		p.cur.HasData = true
	case "event":
		p.cur.Type = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			p.cur.ID = string(value)
			p.cur.HasID = true
		}
	case "retry":
		p.cur.Retry = string(value)
	}
}

func (p *SSEParser) dispatch(emit func(*Event)) {
	p.cur.Raw = p.curRaw
	if emit != nil {
		emit(&p.cur)
	}
	data := p.cur.Data[:0]
	comments := p.cur.Comments[:0]
	p.cur = Event{Data: data, Comments: comments}
	p.curRaw = p.curRaw[:0]
	p.started = false
	p.discard = false
	p.partial = false
}
