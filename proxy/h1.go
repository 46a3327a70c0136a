package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// h1Transport carries the proxy's requests to plain-HTTP upstreams over
// HTTP/1.1, on the goroutine that asks: it writes the request, reads the
// response head and hands back the body, which the same goroutine then
// reads. net/http's transport runs two goroutines per connection and hands
// every request and response across them (four wake-ups a call, each a
// futex on a machine with idle cores): for a small MCP call that was more
// CPU than the bytes themselves.
//
// A request whose body is in memory (GetBody set, at most h1MaxBody
// bytes) is written whole before the response is read; one whose body
// streams from the client is written by a goroutine of its own while the
// response is read, as net/http's transport does (an upstream may answer
// before it has read the body), and its connection is reused only when
// that write ended well within 50ms of the response's end. It handles
// http:// URLs without Expect or Upgrade; anything else (TLS, HTTP/2)
// goes to net/http's transport. The wire format is
// net/http's own: the request is written as [http.Request.Write] writes it
// (the bytes net/http's transport writes, less the Accept-Encoding it adds
// when compression is on, which the proxy turns off), the response is
// read as [http.ReadResponse] reads it (both by h1_wire.go's fast paths
// for the common shapes, by net/http for the rest), with the transport's bound on the head
// (MaxResponseHeaderBytes), its handling of interim responses and the
// ClientTrace hooks the proxy uses. A connection goes back to the pool
// only when its response was read to its end with nothing after it; one
// taken from the pool is checked first for bytes or a close the upstream
// sent while it sat idle (a non-blocking peek), and dropped if it has any;
// while the pool holds any, a sweep each second closes those the upstream
// closed and those idle for longer than the idle timeout (no goroutine
// waits on an idle connection).
type h1Transport struct {
	fallback http.RoundTripper
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	maxHead  int64
	idleTime time.Duration
	maxIdle  int // per host

	mu    sync.Mutex
	idle  map[string][]*h1Conn // by host:port, most recently used last
	sweep *time.Timer          // armed while idle holds connections
}

// h1Sweep is how often the pool is swept.
const h1Sweep = time.Second

// h1MaxBody bounds the request bodies the h1 transport writes before it
// reads the response: a body the socket buffers take whole, so an upstream
// that answers without reading it cannot leave the write blocked.
const h1MaxBody = 64 << 10

// max1xx bounds the interim responses read when no ClientTrace sees them,
// as net/http's transport does.
const max1xx = 5

func newH1Transport(t *http.Transport) *h1Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	h := &h1Transport{fallback: t, dial: d.DialContext, maxHead: t.MaxResponseHeaderBytes,
		idleTime: t.IdleConnTimeout, maxIdle: t.MaxIdleConnsPerHost, idle: map[string][]*h1Conn{}}
	if t.DialContext != nil {
		h.dial = t.DialContext
	}
	if h.maxHead <= 0 {
		h.maxHead = 10 << 20 // net/http's default
	}
	if h.maxIdle <= 0 {
		h.maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	return h
}

// handles reports whether the h1 transport can carry req.
func (h *h1Transport) handles(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.Method == http.MethodConnect || req.Close {
		return false
	}
	_, expect := req.Header["Expect"]
	_, upgrade := req.Header["Upgrade"]
	return !expect && !upgrade && len(req.Trailer) == 0
}

// streams reports a request body that is not in memory, or too large to
// write whole before reading the response.
func streams(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && (req.GetBody == nil || req.ContentLength <= 0 || req.ContentLength > h1MaxBody)
}

func (h *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !h.handles(req) {
		return h.fallback.RoundTrip(req)
	}
	return h.roundTrip(req, nil)
}

// hooks are the ClientTrace's, and an attempt's own (upstream.go), which
// it calls directly.
type hooks struct {
	trace *httptrace.ClientTrace
	a     attemptHooks
}

// gotConn reports c, and returns the watch that cuts it when its
// request is cancelled (the attempt's exchange's); nil: none does.
func (k hooks) gotConn(c *h1Conn, reused bool) (cw *connWatch) {
	if k.a != nil {
		cw = k.a.gotConn(c, reused)
	}
	if k.trace != nil && k.trace.GotConn != nil {
		k.trace.GotConn(httptrace.GotConnInfo{Conn: c.c, Reused: reused, WasIdle: reused})
	}
	return cw
}

func (k hooks) wroteRequest(err error) {
	if k.a != nil && err == nil {
		k.a.arm()
	}
	if k.trace != nil && k.trace.WroteRequest != nil {
		k.trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
}

func (k hooks) gotFirstByte() {
	if k.a != nil {
		k.a.gotFirstByte()
	}
	if k.trace != nil && k.trace.GotFirstResponseByte != nil {
		k.trace.GotFirstResponseByte()
	}
}

// got1xx reports an interim response; seen is false when nobody saw it
// (then the transport bounds them itself).
func (k hooks) got1xx(code int, h http.Header) (seen bool, err error) {
	if k.a != nil {
		seen = true
		if err := k.a.got1xx(code, h); err != nil {
			return true, err
		}
	}
	if k.trace != nil && k.trace.Got1xxResponse != nil {
		return true, k.trace.Got1xxResponse(code, textproto.MIMEHeader(h))
	}
	return seen, nil
}

// roundTrip is RoundTrip for a request it handles, calling a's hooks
// (nil: none) besides the ClientTrace's.
func (h *h1Transport) roundTrip(req *http.Request, a attemptHooks) (*http.Response, error) {
	ctx := req.Context()
	trace := hooks{httptrace.ContextClientTrace(ctx), a}
	key := hostPort(req.URL.Host)
	c, reused, err := h.get(ctx, key)
	if err != nil {
		return nil, err
	}
	// A cancelled request (the client left, a shutdown) ends every wait on
	// the connection at once; the connection is then spent. The exchange
	// cuts it itself when it can (connWatch), or else an AfterFunc does.
	cw := trace.gotConn(c, reused)
	var after func() bool
	if cw == nil {
		after = context.AfterFunc(ctx, c.cut)
	}
	var wr *h1Write
	var res *http.Response
	if streams(req) {
		wr = &h1Write{done: make(chan struct{})}
		go func() {
			defer close(wr.done)
			if wr.err = c.write(req, trace); wr.err != nil {
				c.close() // the read below ends too
			}
		}()
		res, err = c.readHead(req, trace)
		if err != nil {
			c.close()
			<-wr.done // the body is the caller's again
			if wr.err != nil {
				err = wr.err // why the request did not go through
			}
		}
	} else if err = c.write(req, trace); err == nil {
		res, err = c.readHead(req, trace)
	}
	if err != nil {
		unwatch(cw, c, after)
		c.close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		}
		return nil, err
	}
	b := &h1Body{c: c, rc: res.Body, cw: cw, after: after, ctx: ctx, wr: wr, keep: !res.Close && res.StatusCode != http.StatusSwitchingProtocols,
		chunked: len(res.TransferEncoding) > 0}
	res.Body = b
	if res.ContentLength == 0 || req.Method == http.MethodHead || bodyless(res.StatusCode) {
		// No body to read: the connection is free once the head is.
		b.done(nil)
	}
	return res, nil
}

// bodyless reports a status whose response has no body.
func bodyless(code int) bool {
	return code == http.StatusNoContent || code == http.StatusNotModified || code >= 100 && code < 200
}

// CloseIdleConnections closes the pooled connections (and the fallback's).
func (h *h1Transport) CloseIdleConnections() {
	h.mu.Lock()
	idle := h.idle
	h.idle = map[string][]*h1Conn{}
	if h.sweep != nil {
		h.sweep.Stop()
		h.sweep = nil
	}
	h.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.close()
		}
	}
	if ci, ok := h.fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// aLongTimeAgo is a deadline that has passed: it ends every wait at once.
var aLongTimeAgo = time.Unix(1, 0)

func hostPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(stripBrackets(host), "80")
}

func stripBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// get is a connection to key: an idle one that is still clean, or a new
// one.
func (h *h1Transport) get(ctx context.Context, key string) (*h1Conn, bool, error) {
	for {
		h.mu.Lock()
		cs := h.idle[key]
		var c *h1Conn
		if n := len(cs); n > 0 {
			c = cs[n-1]
			cs[n-1] = nil
			h.idle[key] = cs[:n-1]
		}
		h.mu.Unlock()
		if c == nil {
			break
		}
		if c.clean() {
			c.attach()
			return c, true, nil
		}
		c.close()
	}
	nc, err := h.dial(ctx, "tcp", key)
	if err != nil {
		return nil, false, err
	}
	c := &h1Conn{h: h, key: key, c: fastConn(nc)}
	c.lr.r, c.lr.n = c.c, -1
	c.attach()
	return c, false, nil
}

// put gives a connection whose response was read whole back to the pool.
func (h *h1Transport) put(c *h1Conn) {
	c.detach()
	h.mu.Lock()
	cs := h.idle[c.key]
	if len(cs) >= h.maxIdle {
		h.mu.Unlock()
		c.close()
		return
	}
	c.idleAt = time.Now()
	h.idle[c.key] = append(cs, c)
	if h.sweep == nil {
		h.sweep = time.AfterFunc(h1Sweep, h.sweepIdle)
	}
	h.mu.Unlock()
}

// sweepIdle closes the pooled connections the upstream closed (or sent
// bytes on) and those idle past the idle timeout; it runs again while the
// pool holds any.
func (h *h1Transport) sweepIdle() {
	now := time.Now()
	var dead []*h1Conn
	h.mu.Lock()
	n := 0
	for key, cs := range h.idle {
		keep := cs[:0]
		for _, c := range cs {
			if h.idleTime > 0 && now.Sub(c.idleAt) > h.idleTime || !c.clean() {
				dead = append(dead, c)
				continue
			}
			keep = append(keep, c)
		}
		clear(cs[len(keep):])
		if len(keep) == 0 {
			delete(h.idle, key)
		} else {
			h.idle[key] = keep
		}
		n += len(keep)
	}
	switch {
	case h.sweep == nil: // CloseIdleConnections stopped it meanwhile
	case n > 0:
		h.sweep.Reset(h1Sweep)
	default:
		h.sweep = nil
	}
	h.mu.Unlock()
	for _, c := range dead {
		c.close()
	}
}

// h1Conn is one connection to an upstream.
type h1Conn struct {
	h      *h1Transport
	key    string
	c      net.Conn
	lr     headLimit
	br     *bufio.Reader // while in use
	idleAt time.Time     // when it went back to the pool
	spent  atomic.Bool   // cut: never to be reused

	// clean's non-blocking peek, made once
	raw     syscall.RawConn
	peek    func(fd uintptr) bool
	peekErr error
}

// headLimit bounds the bytes read while a response head is read; n < 0
// means no bound.
type headLimit struct {
	r    io.Reader
	n    int64
	over bool
}

func (l *headLimit) Read(p []byte) (int, error) {
	if l.n >= 0 {
		if l.n == 0 {
			l.over = true
			return 0, errHeadTooLarge
		}
		if int64(len(p)) > l.n {
			p = p[:l.n]
		}
	}
	n, err := l.r.Read(p)
	if l.n >= 0 {
		l.n -= int64(n)
	}
	return n, err
}

var errHeadTooLarge = errors.New("head too large")

var (
	h1Readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}
	h1Writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

func (c *h1Conn) attach() {
	c.br = h1Readers.Get().(*bufio.Reader)
	c.br.Reset(&c.lr)
}

func (c *h1Conn) detach() {
	if c.br != nil {
		c.br.Reset(nil)
		h1Readers.Put(c.br)
		c.br = nil
	}
}

// unwatch ends the watch that cuts c when its request is cancelled: true
// when c was not cut and now will not be.
func unwatch(cw *connWatch, c *h1Conn, after func() bool) bool {
	if cw != nil {
		return cw.release(c)
	}
	return after()
}

// cut ends every wait on the connection at once (its request was
// cancelled, or its attempt ended): the connection is spent, and never
// goes back to the pool.
func (c *h1Conn) cut() {
	c.spent.Store(true)
	_ = c.c.SetDeadline(aLongTimeAgo)
}

// close closes the connection. Its read buffer is left to the garbage
// collector: a body read on another goroutine may still be in it.
func (c *h1Conn) close() {
	_ = c.c.Close()
}

// h1Write is a request being written by a goroutine of its own.
type h1Write struct {
	done chan struct{}
	err  error // set before done closes
}

// write writes req, head and body, and flushes it.
func (c *h1Conn) write(req *http.Request, trace hooks) error {
	bw := h1Writers.Get().(*bufio.Writer)
	bw.Reset(c.c)
	var err error
	if !writeRequest(bw, req, trace.trace) {
		err = req.Write(bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	h1Writers.Put(bw)
	trace.wroteRequest(err)
	return err
}

// readHead reads the response head, past any interim responses.
func (c *h1Conn) readHead(req *http.Request, trace hooks) (*http.Response, error) {
	c.lr.n = c.h.maxHead
	defer func() { c.lr.n = -1 }()
	if _, err := c.br.Peek(1); err != nil {
		return nil, c.headErr(err)
	}
	trace.gotFirstByte()
	for n1xx := 0; ; {
		res, ok := readResponse(c.br, req)
		if !ok {
			var err error
			if res, err = http.ReadResponse(c.br, req); err != nil {
				return nil, c.headErr(err)
			}
		}
		code := res.StatusCode
		if code < 100 || code > 199 || code == http.StatusSwitchingProtocols {
			return res, nil
		}
		// An interim response: the final one follows.
		c.lr.n = c.h.maxHead
		if seen, err := trace.got1xx(code, res.Header); err != nil {
			return nil, err
		} else if seen {
			continue
		}
		if n1xx++; n1xx > max1xx {
			return nil, errors.New("net/http: too many 1xx informational responses")
		}
	}
}

// headErr is a failure reading a response head, in net/http's words for a
// head over the bound.
func (c *h1Conn) headErr(err error) error {
	if c.lr.over {
		return fmt.Errorf("net/http: server response headers exceeded %d bytes; aborted", c.h.maxHead)
	}
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// h1Body is a response body from the h1 transport: once read to its end
// with the connection clean, the connection goes back to the pool; closed
// early, the connection is closed (the rest is never drained: a stream
// may not end).
type h1Body struct {
	c       *h1Conn
	rc      io.ReadCloser
	cw      *connWatch  // what cuts the connection, or
	after   func() bool // the AfterFunc's stop that does
	ctx     context.Context
	keep    bool     // the response allows the connection to be reused
	chunked bool     // the body is chunked
	wr      *h1Write // the request's write, when it streamed
	mu      sync.Mutex
	fin     bool
}

// ready reports whether a Read would return at once: the body has ended,
// or bytes of it are in the connection's buffer (for a chunked body, a
// whole chunk-size line and a byte after it).
func (b *h1Body) ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fin {
		return true
	}
	br := b.c.br
	n := br.Buffered()
	if n == 0 || !b.chunked {
		return n > 0
	}
	p, _ := br.Peek(n)
	i := bytes.IndexByte(p, '\n')
	return i >= 0 && i+1 < n
}

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	fin := b.fin
	b.mu.Unlock()
	if fin {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.done(nil)
	case err != nil:
		if b.ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", context.Cause(b.ctx), err)
		}
		b.done(err)
	}
	return n, err
}

// done ends the body: at its end (err nil) the connection is reused when
// nothing follows the response on it; otherwise it is closed.
func (b *h1Body) done(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fin {
		return
	}
	b.fin = true
	c := b.c
	if err == nil && b.keep && b.wrote() && unwatch(b.cw, c, b.after) && c.br.Buffered() == 0 && !c.spent.Load() {
		c.h.put(c)
		return
	}
	unwatch(b.cw, c, b.after)
	c.close()
}

// wrote reports whether the request was written whole, waiting a moment
// for a streamed body's write to end (as net/http's transport does).
func (b *h1Body) wrote() bool {
	if b.wr == nil {
		return true
	}
	select {
	case <-b.wr.done:
	case <-time.After(50 * time.Millisecond):
		return false
	}
	return b.wr.err == nil
}

func (b *h1Body) Close() error {
	b.done(errBodyClosed)
	return nil
}

var errBodyClosed = errors.New("closed before its end")
