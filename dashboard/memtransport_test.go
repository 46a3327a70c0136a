package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"sync"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/dashboard"
)

// memTransport serves requests with a handler in this process, without a
// network: a test inside a testing/synctest bubble talks to a dashboard
// on the bubble's clock (a socket would leave goroutines that are not
// durably blocked, and the clock would never move). Responses stream, the
// live tail's included: a write reaches the reader as it is made, and
// closing the body ends the handler's request context.
type memTransport struct{ h http.Handler }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	req = req.Clone(ctx)
	if req.Body == nil {
		req.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &memWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				cancel()
				panic(v)
			}
			w.WriteHeader(http.StatusOK)
			pw.Close()
		}()
		m.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		pr.Close()
		return nil, ctx.Err()
	}
	return &http.Response{Status: http.StatusText(w.code), StatusCode: w.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &memBody{PipeReader: pr, cancel: cancel}, ContentLength: -1, Request: req}, nil
}

// memWriter is the handler's side: its head is sent with the first write
// (or WriteHeader), its body through the pipe.
type memWriter struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	code   int
	sent   http.Header
}

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *memWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush is a no-op: the pipe hands every write over at once.
func (w *memWriter) Flush() {}

type memBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *memBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// memBase is the address an in-memory dashboard answers at.
const memBase = "http://dashboard.test"

// newMemDash is a dashboard over store reached through memTransport, and
// an API client logged in to it as a browser is: for tests in a synctest
// bubble.
func newMemDash(t *testing.T, store capture.Store, o *dashboard.Options) (*dashboard.Server, *apiClient) {
	t.Helper()
	d, err := dashboard.New(store, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	knowToken(t, memBase, d.Token())
	jar, _ := cookiejar.New(nil)
	c := &apiClient{t: t, base: memBase, hc: &http.Client{Jar: jar, Transport: memTransport{d}}}
	c.get("/?token="+d.Token(), nil)
	return d, c
}
