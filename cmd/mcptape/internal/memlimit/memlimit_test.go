package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name        string
		base        int64
		live, other uint64
		want        int64
	}{
		{"a small heap keeps the base", 64 * mib, 20 * mib, 8 * mib, 64 * mib},
		{"just under the base", 64 * mib, 40 * mib, 13 * mib, 64 * mib},
		{"a live heap near the base raises it", 64 * mib, 56 * mib, 8 * mib, 78 * mib},
		{"a live heap past the base", 64 * mib, 100 * mib, 10 * mib, 135 * mib},
		{"at most four times the base", 64 * mib, 300 * mib, 10 * mib, 256 * mib},
		{"no limit stays none", math.MaxInt64, 100 * mib, 10 * mib, math.MaxInt64},
		{"overflow is the ceiling", 64 * mib, math.MaxUint64 / 2, math.MaxUint64 / 2, 256 * mib},
	} {
		if got := Limit(c.base, c.live, c.other); got != c.want {
			t.Errorf("%s: Limit(%d, %d, %d) = %d MiB, want %d MiB", c.name, c.base/mib, c.live/mib, c.other/mib, got/mib, c.want/mib)
		}
	}
}

// TestFollowKeepsCollectionsFew: with a live heap twice the limit
// asked for, a fixed limit has the runtime collecting over and over while
// the program allocates, and Follow's limit, raised to the live heap and
// its headroom, collects only as often as the allocations fill the
// headroom. The limit returns to the base once the heap is let go.
func TestFollowKeepsCollectionsFew(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { Set(orig) })
	const mib = 1 << 20
	const base, live, garbage = 16 * mib, 32 * mib, 96 * mib

	cycles := func(set func(int64)) (uint64, int64) {
		hold := make([][]byte, live/mib)
		for i := range hold {
			hold[i] = make([]byte, mib)
			hold[i][0] = 1
		}
		runtime.GC()
		set(base)
		runtime.GC() // Follow's first adjustment
		before := gcCycles()
		var sink []byte
		// At the pace of a program that does other work between its
		// allocations (the runtime bounds collection by CPU time: a loop
		// that only allocates leaves it little time to collect in).
		for range garbage / (64 << 10) {
			sink = make([]byte, 64<<10)
			sink[0] = 1
			time.Sleep(20 * time.Microsecond)
		}
		n := gcCycles() - before
		limit := debug.SetMemoryLimit(-1)
		runtime.KeepAlive(hold)
		runtime.KeepAlive(sink)
		return n, limit
	}

	fixed, fixedLimit := cycles(Set)
	follow, followLimit := cycles(Follow)
	t.Logf("a live heap of %d MiB, %d MiB allocated: %d collections under a fixed %d MiB limit, %d following it (limit %d MiB)",
		live/mib, garbage/mib, fixed, fixedLimit/mib, follow, followLimit/mib)
	if fixedLimit != base {
		t.Errorf("Set: the limit is %d MiB, want %d", fixedLimit/mib, base/mib)
	}
	if followLimit < live+live/4 {
		t.Errorf("Follow: the limit is %d MiB with %d MiB live, want at least %d", followLimit/mib, live/mib, (live+live/4)/mib)
	}
	// 96 MiB through a headroom of at least 8 MiB: about 12 collections.
	if follow > 24 {
		t.Errorf("Follow: %d collections for %d MiB of garbage, want at most 24", follow, garbage/mib)
	}
	if fixed < 10*follow {
		t.Errorf("a fixed limit under the live heap collected %d times, Follow %d: the test no longer shows the loop it guards against", fixed, follow)
	}

	// The heap let go, the next collection brings the limit back down
	// (once its cleanup has run, on the runtime's cleanup goroutine).
	got := int64(0)
	for range 100 {
		runtime.GC()
		if got = debug.SetMemoryLimit(-1); got == base {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("after the live heap is gone the limit is %d MiB, want the base %d", got/mib, base/mib)
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestFollowStopsAtTheCeiling: a live heap past four times the limit asked
// for raises the limit to four times it and no further.
func TestFollowStopsAtTheCeiling(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { Set(orig) })
	const mib = 1 << 20
	const base = 8 * mib
	hold := make([][]byte, 48)
	for i := range hold {
		hold[i] = make([]byte, mib)
	}
	Follow(base)
	got := int64(0)
	for range 100 {
		runtime.GC()
		if got = debug.SetMemoryLimit(-1); got == Ceiling*base {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(hold)
	if got != Ceiling*base {
		t.Errorf("with 48 MiB live and a limit of %d MiB asked for, the limit is %d MiB, want %d", base/mib, got/mib, Ceiling*base/mib)
	}
}
