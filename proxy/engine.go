package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/textproto"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// engine is the HTTP/1.1 server a reverse proxy's clients talk to: the
// request is read by net/http's own parser ([http.ReadRequest]), or to the
// same request by readHeadFast for a head of the common shape, and checked
// as net/http's server checks it (the protocol version, the Host header,
// every header name and value, the head's size and how long it may take
// to arrive), refused with net/http's answers (400, 431, 501, 505, 417),
// and answered with net/http's rules for a response's framing and its
// connection (Content-Length or chunked, HEAD and bodiless statuses,
// keep-alive, HTTP/1.0, Connection: close, trailers, interim responses).
//
// What it does not do is what made net/http's server cost more than the
// request itself: while a handler runs, net/http reads the connection on
// a goroutine of its own, started for every request and stopped by a
// deadline in the past when the handler returns (four goroutine wake-ups
// a call), to notice a client that went away. The engine watches a
// client only when its request has been in the handler for watchDelay
// (a tool call the upstream takes its time with, a stream): a sweep of
// the requests in flight, on one timer for the whole server, starts the
// watch. A client that goes away during a call of a few milliseconds is
// noticed when the proxy writes its answer, as net/http notices it then
// too.
//
// The engine serves [*Proxy] handlers without a forward leg (whose
// tunnels take over connections); [Listen] picks it.
type engine struct {
	h    http.Handler
	hs   *http.Server // the settings, and the handlers' ServerContextKey
	base context.Context

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*econn]struct{}
	shutting atomic.Bool

	// Requests in flight whose body has been read: the sweep starts the
	// watch of those in the handler for longer than watchDelay.
	wmu     sync.Mutex
	waiting map[*eresp]struct{}
	sweep   *time.Timer
	armed   bool

	// The connections' read deadlines (the head's, the idle one's, a
	// body read's), kept by one sweep for the whole server rather than
	// by a timer per connection (see sweeper): a connection past its
	// deadline has its read ended at once, as the runtime's own deadline
	// would end it, within the sweep's slack.
	deadlines *sweeper
	tmu       sync.Mutex
	timed     map[*econn]struct{}
}

// watchDelay is how long a request runs before its client is watched
// for going away.
const watchDelay = 10 * time.Millisecond

// maxPostHandlerReadBytes is how much of a request body the handler left
// unread the engine reads to keep the connection (net/http's bound).
const maxPostHandlerReadBytes = 256 << 10

func newEngine(h http.Handler, hs *http.Server) *engine {
	e := &engine{h: h, hs: hs, conns: map[*econn]struct{}{}, waiting: map[*eresp]struct{}{}, timed: map[*econn]struct{}{}}
	e.deadlines = newSweeper(e.sweepDeadlines)
	e.base = context.WithValue(context.Background(), http.ServerContextKey, hs)
	e.sweep = time.AfterFunc(time.Hour, e.sweepWatch)
	e.sweep.Stop()
	return e
}

func (e *engine) logf(format string, args ...any) {
	if e.hs.ErrorLog != nil {
		e.hs.ErrorLog.Printf(format, args...)
	}
}

// Serve accepts connections on ln until Shutdown or Close.
func (e *engine) Serve(ln net.Listener) error {
	e.mu.Lock()
	if e.shutting.Load() {
		e.mu.Unlock()
		return http.ErrServerClosed
	}
	e.ln = ln
	e.mu.Unlock()
	var delay time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if e.shutting.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				e.logf("http: Accept error: %v; retrying in %v", err, delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := e.newConn(rwc)
		e.mu.Lock()
		if e.shutting.Load() {
			e.mu.Unlock()
			rwc.Close()
			return http.ErrServerClosed
		}
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		go c.serve()
	}
}

// newConn is a connection to serve (with its serve method).
func (e *engine) newConn(rwc net.Conn) *econn {
	c := &econn{e: e, rwc: rwc, remote: rwc.RemoteAddr().String()}
	c.ctx = context.WithValue(e.base, http.LocalAddrContextKey, rwc.LocalAddr())
	c.lr.c = c
	c.setState(stateNew)
	return c
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// Shutdown closes the listener and the idle connections, then waits for
// the others to become idle (and closes them) until ctx ends, as
// net/http's Shutdown does.
func (e *engine) Shutdown(ctx context.Context) error {
	lnErr := e.closeListener()
	poll := time.Millisecond
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		if e.closeIdle() {
			return lnErr
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			poll = min(2*poll, 500*time.Millisecond)
			t.Reset(poll + time.Duration(rand.Int64N(int64(poll/10)+1)))
		}
	}
}

// Close closes the listener and every connection at once.
func (e *engine) Close() error {
	err := e.closeListener()
	e.mu.Lock()
	for c := range e.conns {
		c.rwc.Close()
		delete(e.conns, c)
	}
	e.mu.Unlock()
	return err
}

func (e *engine) closeListener() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutting.Store(true)
	if e.ln == nil {
		return nil
	}
	err := e.ln.Close()
	e.ln = nil
	return err
}

// closeIdle closes the idle connections (and those that have sent no
// request in 5 s), reporting whether none is left.
func (e *engine) closeIdle() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	quiet := true
	for c := range e.conns {
		st, since := c.getState()
		if st == stateNew && since < time.Now().Unix()-5 {
			st = stateIdle
		}
		if st != stateIdle {
			quiet = false
			continue
		}
		c.rwc.Close()
		delete(e.conns, c)
	}
	return quiet
}

// Connection states, as net/http's StateNew, StateActive and StateIdle.
const (
	stateNew int64 = iota
	stateActive
	stateIdle
)

// econn is one client connection.
type econn struct {
	e      *engine
	rwc    net.Conn
	remote string
	ctx    context.Context
	lr     econnReader
	br     *bufio.Reader
	bw     *bufio.Writer
	state  atomic.Int64 // state<<40 | unix seconds
	werr   error        // a write to the client failed

	// The watch for the client going away (watch); mu guards it and
	// lr's hasByte while a watch may run.
	mu        sync.Mutex
	watching  bool
	aborting  bool
	watchDone chan struct{}
	cur       *eresp // the request in the handler, for a read error to end
	body      *ebody // the last request's body

	// The read deadline, kept by the engine's sweep (setReadDeadline).
	dmu  sync.Mutex
	rdue time.Time // zero: none
	cut  bool      // the sweep ended a read: the socket's deadline is in the past
}

func (c *econn) setState(st int64) { c.state.Store(st<<40 | time.Now().Unix()) }

func (c *econn) getState() (int64, int64) {
	v := c.state.Load()
	return v >> 40, v & (1<<40 - 1)
}

var (
	ebReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	ebWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

func (c *econn) serve() {
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.e.logf("http: panic serving %v: %v\n%s", c.remote, v, buf)
		}
		c.close()
	}()
	c.br = ebReaders.Get().(*bufio.Reader)
	c.br.Reset(&c.lr)
	c.bw = ebWriters.Get().(*bufio.Writer)
	c.bw.Reset(ewriter{c})
	hs := c.e.hs
	c.e.tmu.Lock()
	c.e.timed[c] = struct{}{}
	c.e.tmu.Unlock()
	c.setReadDeadline(after(hs.ReadHeaderTimeout))
	lastPOST := false
	for first := true; ; first = false {
		if !first {
			// Wait for the next request's first byte: the idle timeout,
			// then the head timeout from there.
			c.setState(stateIdle)
			if c.e.shutting.Load() {
				return
			}
			c.setReadDeadline(after(hs.IdleTimeout))
			if _, err := c.br.Peek(1); err != nil {
				return
			}
			c.setState(stateActive)
			c.setReadDeadline(after(hs.ReadHeaderTimeout))
		}
		req, err := c.readRequest(lastPOST)
		if first {
			c.setState(stateActive)
		}
		if c.e.shutting.Load() {
			return
		}
		if err != nil {
			c.refuse(err)
			return
		}
		lastPOST = req.Method == http.MethodPost
		if !c.serveRequest(req) {
			return
		}
	}
}

// after is the deadline d from now; none when d is not positive.
func after(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// close closes the connection after flushing what is buffered.
func (c *econn) close() {
	c.e.tmu.Lock()
	delete(c.e.timed, c)
	c.e.tmu.Unlock()
	if c.bw != nil {
		_ = c.bw.Flush()
		c.bw.Reset(nil)
		ebWriters.Put(c.bw)
		c.bw = nil
	}
	if c.br != nil {
		// A body read still under way on another goroutine (a body that
		// streamed upstream) may use the reader until the close below
		// ends it: that reader is left to the collector.
		if c.body == nil || !c.body.busy() {
			c.br.Reset(nil)
			ebReaders.Put(c.br)
		}
		c.br = nil
	}
	c.rwc.Close()
	c.e.mu.Lock()
	delete(c.e.conns, c)
	c.e.mu.Unlock()
}

// statusError is a request refused with a status and a reason.
type statusError struct {
	code int
	text string
}

func (e statusError) Error() string { return http.StatusText(e.code) + ": " + e.text }

var errHeadTooLarge431 = errors.New("http: request too large")

// readRequest reads and checks the next request's head.
func (c *econn) readRequest(lastPOST bool) (*http.Request, error) {
	maxHead := c.e.hs.MaxHeaderBytes
	if maxHead <= 0 {
		maxHead = http.DefaultMaxHeaderBytes
	}
	c.lr.remain = int64(maxHead) + 4096 // as net/http: the head bound and the reader's slop
	c.lr.hit = false
	if lastPOST {
		// Old clients send a CRLF after a POST's body (RFC 7230 §3.5).
		peek, _ := c.br.Peek(4)
		_, _ = c.br.Discard(numLeadingCRorLF(peek))
	}
	c.lr.capture = c.lr.capture[:0]
	if c.br.Buffered() == 0 {
		// The first read, as http.ReadRequest's would be (a failure is
		// the one it would return): a head that came whole is in it.
		if _, err := c.br.Peek(1); err != nil {
			return nil, err
		}
	}
	// A head of the common shape already in the buffer is read without
	// net/http's parser, to the same request (engine_head.go).
	req := readHeadFast(c.br)
	fast := req != nil
	if !fast {
		// The head as it arrives: the Host headers of a request whose
		// target names a host are read from it (http.ReadRequest keeps
		// the target's).
		if n := c.br.Buffered(); n > 0 {
			p, _ := c.br.Peek(n)
			c.lr.capture = append(c.lr.capture, p...)
		}
		c.lr.capturing = true
		var err error
		req, err = http.ReadRequest(c.br)
		c.lr.capturing = false
		if err != nil {
			if c.lr.hit {
				return nil, errHeadTooLarge431
			}
			return nil, err
		}
	}
	c.lr.remain = 1<<63 - 1
	// The head's deadline ends with the head: a body's reads have their
	// own (the proxy's per-read idle bound), and a stream may last.
	c.setReadDeadline(time.Time{})
	if cap(c.lr.capture) > 64<<10 {
		c.lr.capture = nil
	}
	if req.ProtoMajor != 1 && !(req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.Method == "PRI" && req.RequestURI == "*") {
		return nil, statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	var one [1]string
	hosts, err := c.hosts(req, &one)
	if err != nil {
		return nil, err
	}
	h2Upgrade := req.Method == "PRI" && len(req.Header) == 0 && len(hosts) == 0 && req.URL.Path == "*" && req.Proto == "HTTP/2.0"
	if req.ProtoAtLeast(1, 1) && len(hosts) == 0 && !h2Upgrade && req.Method != http.MethodConnect {
		return nil, statusError{http.StatusBadRequest, "missing required Host header"}
	}
	if len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]) {
		return nil, statusError{http.StatusBadRequest, "malformed Host header"}
	}
	// The fast reader takes only token names and values without control
	// bytes, which is what these checks ask: only what net/http's parser
	// gave is checked again.
	if !fast {
		if err := checkFields(req.Header); err != nil {
			return nil, err
		}
	}
	if h2Upgrade {
		req.Close = true
	}
	return req, nil
}

// checkFields refuses a header with a name that is not a token or a value
// with control bytes, as net/http's server does.
func checkFields(h http.Header) error {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return statusError{http.StatusBadRequest, "invalid header name"}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return statusError{http.StatusBadRequest, "invalid header value"}
			}
		}
	}
	return nil
}

// hosts are the request's Host header values. http.ReadRequest drops the
// header once it has read req.Host from it, or from the target when it
// names a host: the captured head says then.
func (c *econn) hosts(req *http.Request, one *[1]string) ([]string, error) {
	if req.URL.Host == "" {
		if req.Host == "" {
			return nil, nil // none, or an empty one: refused either way below
		}
		one[0] = req.Host // (the caller's: the common case allocates nothing)
		return one[:], nil
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(c.lr.capture)))
	if _, err := tp.ReadLine(); err != nil {
		return nil, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	return h["Host"], nil
}

func numLeadingCRorLF(v []byte) (n int) {
	for _, b := range v {
		if b != '\r' && b != '\n' {
			break
		}
		n++
	}
	return n
}

const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// refuse answers a request that could not be read, as net/http does,
// and ends the connection.
func (c *econn) refuse(err error) {
	var se statusError
	switch {
	case err == errHeadTooLarge431:
		const msg = "431 Request Header Fields Too Large"
		fmt.Fprintf(c.rwc, "HTTP/1.1 "+msg+errorHeaders+msg)
		c.closeWriteAndWait()
	case fmt.Sprintf("%T", err) == "*http.unsupportedTEError":
		code := http.StatusNotImplemented
		fmt.Fprintf(c.rwc, "HTTP/1.1 %d %s%sUnsupported transfer encoding", code, http.StatusText(code), errorHeaders)
	case isCommonNetReadError(err):
	case errors.As(err, &se):
		fmt.Fprintf(c.rwc, "HTTP/1.1 %d %s: %s%s%d %s: %s", se.code, http.StatusText(se.code), se.text, errorHeaders, se.code, http.StatusText(se.code), se.text)
	default:
		const msg = "400 Bad Request"
		fmt.Fprintf(c.rwc, "HTTP/1.1 "+msg+errorHeaders+msg)
	}
}

func isCommonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	if oe, ok := err.(*net.OpError); ok && oe.Op == "read" {
		return true
	}
	return false
}

// closeWriteAndWait half-closes the connection and lingers, so that the
// client reads the answer before the close (net/http's rstAvoidanceDelay).
func (c *econn) closeWriteAndWait() {
	_ = c.bw.Flush()
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	time.Sleep(500 * time.Millisecond)
}

// serveRequest runs the handler for req and finishes its response;
// false: the connection is to be closed.
func (c *econn) serveRequest(req *http.Request) bool {
	ctx, cancel := context.WithCancel(c.ctx)
	req = req.WithContext(ctx)
	req.RemoteAddr = c.remote
	w := &eresp{c: c, req: req, header: make(http.Header), cancel: cancel, declared: -1,
		wants10KeepAlive: req.ProtoMajor == 1 && req.ProtoMinor == 0 && httpguts.HeaderValuesContainsToken(req.Header["Connection"], "keep-alive"),
		wantsClose:       req.Close || httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close")}
	defer w.cancelAll()
	w.bodyv = ebody{rc: req.Body, w: w}
	b := &w.bodyv
	w.body, c.body = b, b
	switch {
	case httpguts.HeaderValuesContainsToken(req.Header["Expect"], "100-continue"):
		if req.ProtoAtLeast(1, 1) && req.ContentLength != 0 {
			b.cont, b.expect = true, true
			w.canContinue.Store(true)
		}
	case req.Header.Get("Expect") != "":
		w.header.Set("Connection", "close")
		w.finished = true // an empty body, said so
		w.WriteHeader(http.StatusExpectationFailed)
		w.finish()
		return false
	}
	if req.Body == http.NoBody || req.Body == nil {
		b.sawEOF = true
	} else {
		req.Body = b
	}
	c.mu.Lock()
	c.cur = w
	c.mu.Unlock()
	if b.sawEOF {
		c.e.watchLater(w)
	}
	ok := c.runHandler(w, req)
	c.endWatch(w)
	if !ok {
		return false
	}
	w.finish()
	_ = c.rwc.SetWriteDeadline(time.Time{})
	return w.reusable()
}

// runHandler calls the handler; false when it panicked (the connection is
// then closed, as net/http closes it).
func (c *econn) runHandler(w *eresp, req *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.e.logf("http: panic serving %v: %v\n%s", c.remote, v, buf)
			}
			ok = false
		}
	}()
	if req.RequestURI == "*" && req.Method == http.MethodOptions {
		// OPTIONS * asks about the server: answered here, as net/http does.
		w.header.Set("Content-Length", "0")
		if req.ContentLength != 0 {
			if n, _ := io.CopyN(io.Discard, req.Body, 4<<10+1); n > 4<<10 {
				w.closeAfter = true
			}
		}
		return true
	}
	c.e.h.ServeHTTP(w, req)
	return true
}

// econnReader is what the connection's bufio.Reader reads: the head's
// bound, the byte a watch read, and the head's capture.
type econnReader struct {
	c         *econn
	remain    int64
	hit       bool
	hasByte   bool
	byteBuf   [1]byte
	capturing bool
	capture   []byte
}

func (r *econnReader) Read(p []byte) (int, error) {
	if r.remain <= 0 {
		r.hit = true
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	var n int
	var err error
	if r.hasByte {
		p[0], r.hasByte, n = r.byteBuf[0], false, 1
	} else if n, err = r.c.rwc.Read(p); err != nil {
		r.c.readFailed()
	}
	r.remain -= int64(n)
	if r.capturing {
		r.capture = append(r.capture, p[:n]...)
	}
	return n, err
}

// readFailed: a read from the client failed: the connection is over, and
// so is the request in the handler (net/http cancels its context too).
func (c *econn) readFailed() {
	c.mu.Lock()
	w := c.cur
	c.mu.Unlock()
	if w != nil {
		w.cancelAll()
	}
}

// ewriter is the client connection as the response's bufio.Writer writes
// to it: a failed write ends the request in the handler.
type ewriter struct{ c *econn }

func (w ewriter) Write(p []byte) (int, error) {
	n, err := w.c.rwc.Write(p)
	if err != nil && w.c.werr == nil {
		w.c.werr = err
		w.c.readFailed()
	}
	return n, err
}

// ebody is a request body as the handler reads it: it sends the 100
// Continue a client asked for when the handler first reads, and puts the
// request on the watch list once the body has been read to its end. The
// handler may read it on another goroutine (a body that streams
// upstream): mu guards its state, not the read itself.
type ebody struct {
	rc     io.ReadCloser
	w      *eresp
	expect bool // the client asked for a 100 Continue

	mu      sync.Mutex
	cont    bool // the 100 Continue is still to be sent
	reading bool // a Read is under way
	sawEOF  bool
	closed  bool
	n       int64
}

func (b *ebody) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose
	case b.sawEOF:
		b.mu.Unlock()
		return 0, io.EOF
	}
	b.reading = true
	cont := b.cont
	b.cont = false
	b.mu.Unlock()
	if cont {
		b.w.sendContinue()
	}
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.reading = false
	b.n += int64(n)
	eof := err == io.EOF && !b.sawEOF
	if eof {
		b.sawEOF = true
	}
	b.mu.Unlock()
	if eof {
		b.w.c.e.watchLater(b.w)
	}
	return n, err
}

// busy reports a Read under way.
func (b *ebody) busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reading
}

func (b *ebody) eof() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sawEOF
}

func (b *ebody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}
