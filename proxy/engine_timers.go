package proxy

// The engine's timers, each one for the whole server rather than one per
// request: the read deadlines of its connections (kept by a sweeper) and
// the watch of the clients whose requests are in the handler.

import (
	"time"
)

// setReadDeadline is the connection's read deadline (zero: none), kept
// by the engine's sweep: a read still waiting when the sweep finds the
// deadline past ends with the socket's timeout error, as it would with
// the socket's own deadline, at most the sweep's slack later.
func (c *econn) setReadDeadline(t time.Time) {
	now := time.Now()
	c.dmu.Lock()
	if !t.IsZero() && !t.After(now) {
		// Past already: the socket's own, which ends a read at once.
		c.rdue, c.cut = time.Time{}, true
		_ = c.rwc.SetReadDeadline(aLongTimeAgo)
		c.dmu.Unlock()
		return
	}
	if c.cut {
		c.cut = false
		_ = c.rwc.SetReadDeadline(time.Time{})
	}
	c.rdue = t
	c.dmu.Unlock()
	if !t.IsZero() {
		c.e.deadlines.due(t, now)
	}
}

// sweepDeadlines ends the reads of the connections past their read
// deadline, and returns the earliest deadline left.
func (e *engine) sweepDeadlines(now time.Time) (next time.Time) {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	for c := range e.timed {
		c.dmu.Lock()
		switch {
		case c.rdue.IsZero():
		case !c.rdue.After(now):
			c.rdue, c.cut = time.Time{}, true
			_ = c.rwc.SetReadDeadline(aLongTimeAgo)
		case next.IsZero() || c.rdue.Before(next):
			next = c.rdue
		}
		c.dmu.Unlock()
	}
	return next
}

// watchLater puts a request whose body has been read on the sweep's list.
func (e *engine) watchLater(w *eresp) {
	now := time.Now()
	e.wmu.Lock()
	w.since = now
	e.waiting[w] = struct{}{}
	if !e.armed {
		e.armed = true
		e.sweep.Reset(watchDelay)
	}
	e.wmu.Unlock()
}

// sweepWatch starts the watch of the requests in the handler for longer
// than watchDelay; it runs again while any request waits.
func (e *engine) sweepWatch() {
	now := time.Now()
	var start []*eresp
	e.wmu.Lock()
	for w := range e.waiting {
		if now.Sub(w.since) >= watchDelay {
			start = append(start, w)
			delete(e.waiting, w)
		}
	}
	if len(e.waiting) > 0 {
		e.sweep.Reset(watchDelay)
	} else {
		e.armed = false
	}
	e.wmu.Unlock()
	for _, w := range start {
		w.c.watch(w)
	}
}

// watch reads the client's connection while w is in the handler: its end
// (or a failure) ends the request's context; a byte (the next request,
// pipelined) is kept for the next read, and the watch ends, as net/http's
// background read does.
func (c *econn) watch(w *eresp) {
	c.mu.Lock()
	if c.cur != w || c.watching {
		c.mu.Unlock()
		return
	}
	c.watching = true
	done := make(chan struct{})
	c.watchDone = done
	// The watch waits without a deadline (one a body's read left would
	// end it), as net/http's background read does; set before endWatch
	// can set its own.
	c.setReadDeadline(time.Time{})
	c.mu.Unlock()
	go func() {
		defer close(done)
		if c.lr.hasByte {
			return
		}
		n, err := c.rwc.Read(c.lr.byteBuf[:])
		c.mu.Lock()
		defer c.mu.Unlock()
		if n == 1 {
			c.lr.hasByte = true
		}
		if err != nil && !(c.aborting && isTimeout(err)) {
			w.cancelAll()
		}
	}()
}

// endWatch takes w off the sweep's list and ends its watch, if one runs.
func (c *econn) endWatch(w *eresp) {
	c.e.wmu.Lock()
	delete(c.e.waiting, w)
	c.e.wmu.Unlock()
	c.mu.Lock()
	c.cur = nil
	watching, done := c.watching, c.watchDone
	if watching {
		c.aborting = true
		_ = c.rwc.SetReadDeadline(aLongTimeAgo)
	}
	c.mu.Unlock()
	if !watching {
		return
	}
	<-done
	c.mu.Lock()
	c.watching, c.aborting, c.watchDone = false, false, nil
	c.mu.Unlock()
	_ = c.rwc.SetReadDeadline(time.Time{})
}
