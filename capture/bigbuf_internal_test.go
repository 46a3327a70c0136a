package capture

import (
	"testing"
	"time"
)

// The buffers kept for large results are bounded in count and bytes, the
// largest are kept, one given back twice is kept once, and an idle
// recorder lets them all go.
func TestBigBuffersBounded(t *testing.T) {
	var bb bigBuffers
	mib := func(n int) []byte { return make([]byte, 0, n<<20) }
	if b := bb.get(1 << 20); b != nil {
		t.Fatalf("an empty pool gave a buffer of %d bytes", cap(b))
	}
	small, big := mib(4), mib(10)
	bb.put(small)
	bb.put(big)
	bb.put(big)
	if n, bytes := bb.kept(); n != 2 || bytes != 14<<20 {
		t.Errorf("kept %d buffers, %d bytes after 4 MiB and 10 MiB (twice); want 2, 14 MiB", n, bytes)
	}
	bb.put(mib(11))
	if n, bytes := bb.kept(); n != 2 || bytes != 21<<20 {
		t.Errorf("kept %d buffers, %d bytes after adding 11 MiB; want the two largest, 21 MiB", n, bytes)
	}
	bb.put(mib(25))
	if _, bytes := bb.kept(); bytes != 21<<20 {
		t.Errorf("a 25 MiB buffer was kept (%d bytes in all); want none past %d", bytes, bigKeptBytes)
	}
	if b := bb.get(10<<20 + 1); cap(b) != 11<<20 || len(b) != 0 {
		t.Errorf("get(10 MiB+1) gave cap %d len %d, want the 11 MiB buffer, empty", cap(b), len(b))
	}
	if b := bb.get(12 << 20); b != nil {
		t.Errorf("get(12 MiB) gave a buffer of %d bytes; none is large enough", cap(b))
	}
	if b := bb.get(2 << 20); b != nil {
		t.Errorf("get(2 MiB) gave a buffer of %d bytes; want none over four times as large", cap(b))
	}
	bb.trim(time.Now().Add(bigIdle / 2))
	if n, _ := bb.kept(); n != 1 {
		t.Errorf("%d buffers kept after a short idle, want 1", n)
	}
	bb.trim(time.Now().Add(bigIdle + time.Second))
	if n, _ := bb.kept(); n != 0 {
		t.Errorf("%d buffers kept after %v idle, want none", n, bigIdle)
	}
}

// kept is how many buffers and bytes bb keeps.
func (bb *bigBuffers) kept() (n, bytes int) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	for _, f := range bb.free {
		bytes += cap(f)
	}
	return len(bb.free), bytes
}
