package proxy

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// teeWriter is the ResponseWriter the ReverseProxy writes to: it reports
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
	// bodyTapped: the response body reports itself to the Tap (a body the
	// hold points took over, intercept.go), so Write does not.
	bodyTapped bool
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
		if o.body != nil {
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
	if o := t.x.orig; !t.bodyTapped && ((o == nil || o.body == nil) && !t.x.recordsUpstream || t.synthesized) {
		t.x.tap.ResponseBody(p)
	}
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
// response finds it recorded. (ReverseProxy flushes every write of an SSE
// response, whatever its length.)
func (t *teeWriter) FlushError() error {
	if !t.wroteHeader {
		t.WriteHeader(http.StatusOK)
	}
	if t.declared >= 0 && t.written >= t.declared {
		return nil
	}
	return http.NewResponseController(t.ResponseWriter).Flush()
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

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.x.setUpErr(err)
	}
	return n, err
}
