package proxy

import (
	"io"
	"net/http"

	"github.com/mcptape/mcptape/capture"
)

// teeWriter is the ResponseWriter the ReverseProxy writes to: it reports
// the headers and every byte that went to the client to the Tap, so the
// record shows what the client actually received.
type teeWriter struct {
	http.ResponseWriter
	x           *exchange
	wroteHeader bool
	synthesized bool
	writeErr    error
	aborted     bool
	abortText   string
	upstreamErr string
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
	if !t.synthesized {
		t.x.tap.Upstream(t.x.mx.forwarded, t.x.mx.upHeaders)
	}
	t.x.tap.Response(code, h, t.synthesized)
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
	t.x.tap.ResponseBody(p)
	n, err := t.ResponseWriter.Write(p)
	t.x.mx.wrote(n)
	if err != nil && t.writeErr == nil {
		t.writeErr = err
	}
	return n, err
}

// FlushError lets http.ResponseController flush through the wrapper.
func (t *teeWriter) FlushError() error {
	if !t.wroteHeader {
		t.WriteHeader(http.StatusOK)
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

// forwardBody is a request body larger than the proxy buffers: the buffered
// prefix, then the rest of the inbound body as it arrives. It reports every
// byte to the Tap and ends exactly at the declared length without reading
// the inbound body again (libraries.md §3.6b).
type forwardBody struct {
	prefix []byte
	rest   io.Reader
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
		return n, io.ErrUnexpectedEOF
	case err == io.EOF || b.remain == 0:
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
