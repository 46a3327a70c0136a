package capture

import (
	"slices"
	"sync"
	"time"
)

// bigBuffers keeps the buffers large SSE events were joined or read back
// into (protocol.SSEParser.Buffer) for the next ones. A fresh
// 10 MiB buffer per result cost a page fault for each of its pages, under
// the memory limit where the runtime gives freed memory back at once: as
// much CPU as the rest of recording the result. A buffer comes back once
// the response whose Raw lies in it is written (Batch.bufs), and only
// to a store that keeps no reference to Raw (RawCopier). At most
// bigKept buffers and bigKeptBytes are kept, none once no large event
// has come for bigIdle.
type bigBuffers struct {
	mu   sync.Mutex
	free [][]byte
	last time.Time // of the last get
}

const (
	bigKept      = 2
	bigKeptBytes = 24 << 20
	bigIdle      = 10 * time.Second
)

// get returns the smallest empty free buffer of at least n bytes'
// capacity, or nil; not one of more than 4n (a small event would hold it
// from a large one).
func (bb *bigBuffers) get(n int) []byte {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	bb.last = time.Now()
	best := -1
	for i, b := range bb.free {
		if cap(b) >= n && cap(b) <= 4*n && (best < 0 || cap(b) < cap(bb.free[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := bb.free[best]
	bb.free = slices.Delete(bb.free, best, best+1)
	return b[:0]
}

// put keeps b for a later get, unless the largest bigKept buffers within
// bigKeptBytes are others. Nothing may refer to b's memory any more.
func (bb *bigBuffers) put(b []byte) {
	if cap(b) == 0 || cap(b) > bigKeptBytes {
		return
	}
	bb.mu.Lock()
	defer bb.mu.Unlock()
	for _, f := range bb.free {
		if &f[:1][0] == &b[:1][0] {
			return // given back already
		}
	}
	bb.free = append(bb.free, b[:0])
	slices.SortFunc(bb.free, func(x, y []byte) int { return cap(y) - cap(x) })
	total := 0
	for i, f := range bb.free {
		if total += cap(f); i == bigKept || total > bigKeptBytes {
			clear(bb.free[i:])
			bb.free = bb.free[:i]
			break
		}
	}
}

// trim lets the buffers go once no large event has come for bigIdle.
func (bb *bigBuffers) trim(now time.Time) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if len(bb.free) > 0 && now.Sub(bb.last) > bigIdle {
		clear(bb.free)
		bb.free = nil
	}
}
