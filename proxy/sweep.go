package proxy

import (
	"sync"
	"sync/atomic"
	"time"
)

// sweeper enforces many deadlines (the connections' read deadlines, the
// upstream's head waits) with one timer, so that a quick call arms no
// timer of its own: a deadline armed per request becomes now and then
// the earliest timer of its P, and each time it does the runtime wakes
// an idle thread to re-arm its sleep (the most frequent futex wake of an
// echo call's record process, measured).
//
// Whoever sets a deadline records it where its scan finds it and calls
// due; the timer is moved only when it would fire more than the slack
// after the new deadline (slackFor: a 32nd of the bound, at most a
// second), and a deadline that moves later (the next call's) moves no
// timer at all. When the timer fires, the scan ends what is past due and
// returns the earliest deadline left, which re-arms it. A bound is thus
// kept to within its slack (at most 1 s on a 30 s bound), never less.
type sweeper struct {
	scan func(now time.Time) (next time.Time) // ends what is due; the earliest deadline left (zero: none)

	base time.Time    // at is in nanoseconds since base
	at   atomic.Int64 // when the timer fires; 0: not armed
	mu   sync.Mutex   // guards arming the timer
	t    *time.Timer
	run  sync.Mutex // one scan at a time
}

func newSweeper(scan func(now time.Time) time.Time) *sweeper {
	return &sweeper{scan: scan, base: time.Now()}
}

// slackFor is how late a deadline bound may be kept: a 32nd of it, at
// most a second.
func slackFor(bound time.Duration) time.Duration {
	return min(max(bound, 0)/32, time.Second)
}

// due makes sure the sweep runs no later than d plus its slack (d's
// bound being d less now).
func (s *sweeper) due(d, now time.Time) {
	s.arm(d, slackFor(d.Sub(now)))
}

func (s *sweeper) arm(d time.Time, slack time.Duration) {
	dn := int64(d.Sub(s.base)) | 1 // never 0 (not armed)
	if at := s.at.Load(); at != 0 && at <= dn+int64(slack) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if at := s.at.Load(); at != 0 && at <= dn+int64(slack) {
		return
	}
	s.at.Store(dn)
	wait := time.Until(d)
	if s.t == nil {
		s.t = time.AfterFunc(wait, s.sweep)
	} else {
		s.t.Reset(wait)
	}
}

func (s *sweeper) sweep() {
	s.run.Lock()
	defer s.run.Unlock()
	// Deadlines recorded from here on arm the timer themselves; those
	// recorded before are in the scan.
	s.mu.Lock()
	s.at.Store(0)
	s.mu.Unlock()
	if next := s.scan(time.Now()); !next.IsZero() {
		s.arm(next, 0)
	}
}
