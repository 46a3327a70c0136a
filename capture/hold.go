package capture

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// HoldQueue is a queue of questions that wait for an answer from someone
// else: the messages an [Interceptor] holds until a person decides, the
// requests a replay client leaves to a person (the dashboard's Pending).
// The one who asks waits in [HoldQueue.Hold]; the one who answers lists
// the questions ([HoldQueue.Waiting]), watches for changes
// ([HoldQueue.Watch]) and answers one by its id ([HoldQueue.Answer]).
// It is safe for concurrent use. The zero value is not usable: use
// [NewHoldQueue].
type HoldQueue[Q, A any] struct {
	max   int
	now   func() time.Time
	check func(q Q, a *A) error

	mu      sync.Mutex
	next    uint64
	items   map[string]*holdItem[Q, A]
	closed  bool
	done    chan struct{} // closed by Close
	changed chan struct{} // closed and replaced on every change
}

type holdItem[Q, A any] struct {
	w      Waiting[Q]
	n      uint64
	answer chan A // buffered: Answer never blocks
}

// Waiting is one question in a HoldQueue.
type Waiting[Q any] struct {
	// ID names it to Answer: the order of asking, in decimal.
	ID string
	// Q is the question as asked.
	Q Q
	// Since is when it started waiting; Deadline when it stops (zero:
	// it waits as long as it takes).
	Since, Deadline time.Time
}

// HoldQueueOptions configures a HoldQueue. Nil means defaults.
type HoldQueueOptions[Q, A any] struct {
	// Max bounds the questions waiting at once: Hold returns ErrHoldFull
	// for one more. Zero means no bound.
	Max int
	// Check checks an answer before Answer takes it (and may normalize
	// it); its error goes back to the one who answered, and the question
	// keeps waiting. Nil takes every answer.
	Check func(q Q, a *A) error
	// Now is the clock (tests). Nil means time.Now.
	Now func() time.Time
}

// Errors of a HoldQueue's Hold and Answer.
var (
	// ErrHoldClosed: the queue is closed (before the question was asked,
	// or while it waited): nobody is left to answer.
	ErrHoldClosed = errors.New("nobody is left to answer (the queue is closed)")
	// ErrHoldFull: the queue holds as many questions as it may.
	ErrHoldFull = errors.New("the queue is full")
	// ErrHoldTimeout: nobody answered within the time Hold was given.
	ErrHoldTimeout = errors.New("nobody answered in time")
	// ErrNotWaiting: Answer's id names no waiting question (answered
	// already, given up, or never asked).
	ErrNotWaiting = errors.New("no such question waits")
)

// NewHoldQueue returns an empty queue.
func NewHoldQueue[Q, A any](o *HoldQueueOptions[Q, A]) *HoldQueue[Q, A] {
	h := &HoldQueue[Q, A]{now: time.Now, items: map[string]*holdItem[Q, A]{}, done: make(chan struct{}), changed: make(chan struct{})}
	if o != nil {
		h.max, h.check = o.Max, o.Check
		if o.Now != nil {
			h.now = o.Now
		}
	}
	return h
}

// Hold asks q and waits for its answer, at most timeout (zero: as long
// as it takes). It returns ErrHoldClosed when the queue is or gets
// closed, ErrHoldFull when it holds Max questions already, ErrHoldTimeout
// when the time runs out, and ctx's error when ctx ends first; in each
// case q leaves the queue. An answer given as the wait ends wins.
func (h *HoldQueue[Q, A]) Hold(ctx context.Context, q Q, timeout time.Duration) (A, error) {
	var zero A
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		return zero, ErrHoldClosed
	case h.max > 0 && len(h.items) >= h.max:
		h.mu.Unlock()
		return zero, ErrHoldFull
	}
	h.next++
	it := &holdItem[Q, A]{n: h.next, answer: make(chan A, 1), w: Waiting[Q]{ID: strconv.FormatUint(h.next, 10), Q: q, Since: h.now()}}
	var expired <-chan time.Time
	if timeout > 0 {
		it.w.Deadline = it.w.Since.Add(timeout)
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	h.items[it.w.ID] = it
	h.changedLocked()
	h.mu.Unlock()

	var why error
	select {
	case a := <-it.answer:
		return a, nil
	case <-h.done:
		return zero, ErrHoldClosed
	case <-expired:
		why = ErrHoldTimeout
	case <-ctx.Done():
		why = ctx.Err()
	}
	if h.withdraw(it.w.ID) {
		return zero, why
	}
	// Answered (or closed) as the wait ended: the answer wins.
	select {
	case a := <-it.answer:
		return a, nil
	case <-h.done:
		return zero, ErrHoldClosed
	}
}

// withdraw takes a question out of the queue; false when it was answered.
func (h *HoldQueue[Q, A]) withdraw(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.items[id]; !ok {
		return false
	}
	delete(h.items, id)
	h.changedLocked()
	return true
}

// Answer answers the question id, once Check takes the answer: it
// returns ErrNotWaiting (wrapped) for an id that does not wait, and
// Check's error, the question still waiting, for an answer it refuses.
func (h *HoldQueue[Q, A]) Answer(id string, a A) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	it, ok := h.items[id]
	if !ok {
		return ErrNotWaiting
	}
	if h.check != nil {
		if err := h.check(it.w.Q, &a); err != nil {
			return err
		}
	}
	delete(h.items, id)
	it.answer <- a
	h.changedLocked()
	return nil
}

// Waiting lists the questions that wait, oldest first.
func (h *HoldQueue[Q, A]) Waiting() []Waiting[Q] {
	h.mu.Lock()
	defer h.mu.Unlock()
	items := slices.SortedFunc(maps.Values(h.items), func(a, b *holdItem[Q, A]) int { return cmp.Compare(a.n, b.n) })
	out := make([]Waiting[Q], len(items))
	for i, it := range items {
		out[i] = it.w
	}
	return out
}

// Watch returns the number of questions waiting and a channel closed on
// the next change (a question asked, answered or given up, Notify, Close).
func (h *HoldQueue[Q, A]) Watch() (int, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.items), h.changed
}

// Notify wakes the watchers for a change the queue does not see itself
// (the rules that fill an Interceptor's).
func (h *HoldQueue[Q, A]) Notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changedLocked()
}

// Close ends the queue: waiting Holds return ErrHoldClosed, and so do
// later ones. It is safe to call more than once.
func (h *HoldQueue[Q, A]) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	clear(h.items)
	h.changedLocked()
}

// Now is the queue's clock.
func (h *HoldQueue[Q, A]) Now() time.Time { return h.now() }

func (h *HoldQueue[Q, A]) changedLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}
