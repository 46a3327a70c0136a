package protocol

import (
	"fmt"
	"strings"
	"unsafe"
)

// Long lines: past defaultRopeAt a block in progress moves into a rope of
// chunks, and past SpillAt (with SSEParser.Spill set) its line into a spill
// file; both come back into one buffer when the block ends.

// DefaultSpillAt is the line length from which an SSEParser with Spill set
// keeps the line in its spill file.
const DefaultSpillAt = 2 << 20

// The rope takes over a block from defaultRopeAt bytes; its chunks are
// about as large as the rope so far, up to maxRopeChunk.
const (
	defaultRopeAt = 64 << 10
	maxRopeChunk  = 1 << 20
)

// spill moves the block in progress into the rope, with b, when the
// buffer would have to grow for a block already past ropeAt whose line in
// progress goes on through b.
func (p *SSEParser) spill(b []byte) bool {
	at := p.ropeAt
	if at <= 0 {
		at = defaultRopeAt
	}
	if len(p.buf)+len(b) <= cap(p.buf) || len(p.buf)-p.ev < at || p.scan != len(p.buf) ||
		len(p.buf)+len(b)-p.ev > p.max() || lineEnd(b) >= 0 {
		return false
	}
	first := p.buf[p.ev:]
	p.line -= p.ev
	p.ev = 0
	p.buf = nil
	p.rope, p.ropeOwn = p.rope[:0], p.ropeOwn[:0]
	p.addChunk(first, false)
	p.ropeLen = len(first)
	p.ropeAppend(b)
	return true
}

// ropeAppend adds b, which holds no line terminator, to the rope.
func (p *SSEParser) ropeAppend(b []byte) {
	p.ropeLen += len(b)
	p.scan = p.ropeLen
	if p.sp != nil {
		if _, err := p.sp.Write(b); err == nil {
			p.spLen += len(b)
			return
		}
		p.unspill()
		if p.spErr != nil {
			return // the block is lost; the rest of it is dropped
		}
	}
	if len(p.rope) == 0 {
		p.addChunk(append(make([]byte, 0, max(len(b), defaultRopeAt)), b...), false)
		return
	}
	defer p.maybeSpill()
	if p.owned && !p.kept && len(b) > 0 {
		p.addChunk(b[:len(b):len(b)], true)
		p.kept = true
		return
	}
	last := &p.rope[len(p.rope)-1]
	k := min(cap(*last)-len(*last), len(b))
	*last = append(*last, b[:k]...)
	if b = b[k:]; len(b) > 0 {
		var c []byte
		if p.ropeLen >= maxRopeChunk && len(b) <= maxRopeChunk {
			c = getRopeChunk()
		} else {
			c = make([]byte, 0, max(len(b), min(p.ropeLen, maxRopeChunk)))
		}
		p.addChunk(append(c, b...), false)
	}
}

// addChunk adds c to the rope; kept says it is a slice FeedOwned kept.
func (p *SSEParser) addChunk(c []byte, kept bool) {
	p.rope = append(p.rope, c)
	p.ropeOwn = append(p.ropeOwn, kept)
}

// dropRope lets go of the rope's chunks: kept slices go back through
// Release, chunks of maxRopeChunk to ropeChunks.
func (p *SSEParser) dropRope() {
	for i, c := range p.rope {
		if p.ropeOwn[i] {
			if p.Release != nil {
				p.Release(c)
			}
		} else {
			putRopeChunk(c)
		}
	}
	clear(p.rope)
	p.rope, p.ropeOwn = p.rope[:0], p.ropeOwn[:0]
}

// ropeChunks holds rope chunks of maxRopeChunk bytes for the next long
// line: a large event's rope is garbage once joined, and allocating it
// again for the next one made the Go runtime give memory back to the
// system and fault it in again, page by page, costing more than the
// copies themselves. At most ropeChunksKept are kept.
var ropeChunks = make(chan []byte, ropeChunksKept)

const ropeChunksKept = 4

func getRopeChunk() []byte {
	select {
	case c := <-ropeChunks:
		return c[:0]
	default:
		return make([]byte, 0, maxRopeChunk)
	}
}

func putRopeChunk(c []byte) {
	if cap(c) != maxRopeChunk {
		return
	}
	select {
	case ropeChunks <- c:
	default:
	}
}

// maybeSpill moves the rope into a spill file once it is long enough (see
// SSEParser.Spill).
func (p *SSEParser) maybeSpill() {
	at := p.SpillAt
	if at <= 0 {
		at = DefaultSpillAt
	}
	if p.Spill == nil || p.sp != nil || p.spTried || p.ropeLen < at {
		return
	}
	p.spTried = true
	f, err := p.Spill()
	if err != nil {
		return
	}
	// A data line's value goes to the file alone, the block before it
	// stays in memory: the file may then stand for the message itself.
	h := p.dataValueStart()
	for i, c := range p.rope {
		if i == 0 {
			c = c[h:]
		}
		if _, err := f.Write(c); err != nil {
			_ = f.Close()
			return
		}
	}
	p.spHead = append(p.spHead[:0], p.rope[0][:h]...)
	p.sp, p.spLen = f, p.ropeLen-h
	p.dropRope()
}

// dataValueStart is where the value of the line in progress begins in the
// rope when it is a data line whose value starts in the rope's first chunk
// within maxSpillHead bytes; 0 otherwise.
func (p *SSEParser) dataValueStart() int {
	first := p.rope[0]
	const name = "data:"
	vs := p.line + len(name)
	if vs >= len(first) || vs > maxSpillHead || string(first[p.line:vs]) != name {
		return 0
	}
	if first[vs] == ' ' {
		vs++
	}
	return vs
}

// maxSpillHead bounds the bytes of a block kept in memory before a spilled
// data line's value.
const maxSpillHead = 64 << 10

// readSpill reads the spill file back into buf (empty, with room for it
// and tail), followed by tail, and closes it, unless it is kept to be
// offered with its block (done); on failure the block in progress is lost
// (spErr).
func (p *SSEParser) readSpill(buf, tail []byte) []byte {
	h := len(p.spHead)
	buf = buf[:h+p.spLen]
	copy(buf, p.spHead)
	_, err := p.sp.ReadAt(buf[h:], 0)
	buf = append(buf, tail...)
	if p.sp != p.done {
		_ = p.sp.Close()
	}
	p.sp, p.spHead = nil, nil
	if err != nil {
		p.spErr = fmt.Errorf("reading back the %d bytes kept in a spill file: %w", p.spLen, err)
		return nil
	}
	return buf
}

// makeNoZero returns an empty slice of capacity n whose memory is not
// cleared first: every byte of it is written before it is read (readSpill
// fills it from the file, unrope from the rope). make would clear 10 MiB
// only for the read to overwrite them, a pass over memory that cost as
// much as the read itself.
// strings.Builder.Grow is the standard library's way to such memory;
// nothing else refers to it once the builder is dropped.
func makeNoZero(n int) []byte {
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte(0) // a string of length 0 need not point at the buffer
	return unsafe.Slice(unsafe.StringData(sb.String()), sb.Cap())[:0]
}

// unspill moves the line back from its spill file into memory, after a
// write to the file failed.
func (p *SSEParser) unspill() {
	n := len(p.spHead) + p.spLen
	buf := p.readSpill(makeNoZero(n+max(n/8, maxRopeChunk)), nil)
	p.spLen = 0
	if buf == nil {
		p.loseBlock()
		return
	}
	p.addChunk(buf, false)
}

// loseBlock drops the block in progress, whose bytes the spill file lost:
// the rest of it is skipped, and it is dispatched with SpillErr and no
// bytes at its blank line.
func (p *SSEParser) loseBlock() {
	p.dropRope()
	p.closeDone()
	p.ropeLen = 0
	p.cur.Oversize = true
	p.discard = true
	p.lineSeen = true // the lost line had bytes
	p.pendCR = false
	p.over = nil
	p.buf, p.back, p.ev, p.line, p.scan = nil, nil, 0, 0, 0
}

// unrope joins the rope and b into one buffer with a little room for the
// end of the block; the line in progress ends at b[end] (-1: it does not).
// The buffer (see buffer) is not cleared before the copy: a fresh 10 MiB
// buffer would otherwise be, a pass over memory as costly as the copy.
func (p *SSEParser) unrope(b []byte, end int) {
	n := p.ropeLen + len(b)
	room := max(n/64, 4<<10)
	p.spTried = false
	if p.sp != nil {
		p.closeDone()
		if h := len(p.spHead); h > 0 && end >= 0 {
			// The file takes the rest of the value and is kept, closed
			// once the block is dispatched (or handed over with it).
			if _, err := p.sp.Write(b[:end]); err == nil {
				p.spLen += end
				p.done, p.doneAt = p.sp, span{h, h + p.spLen}
				b = b[end:]
			}
		}
		buf := p.readSpill(p.buffer(n+room), b)
		p.spLen, p.ropeLen = 0, 0
		if buf == nil {
			p.loseBlock()
			return
		}
		p.buf, p.back = buf, buf
		return
	}
	buf := p.buffer(n + room)
	for _, c := range p.rope {
		buf = append(buf, c...)
	}
	p.buf, p.back = append(buf, b...), buf
	p.dropRope()
	p.ropeLen = 0
}

// buffer returns an empty buffer of at least n bytes' capacity for a long
// line: Buffer's, or one whose memory is not cleared first (every byte is
// written before it is read).
func (p *SSEParser) buffer(n int) []byte {
	if p.Buffer != nil {
		if b := p.Buffer(n); cap(b) >= n {
			return b[:0]
		}
	}
	return makeNoZero(n)
}

// appendGrow is append that doubles a full buffer, up to ceiling: append
// grows large slices by only a quarter, which for a 10 MiB event allocates
// five times its size along the way; doubling past the size limit would
// allocate up to twice the limit for nothing.
func appendGrow(buf, b []byte, ceiling int) []byte {
	if need := len(buf) + len(b); need > cap(buf) {
		nb := make([]byte, len(buf), max(need, min(max(2*cap(buf), 512), ceiling)))
		copy(nb, buf)
		buf = nb
	}
	return append(buf, b...)
}
