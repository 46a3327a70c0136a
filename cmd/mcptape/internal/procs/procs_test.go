package procs

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures"
)

// TestPolicy walks the policy through a day of load: it starts on one P,
// takes every P as soon as one interval uses most of a core, keeps them
// through a short lull and through middling load, and gives them back
// only after Down quiet intervals in a row.
func TestPolicy(t *testing.T) {
	p := NewPolicy(4)
	steps := []struct {
		busy float64
		want int
	}{
		{0, 1}, {0.5, 1}, {0.69, 1}, // light: one P
		{0.7, 4},                               // most of a core: every P at once
		{1.8, 4}, {0.1, 4}, {0.1, 4}, {0.5, 4}, // a short lull, then middling load: still every P
		{0.1, 4}, {0.1, 4}, {0.1, 4}, {0.1, 4}, // four quiet intervals
		{0.1, 1},         // the fifth: one P
		{0.2, 1}, {3, 4}, // and back up
	}
	for i, s := range steps {
		if got := p.Observe(s.busy); got != s.want {
			t.Fatalf("step %d (%.2f cores busy): %d Ps, want %d", i, s.busy, got, s.want)
		}
	}
}

// TestRunFollowsLoad runs the tuner on this test process, its CPU time
// read from a clock the test drives (what the process used is up to the
// machine's other load): one P while idle, looked at once a second, every
// P while the process uses a core and a half, one again once it stops, and
// the runtime's number back when it ends.
func TestRunFollowsLoad(t *testing.T) {
	if why := Fixed(); why != "" {
		t.Skipf("the tuner leaves the Ps alone here: %s", why)
	}
	var (
		mu    sync.Mutex
		used  time.Duration
		since = time.Now()
		load  atomic.Int64 // thousandths of a core
		reads atomic.Int64
	)
	cpu := func() time.Duration {
		reads.Add(1)
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		used += time.Duration(float64(now.Sub(since)) * float64(load.Load()) / 1000)
		since = now
		return used
	}
	setLoad := func(milli int64) {
		cpu() // what was used so far, at the old load
		load.Store(milli)
	}
	max := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, cpu) }()
	defer func() {
		cancel()
		<-done
		if n := runtime.GOMAXPROCS(0); n != max {
			t.Errorf("after the tuner ended: %d Ps, want the %d it found", n, max)
		}
	}()
	fixtures.Eventually(t, 2*time.Second, ps(1, "while idle"))
	// Idle, it looks once a second, not five times.
	r0 := reads.Load()
	time.Sleep(2*IdleInterval + IdleInterval/2)
	if n := reads.Load() - r0; n > 3 {
		t.Errorf("idle for %v, the tuner read the CPU time %d times, want at most 3", 2*IdleInterval+IdleInterval/2, n)
	}
	setLoad(1500)
	fixtures.Eventually(t, 3*IdleInterval, ps(max, "under load"))
	setLoad(100)
	fixtures.Eventually(t, 3*time.Duration(Down)*Interval, ps(1, "once the load is light again"))
}

// CPUTime reads the process's CPU time: it grows while a goroutine works.
func TestCPUTime(t *testing.T) {
	if !cpuTimeKnown {
		t.Skip("no CPU time on this system")
	}
	before := CPUTime()
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
	}
	if after := CPUTime(); after <= before {
		t.Errorf("CPU time %v after 20 ms of work, %v before", after, before)
	}
}

func ps(want int, when string) func() error {
	return func() error {
		if n := runtime.GOMAXPROCS(0); n != want {
			return fmt.Errorf("%d Ps %s, want %d", n, when, want)
		}
		return nil
	}
}
