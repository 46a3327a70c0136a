package procs

import (
	"context"
	"fmt"
	"runtime"
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

// TestRunFollowsLoad runs the tuner on this test process: one P while it
// idles, every P while goroutines spin on more than a core, one again when
// they stop, and the runtime's number back when it ends.
func TestRunFollowsLoad(t *testing.T) {
	if why := Fixed(); why != "" {
		t.Skipf("the tuner leaves the Ps alone here: %s", why)
	}
	max := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, CPUTime) }()
	defer func() {
		cancel()
		<-done
		if n := runtime.GOMAXPROCS(0); n != max {
			t.Errorf("after the tuner ended: %d Ps, want the %d it found", n, max)
		}
	}()
	fixtures.Eventually(t, 2*time.Second, ps(1, "while idle"))

	var stop atomic.Bool
	for range max {
		go func() {
			for !stop.Load() {
			}
		}()
	}
	fixtures.Eventually(t, 5*time.Second, ps(max, "under load"))
	stop.Store(true)
	fixtures.Eventually(t, 5*time.Second, ps(1, "once idle again"))
}

func ps(want int, when string) func() error {
	return func() error {
		if n := runtime.GOMAXPROCS(0); n != want {
			return fmt.Errorf("%d Ps %s, want %d", n, when, want)
		}
		return nil
	}
}
