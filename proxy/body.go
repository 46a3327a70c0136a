package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// clientBody is a client's request body as the proxy reads it. Each Read
// must see a byte within idle (the connection's read deadline, armed per
// Read and cleared when the body ends, so that net/http's watch for the
// client closing the connection is never cut by it); the total is bounded
// by max; and once the handler has returned it no longer touches the
// connection, which then belongs to the server again.
type clientBody struct {
	rc       io.ReadCloser
	ctl      http.ResponseController // (a value: allocated with the body)
	idle     time.Duration           // <= 0: no limit
	max      int64                   // <= 0: no limit
	declared int64                   // the Content-Length, -1 when unknown

	mu    sync.Mutex
	done  bool // the handler returned
	armed bool // a read deadline is set
	n     int64
	eof   bool
	err   error // why the body failed, if it did (not io.EOF)
}

// errStalled is a client that sent no byte of its request body for the
// idle timeout.
type errStalled struct {
	idle    time.Duration
	n, want int64
}

func (e *errStalled) Error() string {
	return fmt.Sprintf("the client sent no byte of its request body for %v%s", e.idle, progress(e.n, e.want))
}

// errTooLarge is a request body longer than the proxy forwards.
type errTooLarge struct{ max int64 }

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("the request body is larger than the proxy forwards (%d bytes)", e.max)
}

// errCut is a request body that ended before its declared length, or
// broke: the client went away while sending it.
type errCut struct {
	err     error
	n, want int64
}

func (e *errCut) Error() string {
	return fmt.Sprintf("the client's request body broke off%s: %v", progress(e.n, e.want), e.err)
}

func (e *errCut) Unwrap() error { return e.err }

// errMalformed is a request body whose framing is broken (a bad chunk
// size, say): net/http refused to read on.
type errMalformed struct{ err error }

func (e *errMalformed) Error() string { return "the request body is malformed: " + e.err.Error() }

func (e *errMalformed) Unwrap() error { return e.err }

// clientGone reports a body read error that means the connection broke
// (the client went away), rather than bytes that break the framing.
func clientGone(err error) bool {
	var ne net.Error
	var errno syscall.Errno
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, http.ErrBodyReadAfterClose) || errors.As(err, &ne) || errors.As(err, &errno)
}

func progress(n, want int64) string {
	if want >= 0 {
		return fmt.Sprintf(" (after %d of %d bytes)", n, want)
	}
	return fmt.Sprintf(" (after %d bytes)", n)
}

// errHandlerReturned is a read of the client's body after the handler
// returned (the transport's goroutine can outlive it).
var errHandlerReturned = errors.New("the request is over")

func (b *clientBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.done:
		b.mu.Unlock()
		return 0, errHandlerReturned
	case b.err != nil:
		err := b.err
		b.mu.Unlock()
		return 0, err
	case b.eof:
		b.mu.Unlock()
		return 0, io.EOF
	}
	if b.idle > 0 {
		_ = b.ctl.SetReadDeadline(time.Now().Add(b.idle))
		b.armed = true
	}
	b.mu.Unlock()

	n, err := b.rc.Read(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += int64(n)
	if b.max > 0 && b.n > b.max {
		over := int(b.n - b.max)
		n, b.n = max(n-over, 0), b.max
		err = &errTooLarge{b.max}
	}
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		b.eof = true
	case isTimeout(err) && b.idle > 0:
		err = &errStalled{b.idle, b.n, b.declared}
		b.err = err
	default:
		var tl *errTooLarge
		switch {
		case errors.As(err, &tl):
		case clientGone(err):
			err = &errCut{err, b.n, b.declared}
		default:
			err = &errMalformed{err}
		}
		b.err = err
	}
	b.disarm()
	return n, err
}

// disarm clears the read deadline this body set, unless the handler has
// returned. Called with mu held.
func (b *clientBody) disarm() {
	if b.armed && !b.done {
		_ = b.ctl.SetReadDeadline(time.Time{})
	}
	b.armed = false
}

// reachEOF lets net/http see the end of a body read to its declared
// length (which the forwarded body never reads past): net/http watches
// for the client closing its connection only from then on. Its outcome
// does not matter: every declared byte is in hand.
func (b *clientBody) reachEOF() {
	b.mu.Lock()
	if b.done || b.eof || b.err != nil {
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	var none [1]byte
	_, err := b.rc.Read(none[:0])
	b.mu.Lock()
	b.eof = err == io.EOF
	b.disarm()
	b.mu.Unlock()
}

func (b *clientBody) Close() error { return nil }

// handlerDone is called when the handler returns.
func (b *clientBody) handlerDone() {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
}

// failure is why reading the body failed, if it did.
func (b *clientBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// exactPrefix is the largest declared body readPrefix reads into a buffer
// of its exact size.
const exactPrefix = 4 << 10

// readPrefix reads up to max bytes of a request body. complete reports
// whether that was all of it; when it is not, buf holds max+1 bytes and the
// rest is still in body. It never allocates more than exactPrefix bytes
// for a declared length up front: past that the buffer grows with the
// bytes that actually arrive.
func readPrefix(body io.Reader, contentLength, max int64) (buf []byte, complete bool, err error) {
	if contentLength == 0 {
		return []byte{}, true, nil
	}
	var b bytes.Buffer
	if contentLength > 0 && contentLength <= min(max, exactPrefix) {
		// A small body (an MCP call's, mostly): one buffer of the declared
		// size and a byte to find its end by, instead of a buffer grown
		// twice. The recorder keeps these bytes: never pooled.
		buf = make([]byte, contentLength+1)
		n, rerr := io.ReadFull(body, buf)
		switch {
		case rerr == io.ErrUnexpectedEOF && int64(n) == contentLength:
			return buf[:n], true, nil
		case rerr == io.ErrUnexpectedEOF || rerr == io.EOF:
			return buf[:n], false, &errCut{io.ErrUnexpectedEOF, int64(n), contentLength}
		case rerr != nil:
			return buf[:n], false, rerr
		}
		// More than it declared: read on as for any other body.
		b.Write(buf)
		_, err = b.ReadFrom(io.LimitReader(body, max-contentLength))
	} else {
		if contentLength > 0 {
			b.Grow(int(min(contentLength, max+1, exactPrefix)))
		}
		_, err = b.ReadFrom(io.LimitReader(body, max+1))
	}
	buf = b.Bytes()
	switch {
	case err != nil:
		return buf, false, err
	case int64(len(buf)) > max:
		return buf, false, nil
	case contentLength > 0 && int64(len(buf)) < contentLength:
		return buf, false, &errCut{io.ErrUnexpectedEOF, int64(len(buf)), contentLength}
	}
	return buf, true, nil
}

// forwardBody is a request body larger than the proxy buffers: the buffered
// prefix, then the rest of the inbound body as it arrives. It reports every
// byte to the Tap and ends exactly at the declared length without reading
// the inbound body again.
type forwardBody struct {
	prefix []byte
	rest   *clientBody
	remain int64 // bytes of rest still expected; <0 when unknown (chunked)
	tap    *capture.Tap
	mx     *exchangeMetrics
	done   bool
}

func (b *forwardBody) Read(p []byte) (int, error) {
	if len(b.prefix) > 0 {
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		return n, nil
	}
	if b.done || b.remain == 0 {
		b.finish()
		return 0, io.EOF
	}
	if b.remain > 0 && int64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	n, err := b.rest.Read(p)
	if n > 0 {
		b.tap.RequestBody(p[:n])
		b.mx.forwardedBytes(n)
		if b.remain > 0 {
			b.remain -= int64(n)
		}
	}
	switch {
	case err == io.EOF && b.remain > 0:
		return n, &errCut{io.ErrUnexpectedEOF, b.rest.n, b.rest.declared}
	case err == io.EOF || b.remain == 0:
		if b.remain == 0 {
			b.rest.reachEOF()
		}
		b.finish()
		return n, io.EOF
	case err != nil:
		return n, err
	}
	return n, nil
}

func (b *forwardBody) finish() {
	if !b.done {
		b.done = true
		b.tap.RequestEnd()
	}
}

func (b *forwardBody) Close() error { return nil }
