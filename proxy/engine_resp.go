package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// eresp is the engine's http.ResponseWriter. The head is written to the
// connection's buffer when the handler writes it (so later changes to the
// header map are not sent, as with net/http), and leaves with the first
// flush or the response's end; net/http's rules decide the framing and
// whether the connection is kept (chunkWriter.writeHeader, which this
// follows for what a proxy's handler sends).
type eresp struct {
	c      *econn
	req    *http.Request
	header http.Header
	cancel func() // the request's context's; call cancelAll
	body   *ebody
	bodyv  ebody     // what body points to, allocated with the response
	since  time.Time // when the body was read whole (the watch's clock; engine.wmu)

	wants10KeepAlive, wantsClose bool

	wroteHeader bool
	status      int
	declared    int64 // Content-Length; -1 when none
	written     int64
	chunked     bool
	noBody      bool // HEAD, or a status without a body
	closeAfter  bool
	trailers    []string // declared in the Trailer header
	finished    bool
	early       bool // ended by endEarly: the handler writes nothing more

	// What the handler joined to the request's context (join).
	joinMu sync.Mutex
	joined causeCanceller

	// The automatic 100 Continue (ebody) and interim responses share the
	// buffer with the response, from the body's reader's goroutine.
	contMu      sync.Mutex
	canContinue atomic.Bool
}

func (w *eresp) Header() http.Header { return w.header }

// cancelAll cancels the request's context, and what the handler joined to
// it.
func (w *eresp) cancelAll() {
	w.cancel()
	w.joinMu.Lock()
	j := w.joined
	w.joined = nil
	w.joinMu.Unlock()
	if j != nil {
		j.cancel(context.Canceled) // what a child of the request's context gets
	}
}

// causeCanceller is what a handler joins to a request's context.
type causeCanceller interface{ cancel(cause error) }

// owns reports whether r's context is still the engine's.
func (w *eresp) owns(r *http.Request) bool { return r.Context() == w.req.Context() }

// join has j cancelled whenever the request's context is (at once, when it
// already was): a handler's context can then end as a child of the
// request's would, without being registered with it. The request must be
// one the engine owns.
func (w *eresp) join(j causeCanceller) {
	w.joinMu.Lock()
	// cancelAll cancels the context before it takes what was joined.
	gone := w.req.Context().Err() != nil
	if !gone {
		w.joined = j
	}
	w.joinMu.Unlock()
	if gone {
		j.cancel(context.Canceled)
	}
}

// sendContinue writes the 100 Continue the client asked for, unless the
// response has begun.
func (w *eresp) sendContinue() {
	if !w.canContinue.Load() {
		return
	}
	w.contMu.Lock()
	defer w.contMu.Unlock()
	if w.canContinue.Load() {
		w.canContinue.Store(false)
		_, _ = w.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		_ = w.c.bw.Flush()
	}
}

func (w *eresp) WriteHeader(code int) {
	if w.wroteHeader {
		w.c.e.logf("http: superfluous response.WriteHeader call")
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 101 || code > 199 {
		w.canContinue.Store(false)
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		// An interim response goes out at once; the header map stays.
		w.contMu.Lock()
		writeStatusLine(w.c.bw, w.req.ProtoAtLeast(1, 1), code)
		_ = w.header.WriteSubset(w.c.bw, excludedHeadersNoBody)
		_, _ = w.c.bw.WriteString("\r\n")
		_ = w.c.bw.Flush()
		w.contMu.Unlock()
		return
	}
	w.contMu.Lock() // no 100 Continue from here on
	defer w.contMu.Unlock()
	w.wroteHeader, w.status = true, code
	if cl := w.header.Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.declared = v
		} else {
			w.c.e.logf("http: invalid Content-Length of %q", cl)
			w.header.Del("Content-Length")
		}
	}
	w.writeHead()
}

// excludedHeadersNoBody are never sent with a response without a body.
var excludedHeadersNoBody = map[string]bool{"Content-Length": true, "Transfer-Encoding": true}

// writeHead writes the status line and headers, deciding the framing and
// whether the connection is kept as net/http does.
func (w *eresp) writeHead() {
	h, req := w.header, w.req
	isHEAD := req.Method == http.MethodHead
	keepAlives := !w.c.e.shutting.Load()
	var exclude map[string]bool
	del := func(k string) {
		if _, ok := h[k]; ok {
			if exclude == nil {
				exclude = map[string]bool{}
			}
			exclude[k] = true
		}
	}
	var setCL, setConn, setTE string
	trailers := false
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			if exclude == nil {
				exclude = map[string]bool{}
			}
			exclude[k], trailers = true, true
		}
	}
	for _, v := range h["Trailer"] {
		trailers = true
		for _, k := range strings.Split(v, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" && httpguts.ValidTrailerHeader(k) {
				w.trailers = append(w.trailers, k)
			}
		}
	}
	te := h.Get("Transfer-Encoding")
	hasTE := te != ""
	if w.finished && !trailers && !hasTE && bodyAllowedForStatus(w.status) && !has(h, "Content-Length") && !isHEAD {
		// The handler ended without writing: an empty body, said so.
		w.declared, setCL = 0, "0"
	}
	if w.wants10KeepAlive && keepAlives && h.Get("Content-Length") != "" && h.Get("Connection") == "keep-alive" {
		w.closeAfter = false
	}
	hasCL := w.declared != -1
	if w.wants10KeepAlive && (isHEAD || hasCL || !bodyAllowedForStatus(w.status)) {
		if _, ok := h["Connection"]; !ok {
			setConn = "keep-alive"
		}
	} else if !req.ProtoAtLeast(1, 1) || w.wantsClose {
		w.closeAfter = true
	}
	if h.Get("Connection") == "close" || !keepAlives {
		w.closeAfter = true
	}
	if w.body.expect && !w.body.eof() {
		// The client waits for a 100 Continue before it sends the body:
		// what follows on the connection is unknown.
		w.closeAfter = true
	}
	if !w.closeAfter && req.ContentLength != 0 && !w.drainBody() {
		w.closeAfter = true
		del("Connection")
		setConn = "close"
	}
	if !bodyAllowedForStatus(w.status) {
		del("Content-Length")
		del("Transfer-Encoding")
		if w.status == http.StatusNotModified {
			del("Content-Type")
		}
	}
	var date []byte
	if !has(h, "Date") {
		// (A proxy's responses carry the upstream's Date, or none.)
		date = time.Now().UTC().AppendFormat(make([]byte, 0, 29), http.TimeFormat)
	}
	if hasCL && hasTE && te != "identity" {
		w.c.e.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.declared)
		del("Content-Length")
		hasCL, w.declared = false, -1
	}
	switch {
	case isHEAD || !bodyAllowedForStatus(w.status):
		w.noBody = true
		del("Transfer-Encoding")
	case hasCL:
		del("Transfer-Encoding")
	case req.ProtoAtLeast(1, 1):
		if hasTE && te == "identity" {
			w.closeAfter = true
			del("Transfer-Encoding")
		} else {
			w.chunked, setTE = true, "chunked"
			if hasTE && te == "chunked" {
				del("Transfer-Encoding")
			}
		}
	default:
		// HTTP/1.0 without a length: the connection's end is the body's.
		w.closeAfter = true
		del("Transfer-Encoding")
	}
	if w.chunked {
		del("Content-Length")
	}
	if w.closeAfter && (!keepAlives || !httpguts.HeaderValuesContainsToken(h["Connection"], "close")) && w.status != http.StatusSwitchingProtocols {
		del("Connection")
		if req.ProtoAtLeast(1, 1) {
			setConn = "close"
		}
	}
	bw := w.c.bw
	writeStatusLine(bw, req.ProtoAtLeast(1, 1), w.status)
	_ = h.WriteSubset(bw, exclude)
	if date != nil {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(date)
		_, _ = bw.WriteString("\r\n")
	}
	if setCL != "" {
		_, _ = bw.WriteString("Content-Length: " + setCL + "\r\n")
	}
	if setConn != "" {
		_, _ = bw.WriteString("Connection: " + setConn + "\r\n")
	}
	if setTE != "" {
		_, _ = bw.WriteString("Transfer-Encoding: " + setTE + "\r\n")
	}
	_, _ = bw.WriteString("\r\n")
}

func has(h http.Header, k string) bool { _, ok := h[k]; return ok }

// drainBody reads what the handler left of the request body, up to
// net/http's bound and within the head timeout, so that the connection
// can carry the next request (a client may send its whole request before
// reading the answer); false: the connection is to be closed.
func (w *eresp) drainBody() bool {
	b := w.body
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.sawEOF:
		return true
	case b.reading || b.closed:
		return false // read elsewhere, or given up
	case w.req.ContentLength > 0 && w.req.ContentLength-b.n >= maxPostHandlerReadBytes:
		return false
	}
	b.closed = true
	if d := w.c.e.hs.ReadHeaderTimeout; d > 0 {
		w.c.setReadDeadline(time.Now().Add(d))
		defer w.c.setReadDeadline(time.Time{})
	}
	_, err := io.CopyN(io.Discard, b.rc, maxPostHandlerReadBytes+1)
	if err == io.EOF {
		b.sawEOF = true
		return true
	}
	return false
}

func bodyAllowedForStatus(code int) bool {
	return !(code >= 100 && code <= 199 || code == http.StatusNoContent || code == http.StatusNotModified)
}

// writeStatusLine writes the line piece by piece into the buffer: no
// string is built for it.
func writeStatusLine(bw *bufio.Writer, is11 bool, code int) {
	proto := "HTTP/1.0 "
	if is11 {
		proto = "HTTP/1.1 "
	}
	_, _ = bw.WriteString(proto)
	if code >= 100 && code <= 999 {
		_ = bw.WriteByte(byte('0' + code/100))
		_ = bw.WriteByte(byte('0' + code/10%10))
		_ = bw.WriteByte(byte('0' + code%10))
	} else {
		_, _ = bw.WriteString(strconv.Itoa(code))
	}
	_ = bw.WriteByte(' ')
	text := http.StatusText(code)
	if text == "" {
		_, _ = bw.WriteString("status code ")
		text = strconv.Itoa(code)
	}
	_, _ = bw.WriteString(text)
	_, _ = bw.WriteString("\r\n")
}

func (w *eresp) Write(p []byte) (int, error) {
	if w.early {
		return 0, errEndedEarly
	}
	w.canContinue.Store(false)
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.declared != -1 && w.written > w.declared {
		return 0, http.ErrContentLength
	}
	if w.noBody {
		return len(p), nil
	}
	bw := w.c.bw
	if w.chunked {
		var hdr [20]byte
		_, _ = bw.Write(strconv.AppendInt(hdr[:0], int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		n, err := bw.Write(p)
		if err == nil {
			_, err = bw.WriteString("\r\n")
		}
		return n, err
	}
	return bw.Write(p)
}

// FlushError sends what is buffered (the head included) to the client.
func (w *eresp) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.c.bw.Flush()
}

func (w *eresp) Flush() { _ = w.FlushError() }

// SetReadDeadline and SetWriteDeadline are the connection's, for
// http.ResponseController; a read deadline is kept by the engine's sweep
// (econn.setReadDeadline), to within its slack.
func (w *eresp) SetReadDeadline(t time.Time) error  { w.c.setReadDeadline(t); return nil }
func (w *eresp) SetWriteDeadline(t time.Time) error { return w.c.rwc.SetWriteDeadline(t) }

// finish ends the response: the head if the handler wrote none, a
// chunked body's last chunk and trailers, and a flush.
func (w *eresp) finish() {
	if w.early {
		return
	}
	w.finished = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	bw := w.c.bw
	if w.chunked {
		_, _ = bw.WriteString("0\r\n")
		if t := w.finalTrailers(); t != nil {
			_ = t.Write(bw)
		}
		_, _ = bw.WriteString("\r\n")
	}
	_ = bw.Flush()
}

// errEndedEarly is a write after endEarly.
var errEndedEarly = errors.New("proxy: write after the response ended")

// endEarly ends a response whose handler has written its last byte and
// has no trailers to add, before the handler returns: the client has its
// answer while the handler tidies up. False, and nothing done, when the
// head is not written or trailers were declared.
func (w *eresp) endEarly() bool {
	if !w.wroteHeader || w.early || len(w.trailers) > 0 {
		return false
	}
	for k := range w.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return false
		}
	}
	w.finish()
	w.early = true
	return true
}

func (w *eresp) finalTrailers() http.Header {
	var t http.Header
	for k, vv := range w.header {
		if kk, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if t == nil {
				t = http.Header{}
			}
			t[kk] = vv
		}
	}
	for _, k := range w.trailers {
		if t == nil {
			t = http.Header{}
		}
		for _, v := range w.header[k] {
			t.Add(k, v)
		}
	}
	return t
}

// reusable reports whether the connection can carry another request.
func (w *eresp) reusable() bool {
	switch {
	case w.closeAfter, w.c.werr != nil:
		return false
	case w.req.Method != http.MethodHead && w.declared != -1 && !w.noBody && w.declared != w.written:
		return false // the body is short: the client would lose its place
	}
	b := w.body
	b.mu.Lock()
	defer b.mu.Unlock()
	// A body the handler left unread was drained with the head, or the
	// connection closes; one read elsewhere right now closes it too.
	return (b.sawEOF || w.req.ContentLength == 0) && !b.reading
}
