package protocol

import (
	"bytes"
	"io"
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
	// there was at least one data line. DataStart is where Data begins in
	// Raw when it is one line (a view into Raw), -1 otherwise.
	Data      []byte
	HasData   bool
	DataStart int
	// Retry is the raw `retry:` value, "" when absent.
	Retry string
	// Comments holds each comment line without its leading colon.
	Comments []string
	// Oversize is set when the block exceeded the parser's limit; Raw and
	// Data are cut at the limit and the rest of the block was discarded.
	// An oversize block's Raw and Data are the caller's to keep: the parser
	// lets go of their memory once emit returns (no Detach needed).
	Oversize bool
	// Unterminated is set for a final block the stream ended in the middle
	// of (no blank line). A spec-following client discards it.
	Unterminated bool
	// SpillErr is set, with Oversize, for a block whose bytes the parser
	// lost: it kept a long line in a spill file (SSEParser.Spill) and
	// could not read it back. Raw and Data are then empty.
	SpillErr error

	parser *SSEParser
	spill  SpillFile // holds exactly Data (see TakeSpill)
	back   []byte    // the joined or read-back buffer Raw begins (see Buffer)
}

// TakeSpill, called during emit, hands over the spill file that holds
// exactly Data, when the block's one data line was kept in one (see
// SSEParser.Spill); it returns nil otherwise. The caller then owns the
// file and must Close it, or may keep its bytes some other way (a store
// renaming it into place instead of writing Data again). A file not taken
// is closed once emit returns.
func (e *Event) TakeSpill() SpillFile {
	f := e.spill
	e.spill = nil
	return f
}

// Detach, called during emit, gives the caller Raw and Data to keep: the
// parser will not reuse their memory, so a large event need not be copied.
func (e *Event) Detach() {
	if e.parser != nil && !e.Oversize {
		e.parser.detached = true
	}
}

// Buffer, called during emit after Detach, returns the whole buffer the
// block's long line was joined into, or read back into from its spill
// file (one SSEParser.Buffer gave, or the parser's own), and nil for a
// block that was neither (one that fit the parser's buffer as it came).
// Raw and Data are views into it, and once emit has returned nothing the
// parser keeps refers to it (what followed the block in it is copied
// out): once done with them, the caller may hand it out again (to
// SSEParser.Buffer, for a later block).
func (e *Event) Buffer() []byte {
	if e.parser == nil || !e.parser.detached {
		return nil
	}
	return e.back
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
// stream. It keeps one buffer, the size of the block in progress: an event's
// Raw and (single-line) Data are views into it, so a 10 MiB event costs
// about 10 MiB, not several copies. It is not safe for concurrent use.
type SSEParser struct {
	// MaxEventSize bounds one block's raw bytes; zero means DefaultMaxEventSize.
	MaxEventSize int

	buf   []byte // buf[ev:] is the block in progress and what follows it
	ev    int    // start of the block in progress
	line  int    // start of the line in progress
	scan  int    // no line terminator in buf[line:scan]
	bom   bool   // the stream's first bytes were examined for a BOM
	cur   Event
	spans []span // the block's data values, relative to ev

	// Oversize handling: the block's first MaxEventSize bytes are kept in
	// over, the rest is dropped up to the blank line that ends it.
	discard   bool
	over      []byte
	lineSeen  bool // in discard mode: the line in progress has bytes
	pendCR    bool // in discard mode: the last byte seen was CR
	swallowLF bool // an oversize block ended at a CR: drop an LF that follows
	detached  bool // the caller took the dispatched block's bytes

	// A long line in progress (a large result's one data line) is kept as
	// a list of chunks rather than a doubling buffer, and joined once, into
	// a buffer of about its size, when its line ends: a 10 MiB event then
	// allocates about 20 MiB and keeps 10, where doubling allocates 32 and
	// keeps 16. rope[0] starts at buf position 0; every byte in it was
	// scanned and holds no line terminator.
	rope    [][]byte
	ropeLen int
	ropeAt  int // the block size from which the rope is used; 0 means defaultRopeAt

	// Spill, when set, gives the parser a file to keep a long line in
	// progress in once it passes SpillAt bytes, instead of memory: a
	// recorder with four 10 MiB results arriving at once otherwise holds
	// all 40 MiB until each ends (a proxy such as nginx buffers large
	// responses in temporary files the same way). The line is read back
	// into one buffer when it ends. Should the file fail, the parser goes
	// on in memory with what it wrote read back; should that read fail,
	// the block is dispatched with SpillErr set and its bytes lost.
	Spill func() (SpillFile, error)
	// SpillAt is the line length from which Spill is used; zero means
	// DefaultSpillAt.
	SpillAt int
	// Buffer, when set, gives the buffer a long line is joined into, or
	// read back into from its spill file: empty, with at least n bytes'
	// capacity, its contents arbitrary; nil lets the parser allocate one.
	// A pool can so hand the same memory out again (see Event.Buffer):
	// fresh memory for each large event costs a page fault for each of its
	// pages, as much as reading it back.
	Buffer func(n int) []byte
	back   []byte // the joined or read-back buffer buf is, until its first block is dispatched
	// Release, when set, receives the slices FeedOwned kept, once the
	// parser is done with them.
	Release func([]byte)
	owned   bool   // in FeedOwned: b may be kept
	kept    bool   // FeedOwned kept b
	ropeOwn []bool // rope[i] is a slice FeedOwned kept

	sp      SpillFile
	spHead  []byte    // the block before the spilled line's value: non-empty when sp holds only a data line's value
	spLen   int       // bytes in sp
	spTried bool      // Spill was tried for the line in progress: not again
	spErr   error     // reading sp back failed: the block in progress is lost
	done    SpillFile // read back, holding exactly the value at doneAt: offered with the block (Event.TakeSpill)
	doneAt  span
}

// SpillFile holds a long line for an SSEParser (see SSEParser.Spill): the
// parser writes to it, reads it back with ReadAt, and closes it, which
// must also remove it, unless it hands the file over (Event.TakeSpill).
type SpillFile interface {
	io.Writer
	io.ReaderAt
	Close() error
}

type span struct{ start, end int }

func (p *SSEParser) max() int {
	if p.MaxEventSize > 0 {
		return p.MaxEventSize
	}
	return DefaultMaxEventSize
}

// FeedOwned is Feed for a caller that gives b up: a piece of a long line
// is then kept as it is rather than copied, and handed to Release once the
// parser is done with it. It reports whether b was kept; if not, b is the
// caller's again.
func (p *SSEParser) FeedOwned(b []byte, emit func(*Event)) (kept bool) {
	p.owned, p.kept = true, false
	p.Feed(b, emit)
	kept = p.kept
	p.owned, p.kept = false, false
	return kept
}

// Feed parses b and calls emit for each complete block. emit's Event and its
// slices are only valid during the call.
func (p *SSEParser) Feed(b []byte, emit func(*Event)) {
	if !p.bom {
		head := b // the bytes a BOM would be at, copied only after a prefix of one
		if p.ev < len(p.buf) {
			head = append(p.buf[p.ev:len(p.buf):len(p.buf)], b...)
		}
		if len(head) < 3 && bytes.HasPrefix([]byte("\xEF\xBB\xBF"), head) {
			p.buf = append(p.buf, b...)
			return
		}
		p.bom = true
		if bytes.HasPrefix(head, []byte("\xEF\xBB\xBF")) {
			p.buf = append(p.buf[:0], head[3:]...)
			p.ev, p.line, p.scan = 0, 0, 0
			b = nil
		}
	}
	if p.discard {
		b = p.skip(b, emit)
		if p.discard {
			return
		}
	}
	if p.swallowLF && len(b) > 0 {
		p.swallowLF = false
		if b[0] == '\n' {
			b = b[1:]
		}
	}
	if len(p.rope) > 0 || p.sp != nil {
		i := lineEnd(b)
		if i < 0 && p.ropeLen+len(b)-p.ev <= p.max() {
			p.ropeAppend(b)
			return
		}
		n := p.ropeLen
		p.unrope(b, i)
		if p.discard {
			p.Feed(b, emit) // the block was lost: skip the rest of it
			return
		}
		if i >= 0 {
			p.scan = n + i // b before i was just scanned: no terminator
		}
	} else if p.spill(b) {
		return
	} else {
		// Grow by doubling, but not past what a block can hold before it
		// is cut (the rest of a larger block is dropped, not kept), plus
		// room for the chunk that crosses the limit.
		p.buf = appendGrow(p.buf, b, p.ev+p.max()+max(len(b), 64<<10))
	}
	for {
		i := lineEnd(p.buf[p.scan:])
		if i < 0 {
			p.scan = len(p.buf)
			break
		}
		i += p.scan
		end := i + 1
		if p.buf[i] == '\r' {
			if end == len(p.buf) {
				// A lone CR at the end: wait to see whether LF follows.
				p.scan = i
				break
			}
			if p.buf[end] == '\n' {
				end++
			}
		}
		end -= p.lineDone(i, end, emit)
		p.line, p.scan = end, end
	}
	if len(p.buf)-p.ev > p.max() {
		p.overflow(emit)
		return
	}
	// Move the block in progress to the front, once per Feed, and give
	// back the memory of a large block once it is done.
	if p.ev > 0 {
		rest := p.buf[p.ev:]
		if cap(p.buf) > 1<<20 && len(rest) < cap(p.buf)/8 {
			p.buf = append(make([]byte, 0, max(2*len(rest), 32<<10)), rest...)
		} else {
			p.buf = p.buf[:copy(p.buf, rest)]
		}
		p.line -= p.ev
		p.scan -= p.ev
		p.ev = 0
	}
}

// overflow keeps the first MaxEventSize bytes of the block in progress and
// switches to dropping the rest of it.
//
// The kept bytes are not copied: over takes the buffer's memory, and the
// parser starts a fresh, small buffer (a block that large is rare, and its
// memory is given back once it is dispatched).
func (p *SSEParser) overflow(emit func(*Event)) {
	block := p.buf[p.ev:]
	p.over = block[:p.max():p.max()]
	rest := block[p.line-p.ev:]
	if len(rest) == 1 && rest[0] == '\r' {
		// The held-back CR is a blank line: the block is complete.
		p.cur.Oversize = true
		p.buf, p.back, p.ev, p.line, p.scan = nil, nil, 0, 0, 0
		p.dispatchOver(emit)
		p.swallowLF = true
		return
	}
	// A trailing CR already ended the line in progress (a LF may follow).
	p.pendCR = len(rest) > 0 && rest[len(rest)-1] == '\r'
	p.lineSeen = len(rest) > 0 && !p.pendCR
	p.cur.Oversize = true
	p.discard = true
	p.buf, p.back, p.ev, p.line, p.scan = nil, nil, 0, 0, 0
}

// skip drops the rest of an oversize block, dispatching it at its blank
// line; it returns the bytes after that line.
func (p *SSEParser) skip(b []byte, emit func(*Event)) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if p.pendCR {
			p.pendCR = false
			if c == '\n' {
				continue // the LF of a CRLF
			}
		}
		if c != '\r' && c != '\n' {
			p.lineSeen = true
			continue
		}
		if c == '\r' {
			p.pendCR = true
		}
		if p.lineSeen {
			p.lineSeen = false
			continue
		}
		// A blank line: the oversize block ends here.
		p.discard = false
		p.dispatchOver(emit)
		rest := b[i+1:]
		p.pendCR = false
		if c == '\r' {
			if len(rest) == 0 {
				p.swallowLF = true
			} else if rest[0] == '\n' {
				rest = rest[1:]
			}
		}
		return rest
	}
	return nil
}

func (p *SSEParser) dispatchOver(emit func(*Event)) {
	p.cur.Raw = p.over
	p.cur.Data = p.joined(p.over)
	p.cur.SpillErr, p.spErr = p.spErr, nil
	if emit != nil {
		emit(&p.cur)
	}
	p.closeDone()
	p.over = nil // the block's memory goes back
	p.reset()
}

// Reset readies the parser for a new stream, keeping its buffer's memory
// (a load generator reading stream after stream need not grow it again).
func (p *SSEParser) Reset() {
	buf := p.buf[:0]
	if cap(buf) > 4*p.max() {
		buf = nil
	}
	p.dropRope()
	if p.sp != nil {
		_ = p.sp.Close()
	}
	p.closeDone()
	*p = SSEParser{MaxEventSize: p.MaxEventSize, buf: buf, spans: p.spans[:0], rope: p.rope[:0], ropeOwn: p.ropeOwn[:0],
		ropeAt: p.ropeAt, Spill: p.Spill, SpillAt: p.SpillAt, Buffer: p.Buffer, Release: p.Release}
}

// Close ends the stream: a block in progress is emitted with Unterminated
// set (its partial last line included in Raw).
func (p *SSEParser) Close(emit func(*Event)) {
	if len(p.rope) > 0 || p.sp != nil {
		p.unrope(nil, -1)
	}
	if p.discard {
		p.cur.Unterminated = true
		p.discard = false
		p.dispatchOver(emit)
		return
	}
	if n := len(p.buf); p.line < n && p.buf[n-1] == '\r' {
		// The CR held back to see whether LF follows ends its line.
		n -= p.lineDone(n-1, n, emit)
		p.line = n
	}
	if end := len(p.buf); p.line < end {
		if end-p.ev <= p.max() {
			p.field(p.line, end)
		}
		p.line = end
	}
	if p.line > p.ev {
		p.cur.Unterminated = true
		p.dispatch(p.line, emit)
	}
	p.buf, p.ev, p.line, p.scan = p.buf[:0], 0, 0, 0
}

// lineDone handles the line buf[p.line:i], terminated at end.
// It returns how far the buffer moved: when the caller took the block's
// bytes (Event.Detach), what followed it is in a buffer of its own.
func (p *SSEParser) lineDone(i, end int, emit func(*Event)) (shift int) {
	if i == p.line {
		// A blank line ends the block (one with nothing before it is a
		// block of its own, so no byte of the stream is lost).
		p.dispatch(end, emit)
		p.ev = end
		if p.detached {
			p.detached = false
			rest := p.buf[end:]
			nb := make([]byte, len(rest), max(2*len(rest), 4<<10))
			copy(nb, rest)
			p.buf, p.ev = nb, 0
			return end
		}
		return 0
	}
	if end-p.ev <= p.max() {
		// Lines past the size limit are dropped, not interpreted.
		p.field(p.line, i)
	}
	return 0
}

// field interprets the line buf[start:end] (no terminator).
func (p *SSEParser) field(start, end int) {
	line := p.buf[start:end]
	if line[0] == ':' {
		p.cur.Comments = append(p.cur.Comments, string(bytes.TrimPrefix(line[1:], []byte(" "))))
		return
	}
	name, vs := line, end
	if k := bytes.IndexByte(line, ':'); k >= 0 {
		name, vs = line[:k], start+k+1
		if vs < end && p.buf[vs] == ' ' {
			vs++
		}
	}
	value := p.buf[vs:end]
	switch string(name) {
	case "data":
		p.spans = append(p.spans, span{vs - p.ev, end - p.ev})
		p.cur.HasData = true
	case "event":
		p.cur.Type = knownString(value) // "message", mostly
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			p.cur.ID = string(value)
			p.cur.HasID = true
		}
	case "retry":
		p.cur.Retry = string(value)
	}
}

// joined is the data lines of the block raw, joined with "\n": a view into
// raw when there is one line.
func (p *SSEParser) joined(raw []byte) []byte {
	switch len(p.spans) {
	case 0:
		return nil
	case 1:
		s := p.spans[0]
		if s.end <= len(raw) {
			return raw[s.start:s.end:s.end]
		}
		if s.start <= len(raw) {
			return raw[s.start:len(raw):len(raw)]
		}
		return nil
	}
	var out []byte
	for i, s := range p.spans {
		if s.start > len(raw) {
			break
		}
		if i > 0 {
			out = append(out, '\n')
		}
		out = append(out, raw[s.start:min(s.end, len(raw))]...)
	}
	return out
}

func (p *SSEParser) dispatch(end int, emit func(*Event)) {
	raw := p.buf[p.ev:end:end]
	if len(raw) > p.max() {
		raw = raw[:p.max():p.max()]
		p.cur.Oversize = true
	}
	p.cur.Raw = raw
	p.cur.Data = p.joined(raw)
	p.cur.DataStart = -1
	if len(p.spans) == 1 && p.spans[0].end <= len(raw) {
		p.cur.DataStart = p.spans[0].start
	}
	p.cur.parser = p
	if p.back != nil {
		// The joined or read-back buffer goes with its first block only.
		if p.ev == 0 && len(p.buf) > 0 && &p.back[:1][0] == &p.buf[0] {
			p.cur.back = p.back
		}
		p.back = nil
	}
	if p.done != nil && !p.cur.Oversize && !p.cur.Unterminated && len(p.spans) == 1 && p.spans[0] == p.doneAt {
		p.cur.spill, p.done = p.done, nil
	}
	if emit != nil {
		emit(&p.cur)
	}
	if p.cur.spill != nil {
		_ = p.cur.spill.Close()
	}
	p.closeDone()
	p.reset()
}

// closeDone closes a spill file kept for a block that did not take it.
func (p *SSEParser) closeDone() {
	if p.done != nil {
		_ = p.done.Close()
		p.done = nil
	}
}

func (p *SSEParser) reset() {
	comments := p.cur.Comments[:0]
	p.cur = Event{Comments: comments}
	p.spans = p.spans[:0]
}

// lineEnd is the index of the first CR or LF in b, or -1: two vectorized
// IndexByte scans, several times faster than IndexAny on long data lines.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	lim := b
	if i >= 0 {
		lim = b[:i]
	}
	if j := bytes.IndexByte(lim, '\r'); j >= 0 {
		return j
	}
	return i
}
