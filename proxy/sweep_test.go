package proxy

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSweeperSlack: a deadline later than the sweep's next run, or
// earlier by no more than its slack, moves no timer, and is kept late by
// at most that slack; one earlier by more moves the timer to it; each
// run re-arms the timer at the earliest deadline left.
func TestSweeperSlack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var pending []time.Time
		type run struct {
			at    time.Duration
			ended []time.Duration
		}
		var runs []run
		s := newSweeper(func(now time.Time) (next time.Time) {
			mu.Lock()
			defer mu.Unlock()
			r := run{at: now.Sub(start)}
			pending = slices.DeleteFunc(pending, func(d time.Time) bool {
				if d.After(now) {
					if next.IsZero() || d.Before(next) {
						next = d
					}
					return false
				}
				r.ended = append(r.ended, d.Sub(start))
				return true
			})
			runs = append(runs, r)
			return next
		})
		due := func(after time.Duration) {
			d := time.Now().Add(after)
			mu.Lock()
			pending = append(pending, d)
			mu.Unlock()
			s.due(d, time.Now())
		}
		due(30 * time.Second) // the timer: at 30s
		time.Sleep(time.Second)
		due(28500 * time.Millisecond) // 29.5s: the timer's 30s is within its slack (28.5/32 s)
		due(40 * time.Second)         // 41s: later, nothing moves
		time.Sleep(30 * time.Second)
		due(5 * time.Second) // 36s: earlier than 41s by more than its slack: the timer moves to it
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []run{
			{30 * time.Second, []time.Duration{30 * time.Second, 29500 * time.Millisecond}}, // 0.5s late
			{36 * time.Second, []time.Duration{36 * time.Second}},
			{41 * time.Second, []time.Duration{41 * time.Second}},
		}
		if len(runs) != len(want) {
			t.Fatalf("runs %v, want %v", runs, want)
		}
		for i := range want {
			if runs[i].at != want[i].at || !slices.Equal(runs[i].ended, want[i].ended) {
				t.Fatalf("runs %v, want %v", runs, want)
			}
		}
	})
}
