package capture_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcptape/mcptape/capture"
)

type held struct {
	a   string
	err error
}

func holdIn(ctx context.Context, q *capture.HoldQueue[string, string], question string, timeout time.Duration) chan held {
	ch := make(chan held, 1)
	go func() {
		a, err := q.Hold(ctx, question, timeout)
		ch <- held{a, err}
	}()
	return ch
}

// TestHoldQueue runs the queue on synctest's clock: a question waits
// until it is answered, given up or timed out, an answer Check refuses
// leaves it waiting, and watchers hear of every change.
func TestHoldQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := capture.NewHoldQueue(&capture.HoldQueueOptions[string, string]{Max: 2, Check: func(question string, a *string) error {
			if *a == "" {
				return errors.New("an empty answer")
			}
			*a = question + "→" + *a
			return nil
		}})
		n, changed := q.Watch()
		if n != 0 {
			t.Fatalf("%d waiting in a new queue", n)
		}

		// Answered: the answer goes through Check.
		first := holdIn(context.Background(), q, "one", 0)
		synctest.Wait()
		select {
		case <-changed:
		default:
			t.Error("no change announced when a question was asked")
		}
		w := q.Waiting()
		if len(w) != 1 || w[0].ID != "1" || w[0].Q != "one" || !w[0].Deadline.IsZero() {
			t.Fatalf("waiting %+v", w)
		}
		if err := q.Answer("1", ""); err == nil || err.Error() != "an empty answer" {
			t.Errorf("an answer Check refuses: %v", err)
		}
		if len(q.Waiting()) != 1 {
			t.Error("a refused answer took the question out")
		}
		if err := q.Answer("1", "yes"); err != nil {
			t.Fatal(err)
		}
		if got := <-first; got.a != "one→yes" || got.err != nil {
			t.Errorf("Hold returned %+v", got)
		}
		if err := q.Answer("1", "again"); !errors.Is(err, capture.ErrNotWaiting) {
			t.Errorf("answering twice: %v", err)
		}

		// Timed out, on the fake clock, with its deadline shown.
		start := time.Now()
		timed := holdIn(context.Background(), q, "two", time.Minute)
		synctest.Wait()
		if w := q.Waiting(); len(w) != 1 || !w[0].Deadline.Equal(start.Add(time.Minute)) {
			t.Errorf("waiting %+v, want a deadline a minute on", w)
		}
		time.Sleep(time.Minute)
		if got := <-timed; !errors.Is(got.err, capture.ErrHoldTimeout) || time.Since(start) != time.Minute {
			t.Errorf("after a minute: %+v at %v", got, time.Since(start))
		}

		// Given up by the asker; full; closed.
		ctx, cancel := context.WithCancel(context.Background())
		gone := holdIn(ctx, q, "three", 0)
		stays := holdIn(context.Background(), q, "four", 0)
		synctest.Wait()
		if got := <-holdIn(context.Background(), q, "five", 0); !errors.Is(got.err, capture.ErrHoldFull) {
			t.Errorf("a third question in a queue of two: %+v", got)
		}
		cancel()
		if got := <-gone; !errors.Is(got.err, context.Canceled) {
			t.Errorf("given up: %+v", got)
		}
		if w := q.Waiting(); len(w) != 1 || w[0].Q != "four" {
			t.Errorf("waiting %+v, want only four", w)
		}
		q.Close()
		if got := <-stays; !errors.Is(got.err, capture.ErrHoldClosed) {
			t.Errorf("closed while waiting: %+v", got)
		}
		if got := <-holdIn(context.Background(), q, "six", 0); !errors.Is(got.err, capture.ErrHoldClosed) {
			t.Errorf("asked of a closed queue: %+v", got)
		}
		q.Close()
	})
}
