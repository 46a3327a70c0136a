// Package procs sizes the Go scheduler to a proxy's load.
//
// A proxy at light load (one client's calls, one at a time) spends much of
// its CPU waking threads: each time a goroutine becomes ready while a P is
// idle, the runtime wakes another thread to look for work, and that thread
// finds none and sleeps again. With a single P there is no idle P to wake.
// On this project's 2-core benchmark machine one P cut the CPU of a small
// call by about a tenth and its added latency by about a fifth, while a
// proxy under heavy load (many concurrent calls, large results) needs
// every core. Run gives the process one P while it uses less than most of
// one core, and the runtime's default as soon as it needs more.
package procs

import (
	"context"
	"os"
	"runtime"
	"time"
)

// Defaults: the process gets every P once it used at least Up of a core over
// one Interval, and one P again after Down intervals in a row under Low.
// An idle process (under Idle of a core over its last interval, on one P)
// is looked at every IdleInterval instead, so that it wakes once a second.
const (
	Interval     = 200 * time.Millisecond
	Up           = 0.7
	Low          = 0.35
	Down         = 5
	Idle         = 0.02
	IdleInterval = time.Second
)

// Policy decides the number of Ps from the CPU the process used.
type Policy struct {
	max      int // the runtime's default number of Ps
	procs    int // the number chosen last
	lowCount int // intervals in a row under Low
}

// NewPolicy starts at one P, of at most max.
func NewPolicy(max int) *Policy { return &Policy{max: max, procs: 1} }

// Observe takes the cores the process used over the last interval (CPU
// time over wall time) and returns the number of Ps it should have.
func (p *Policy) Observe(busy float64) int {
	switch {
	case busy >= Up:
		p.procs, p.lowCount = p.max, 0
	case busy < Low:
		if p.procs != 1 {
			if p.lowCount++; p.lowCount >= Down {
				p.procs, p.lowCount = 1, 0
			}
		}
	default:
		p.lowCount = 0
	}
	return p.procs
}

// Fixed reports why the number of Ps is left alone, or "": the user set
// GOMAXPROCS, there is a single CPU to use anyway, or the system does not
// say how much CPU the process used.
func Fixed() string {
	if !cpuTimeKnown {
		return "no CPU time to read"
	}
	if os.Getenv("GOMAXPROCS") != "" {
		return "GOMAXPROCS is set"
	}
	if runtime.GOMAXPROCS(0) < 2 {
		return "one CPU"
	}
	return ""
}

// Run sizes the process's Ps to its load until ctx ends, then gives it
// back the number it had. It returns at once when Fixed says why not.
// cpu reads the process's CPU time so far (CPUTime).
func Run(ctx context.Context, cpu func() time.Duration) {
	if Fixed() != "" {
		return
	}
	max := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(max)
	p := NewPolicy(max)
	runtime.GOMAXPROCS(1)
	t := time.NewTimer(Interval)
	defer t.Stop()
	last, lastCPU := time.Now(), cpu()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now, c := time.Now(), cpu()
			busy := 0.0
			if wall := now.Sub(last); wall > 0 {
				busy = float64(c-lastCPU) / float64(wall)
			}
			last, lastCPU = now, c
			before := p.procs
			n := p.Observe(busy)
			if n != before {
				runtime.GOMAXPROCS(n)
			}
			next := Interval
			if n == 1 && busy < Idle {
				next = IdleInterval
			}
			t.Reset(next)
		}
	}
}
