// Package memlimit keeps the Go heap's soft limit from turning into a
// collection loop.
//
// A soft limit (debug.SetMemoryLimit) makes the runtime collect as the
// process's memory nears it, instead of letting the heap grow to twice its
// live size. That keeps a recorder's memory down while large results pass
// through it. But when the live heap itself comes near the limit, every
// collection frees almost nothing, and the runtime collects again at once:
// up to half of the process's CPU, by the runtime's own cap. A store under
// steady traffic gets there: Badger's compactions hold tens of megabytes of
// table buffers on the Go heap while they run. On this project's benchmark
// machine, a recorder at one call at a time spent 1.5-2x its usual CPU per
// call after twenty seconds of traffic, collecting a hundred times a second.
//
// Follow sets the limit and, after every collection, raises it to what the
// live heap needs (the live heap and a quarter more, and the runtime's
// memory outside the heap) when that is more than the limit asked for, up
// to four times that, and lowers it back as the live heap shrinks. Memory
// then grows only with what the process really holds, and collections
// stay a few a second.
package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Headroom is the share of the live heap the limit leaves above it when
// the live heap is what sets it.
const Headroom = 0.25

// Ceiling bounds how far the limit rises: at most Ceiling times the limit
// asked for. Past it the runtime collects as often as it must, as under a
// fixed limit: memory stays bounded however much the live heap holds.
const Ceiling = 4

// Limit is the soft limit for a process asked to stay under base, whose
// live heap is live bytes and whose runtime memory outside the heap
// (stacks, the runtime's own structures) is other bytes.
func Limit(base int64, live, other uint64) int64 {
	if base >= math.MaxInt64/Ceiling {
		return base
	}
	need := float64(live)*(1+Headroom) + float64(other)
	return int64(min(max(float64(base), need), float64(base*Ceiling)))
}

var state struct {
	mu      sync.Mutex
	base    int64 // math.MaxInt64: no limit
	follow  bool
	started bool
}

// Follow sets the soft memory limit to base bytes, raised after each
// collection while the live heap needs more (see Limit). base
// math.MaxInt64 (or less than 1) turns the limit off. A later call to
// Follow or Set replaces it.
func Follow(base int64) { apply(base, true) }

// Set sets the soft memory limit to base bytes and keeps it there, live
// heap or not: for a batch job that had rather collect often than hold
// more memory. base math.MaxInt64 (or less than 1) turns the limit off.
func Set(base int64) { apply(base, false) }

func apply(base int64, follow bool) {
	if base < 1 {
		base = math.MaxInt64
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	state.base, state.follow = base, follow
	debug.SetMemoryLimit(base)
	if follow && !state.started {
		state.started = true
		arm()
	}
}

// arm runs adjust after the next collection: the cleanup of an object
// nothing references runs once a collection has found it unreachable, and
// adjust arms the next one.
func arm() {
	runtime.AddCleanup(new([64]byte), func(struct{}) { adjust() }, struct{}{})
}

var samples = []metrics.Sample{
	{Name: "/gc/heap/live:bytes"},
	{Name: "/memory/classes/total:bytes"},
	{Name: "/memory/classes/heap/released:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
}

// adjust sets the limit for the live heap the last collection found.
func adjust() {
	defer arm()
	state.mu.Lock()
	defer state.mu.Unlock()
	if !state.follow || state.base == math.MaxInt64 {
		return
	}
	metrics.Read(samples)
	v := make([]uint64, len(samples))
	for i, s := range samples {
		if s.Value.Kind() != metrics.KindUint64 {
			return // not this runtime's metric: leave the limit as set
		}
		v[i] = s.Value.Uint64()
	}
	live, total, released, objects, unused, free := v[0], v[1], v[2], v[3], v[4], v[5]
	var other uint64
	if heap := released + objects + unused + free; total > heap {
		other = total - heap
	}
	if l := Limit(state.base, live, other); l != debug.SetMemoryLimit(-1) {
		debug.SetMemoryLimit(l)
	}
}
