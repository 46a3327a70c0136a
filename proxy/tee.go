package proxy

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A chunked response's flush after a large write is put off, briefly.
// net/http writes a chunk's header and data to the connection at once
// when the data is this large, and keeps only the chunk's closing CRLF
// in its buffer: flushing that alone after every 128 KiB of a large
// result was a third of the proxy's writes, each a TCP segment the client
// then handles. The CRLF goes out with the next chunk instead, or at
// the latest lazyFlushDelay later, when the upstream pauses (a client that
// reads a chunk whole before handing it on waits no longer than that; the
// data itself is never held).
const (
	lazyFlushMin   = 16 << 10
	lazyFlushDelay = time.Millisecond
)

// bodyReporter is who reports a response's body bytes to the recorder.
type bodyReporter uint8

const (
	// reportByWriter: the teeWriter, as the bytes go to the client.
	reportByWriter bodyReporter = iota
	// reportByBody: the response body the proxy took over, as it reads
	// the upstream's bytes (the legacy endpoint rewrite, the hold points).
	reportByBody
	// reportWithHead: the upstream's original body, kept whole by the
	// OAuth rewrite, reported with the head.
	reportWithHead
	// reportNone: nobody; the proxy answers a client that went away only
	// in case it still reads (it half-closed), and the record keeps the
	// exchange cut, with the status.
	reportNone
)

// teeWriter is the ResponseWriter the relay writes to: it reports
// the headers and every byte that went to the client to the Tap, so the
// record shows what the client actually received.
type teeWriter struct {
	http.ResponseWriter
	x           *exchange
	wroteHeader bool
	declared    int64 // the response's Content-Length, -1 when none
	written     int64
	synthesized bool
	writeErr    error
	aborted     bool
	abortText   string
	upstreamErr string
	// body is who reports the response's body bytes to the Tap, decided
	// once per response (takeBody; the proxy's own answers by the writer).
	body bodyReporter

	// mu orders the writes and flushes to ResponseWriter once a put-off
	// flush (lazyFlushDelay) may run on its timer's goroutine.
	mu        sync.Mutex
	lastWrite int         // the length of the last Write
	late      *time.Timer // the put-off flush, once there was one
	lateDue   bool        // a put-off flush is due
	settled   bool        // the handler is done: no flush any more
}

func (t *teeWriter) WriteHeader(code int) {
	if t.wroteHeader {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		t.ResponseWriter.WriteHeader(code)
		return
	}
	t.wroteHeader = true
	h := t.Header()
	// Add nothing the upstream did not send: no sniffed Content-Type, no Date.
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
	if _, ok := h["Date"]; !ok {
		h["Date"] = nil
	}
	t.declared = -1
	if cl := h.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			t.declared = n
		}
	}
	if !t.synthesized {
		t.x.tap.Upstream(t.x.mx.forwarded, t.x.mx.upHeaders)
	}
	if o := t.x.orig; o != nil && !t.synthesized {
		// Rewritten (oauth.go): the record keeps the upstream's original.
		t.x.tap.Rewritten(strings.Join(o.note, "; "))
		t.x.tap.Response(code, o.recorded(h), false)
		if t.body == reportWithHead {
			t.x.tap.ResponseBody(o.body)
		}
	} else {
		t.x.tap.Response(code, h, t.synthesized)
	}
	t.ResponseWriter.WriteHeader(code)
	t.x.mx.wroteHeader(code, h, t.synthesized)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if !t.wroteHeader {
		t.WriteHeader(http.StatusOK)
	}
	// The recorder hears of the bytes before the client can: a reader that
	// asks the recorder (a Sync) after the client had them finds them.
	// Should the write fail, the exchange ends aborted with the reason.
	if t.body == reportByWriter {
		t.x.tap.ResponseBody(p)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lateDue = false // this write's own flush decides
	t.lastWrite = len(p)
	n, err := t.ResponseWriter.Write(p)
	t.written += int64(n)
	t.x.mx.wrote(n)
	if err != nil && t.writeErr == nil {
		t.writeErr = err
	}
	return n, err
}

// FlushError lets http.ResponseController flush through the wrapper.
//
// Once a response of known length has all its bytes written, the flush
// is skipped: those last bytes then leave when the handler returns, that is
// after the exchange was reported ended, so a client that has read a whole
// response finds it recorded. (The relay flushes every write of an SSE
// response, whatever its length, but the last.) After a large write to a
// response of unknown length (chunked), the flush is put off
// (lazyFlushDelay).
func (t *teeWriter) FlushError() error {
	if !t.wroteHeader {
		t.WriteHeader(http.StatusOK)
	}
	if t.declared >= 0 && t.written >= t.declared {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.declared < 0 && t.lastWrite >= lazyFlushMin && !t.settled {
		t.lateDue = true
		if t.late == nil {
			t.late = time.AfterFunc(lazyFlushDelay, t.lateFlush)
		} else {
			t.late.Reset(lazyFlushDelay)
		}
		return nil
	}
	t.lateDue = false
	return http.NewResponseController(t.ResponseWriter).Flush()
}

// lateFlush is the put-off flush, on its timer's goroutine.
func (t *teeWriter) lateFlush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lateDue && !t.settled {
		t.lateDue = false
		_ = http.NewResponseController(t.ResponseWriter).Flush()
	}
}

// settle ends put-off flushes, before the handler returns (net/http then
// flushes what is left itself).
func (t *teeWriter) settle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settled = true
	if t.late != nil {
		t.late.Stop()
	}
}

// earlyEnder is a ResponseWriter that can end its response before the
// handler returns (the engine's).
type earlyEnder interface{ endEarly() bool }

// answer ends the response now, when the writer can, after its last byte:
// its end is reported first (see FlushError), then the client gets what is
// left of it, and only then does the handler tidy up (the upstream's
// connection back to its pool, the contexts, the tracking).
func (t *teeWriter) answer() {
	t.settle()
	t.x.mx.end()
	t.x.tap.End(t.endText(), t.aborted)
	if e, ok := t.ResponseWriter.(earlyEnder); ok {
		e.endEarly()
	}
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (t *teeWriter) endText() string {
	switch {
	case t.abortText != "":
		return t.abortText
	case t.upstreamErr != "":
		return t.upstreamErr
	case t.writeErr != nil:
		return "writing to the client: " + t.writeErr.Error()
	}
	return ""
}

// upstreamBody notes why reading the upstream's body failed, so the record
// says why a response was cut.
type upstreamBody struct {
	io.ReadCloser
	x *exchange
}

func (b *upstreamBody) ready() bool {
	r, ok := b.ReadCloser.(readyReader)
	return ok && r.ready()
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.x.setUpErr(err)
	}
	return n, err
}
