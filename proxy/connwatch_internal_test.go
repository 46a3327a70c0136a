package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// watchedPipe is an h1Conn on one end of a pipe: cut shows as a read that
// ends at once with a deadline error.
func watchedPipe(t *testing.T) *h1Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &h1Conn{c: a}
}

func isCut(c *h1Conn) bool {
	done := make(chan error, 1)
	go func() {
		_, err := c.c.Read(make([]byte, 1))
		done <- err
	}()
	select {
	case err := <-done:
		return errors.Is(err, os.ErrDeadlineExceeded) && c.spent.Load()
	case <-time.After(200 * time.Millisecond):
		_ = c.c.SetReadDeadline(aLongTimeAgo) // end the read
		<-done
		return false
	}
}

// TestConnWatch: an exchange cuts the connection its request is on when it
// is cancelled, as a context.AfterFunc on its context would, and lets go
// of one whose response ended.
func TestConnWatch(t *testing.T) {
	t.Run("cancelled while watched", func(t *testing.T) {
		w := &connWatch{on: true}
		c := watchedPipe(t)
		if !w.watch(c) {
			t.Fatal("watch refused")
		}
		w.cancelled()
		if !isCut(c) {
			t.Fatal("the connection was not cut")
		}
		if w.release(c) {
			t.Fatal("release says the cut did not happen")
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		w := &connWatch{on: true}
		w.cancelled()
		c := watchedPipe(t)
		if !w.watch(c) || !isCut(c) || w.release(c) {
			t.Fatal("a connection watched after the cancel was not cut at once")
		}
	})
	t.Run("released, then cancelled", func(t *testing.T) {
		w := &connWatch{on: true}
		c := watchedPipe(t)
		w.watch(c)
		if !w.release(c) {
			t.Fatal("release says it was cut")
		}
		w.cancelled()
		if isCut(c) {
			t.Fatal("a released connection (back in the pool) was cut")
		}
	})
	t.Run("one at a time", func(t *testing.T) {
		w := &connWatch{on: true}
		c1, c2 := watchedPipe(t), watchedPipe(t)
		w.watch(c1)
		if w.watch(c2) {
			t.Fatal("a second connection was watched while one is")
		}
		if !w.release(c1) || !w.watch(c2) {
			t.Fatal("the watch is not free once released")
		}
	})
	t.Run("off", func(t *testing.T) {
		var w connWatch
		if w.watch(watchedPipe(t)) || (*connWatch)(nil).watch(watchedPipe(t)) {
			t.Fatal("a watch not on took a connection")
		}
	})
}

// TestOwnRequestsNotWatched: only the exchange's own request is watched by
// it; a request of the proxy's on the exchange's behalf (an answer, whose
// context is the exchange's without its cancellation) keeps the AfterFunc
// on its own context, which nothing cancels.
func TestOwnRequestsNotWatched(t *testing.T) {
	x := new(exchange)
	x.cw.on = true
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	x.outCtx = exchangeCtx{Context: ctx, x: x}
	req, err := http.NewRequestWithContext(&x.outCtx, http.MethodPost, "http://127.0.0.1/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	if x.watchFor(req) != &x.cw || x.watchFor(req.Clone(req.Context())) != &x.cw {
		t.Error("the exchange's request (or its retry) is not watched by the exchange")
	}
	if x.watchFor(req.WithContext(context.WithoutCancel(&x.outCtx))) != nil {
		t.Error("an answer of the proxy's is watched by the exchange, which would cut it when the exchange ends")
	}
}
