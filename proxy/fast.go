package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// The engine is the proxy's own HTTP/1.1 server and client, used by Listen
// when the proxy talks to its upstream itself (Options.Transport is nil).
// Go's net/http does the same job with two goroutine handoffs per request
// on the upstream side and several copies of every header; for a proxy
// whose whole cost is per request, that is most of it. The engine reads
// the client's request and the upstream's response on the client
// connection's goroutine, forwards response bytes as they are read —
// chunked framing included, byte for byte — and parses the framing only to
// hand the recorder the body and to know where it ends.
//
// What it supports is what MCP over Streamable HTTP uses: HTTP/1.1 (and
// 1.0) clients, requests with a Content-Length or a chunked body, responses
// of any framing, 1xx interim responses, keep-alive on both sides, http and
// https upstreams. Upgrades (WebSocket, h2c) are refused with 501.
type engine struct {
	p       *Proxy
	addr    string // upstream host:port
	tls     *tls.Config
	idle    chan *upConn
	dialer  net.Dialer
	closing atomic.Bool
	mu      sync.Mutex
	conns   map[*clientConn]struct{}
	wg      sync.WaitGroup
}

// upConn is a pooled upstream connection.
type upConn struct {
	c  net.Conn
	br *bufio.Reader
}

type clientConn struct {
	c    net.Conn
	br   *bufio.Reader
	busy atomic.Bool // serving a request (not waiting for the next)
	// watch looks for the client closing the connection from the moment a
	// request is upstream until its response is over (or known to be
	// short): a client that gives up cancels the upstream request, even
	// before the upstream's first byte. One per connection, whose requests
	// come one at a time, so that its timer is made once, not per request.
	watch clientWatch
}

const (
	maxHeaderBytes = 1 << 20
	idleTimeout    = 5 * time.Minute
	headTimeout    = 30 * time.Second
	maxIdleUp      = 256
)

var bufPool32 = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

func newEngine(p *Proxy, tlsConf *tls.Config) *engine {
	e := &engine{p: p, idle: make(chan *upConn, maxIdleUp), conns: map[*clientConn]struct{}{},
		dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
	e.addr = p.up.Host
	if p.up.Port() == "" {
		if p.up.Scheme == "https" {
			e.addr = net.JoinHostPort(p.up.Hostname(), "443")
		} else {
			e.addr = net.JoinHostPort(p.up.Hostname(), "80")
		}
	}
	if p.up.Scheme == "https" {
		if tlsConf != nil {
			e.tls = tlsConf.Clone()
		} else {
			e.tls = &tls.Config{}
		}
		if e.tls.ServerName == "" {
			e.tls.ServerName = p.up.Hostname()
		}
		e.tls.NextProtos = []string{"http/1.1"}
	}
	return e
}

func (e *engine) serve(ln net.Listener) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if e.closing.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		cc := &clientConn{c: c}
		e.mu.Lock()
		if e.closing.Load() {
			e.mu.Unlock()
			c.Close()
			continue
		}
		e.conns[cc] = struct{}{}
		e.wg.Add(1)
		e.mu.Unlock()
		go e.serveConn(cc)
	}
}

// shutdown closes idle client connections at once and waits for busy ones
// to finish until ctx ends, then closes them too.
func (e *engine) shutdown(ctx context.Context) error {
	e.closing.Store(true)
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		e.mu.Lock()
		for cc := range e.conns {
			if !cc.busy.Load() {
				cc.c.Close()
			}
		}
		e.mu.Unlock()
		select {
		case <-done:
			e.closeIdle()
			return nil
		case <-ctx.Done():
			e.closeAll()
			<-done
			e.closeIdle()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (e *engine) closeAll() {
	e.closing.Store(true)
	e.mu.Lock()
	for cc := range e.conns {
		cc.c.Close()
	}
	e.mu.Unlock()
}

func (e *engine) closeIdle() {
	for {
		select {
		case uc := <-e.idle:
			uc.c.Close()
		default:
			return
		}
	}
}

func (e *engine) serveConn(cc *clientConn) {
	defer e.wg.Done()
	defer func() {
		e.mu.Lock()
		delete(e.conns, cc)
		e.mu.Unlock()
		cc.c.Close()
	}()
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(cc.c)
	cc.br = br
	defer func() { br.Reset(nil); readerPool.Put(br) }()
	for !e.closing.Load() {
		_ = cc.c.SetReadDeadline(time.Now().Add(idleTimeout))
		if _, err := br.Peek(1); err != nil {
			return
		}
		cc.busy.Store(true)
		_ = cc.c.SetReadDeadline(time.Now().Add(headTimeout))
		keep := e.serveRequest(cc)
		cc.busy.Store(false)
		if !keep {
			return
		}
	}
}

// request is a parsed request head.
type request struct {
	method, target, proto string
	major, minor          int
	header                http.Header
	url                   *url.URL
	contentLength         int64 // -1: none given
	chunked               bool
	close                 bool
}

// errBadRequest is a malformed request head.
type errBadRequest struct{ msg string }

func (e *errBadRequest) Error() string { return e.msg }

func readRequest(br *bufio.Reader) (*request, error) {
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || method == "" || target == "" {
		return nil, &errBadRequest{"malformed request line"}
	}
	major, minor, ok := http.ParseHTTPVersion(proto)
	if !ok || major != 1 {
		return nil, &errBadRequest{"unsupported protocol " + strconv.Quote(proto)}
	}
	mh, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, &errBadRequest{"malformed header: " + err.Error()}
	}
	r := &request{method: method, target: target, proto: proto, major: major, minor: minor, header: http.Header(mh), contentLength: -1}
	if r.url, err = url.ParseRequestURI(target); err != nil {
		return nil, &errBadRequest{"malformed request target"}
	}
	if r.url.IsAbs() {
		// absolute-form: keep the path and query for the upstream.
		r.target = r.url.RequestURI()
	}
	conn := strings.ToLower(strings.Join(r.header.Values("Connection"), ","))
	r.close = strings.Contains(conn, "close") || (minor == 0 && !strings.Contains(conn, "keep-alive"))
	te := r.header.Values("Transfer-Encoding")
	cl := r.header.Values("Content-Length")
	switch {
	case len(te) > 0 && len(cl) > 0:
		return nil, &errBadRequest{"both Transfer-Encoding and Content-Length"}
	case len(te) > 0:
		if len(te) != 1 || !strings.EqualFold(strings.TrimSpace(te[0]), "chunked") {
			return nil, &errBadRequest{"unsupported Transfer-Encoding " + strconv.Quote(strings.Join(te, ","))}
		}
		r.chunked = true
	case len(cl) > 0:
		for _, v := range cl[1:] {
			if v != cl[0] {
				return nil, &errBadRequest{"conflicting Content-Length values"}
			}
		}
		n, err := strconv.ParseInt(strings.TrimSpace(cl[0]), 10, 64)
		if err != nil || n < 0 {
			return nil, &errBadRequest{"malformed Content-Length"}
		}
		r.contentLength = n
	}
	return r, nil
}

// hopByHop removes the hop-by-hop headers, and those named in Connection.
func hopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range protocol.HopByHop {
		h.Del(k)
	}
}

// exchange state of the engine's request.
type fastExchange struct {
	e        *engine
	cc       *clientConn
	req      *request
	hr       *http.Request // for the recorder and metrics
	tap      *capture.Tap
	mx       exchangeMetrics
	body     []byte
	wrote    bool // response headers went to the client
	status   int
	aborted  bool
	errText  string
	finished bool
	// pendingHead is the response head, held to go out with the first body
	// bytes.
	pendingHead []byte
}

// finish reports the end of the exchange to the recorder and the metrics,
// once. A clean response finishes just before its last bytes go out, as
// net/http's handler returns before the server writes the final chunk: a
// client that has read the whole response finds it recorded.
func (x *fastExchange) finish() {
	if x.finished {
		return
	}
	x.finished = true
	x.mx.end()
	x.tap.End(x.errText, x.aborted)
}

// serveRequest serves one request; it reports whether the client
// connection may carry another.
func (e *engine) serveRequest(cc *clientConn) bool {
	p := e.p
	var arrived time.Time
	if p.m != nil {
		arrived = time.Now()
	}
	req, err := readRequest(cc.br)
	if err != nil {
		var bad *errBadRequest
		if errors.As(err, &bad) {
			writeSimple(cc.c, http.StatusBadRequest, "mcptape: bad request: "+bad.msg)
		}
		return false
	}
	_ = cc.c.SetReadDeadline(time.Time{})
	hr := &http.Request{Method: req.method, URL: req.url, Proto: req.proto, ProtoMajor: 1, ProtoMinor: req.minor,
		Header: req.header, Host: req.header.Get("Host"), RemoteAddr: cc.c.RemoteAddr().String(), RequestURI: req.target}
	if hr.Host == "" {
		hr.Host = req.url.Host
	}
	x := &fastExchange{e: e, cc: cc, req: req, hr: hr}
	if p.checkHost && !hostAllowedConn(cc.c.LocalAddr(), hr.Host) {
		x.refuse()
		return false
	}
	if len(req.header.Values("Upgrade")) > 0 {
		tap := p.begin(hr, []byte{}, true, true)
		writeSimple(cc.c, http.StatusNotImplemented, "mcptape: protocol upgrades are not supported")
		tap.End("refused an upgrade", false)
		return false
	}
	if strings.EqualFold(req.header.Get("Expect"), "100-continue") {
		if _, err := io.WriteString(cc.c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
	}
	body, complete, err := readBody(cc.br, req, p.maxBuf)
	if err != nil {
		tap := p.begin(hr, body, false, false)
		tap.End("reading the request body: "+err.Error(), true)
		return false
	}
	x.body = body
	x.tap = p.begin(hr, body, complete, false)
	x.mx.begin(p.m, hr, body, complete, arrived)
	keep := x.forward(complete)
	x.finish()
	return keep && !req.close && !e.closing.Load()
}

// readBody reads a request body: whole when it fits max (a chunked body is
// decoded and forwarded with its length), else the first max+1 bytes, the
// rest left in br for forward to stream.
func readBody(br *bufio.Reader, r *request, max int64) ([]byte, bool, error) {
	switch {
	case r.chunked:
		cr := newChunkedReader(br)
		var b bytes.Buffer
		if _, err := b.ReadFrom(io.LimitReader(cr, 64<<20+1)); err != nil {
			return b.Bytes(), false, err
		}
		if b.Len() > 64<<20 {
			return nil, false, errors.New("a chunked request body over 64 MiB")
		}
		r.chunked, r.contentLength = false, int64(b.Len())
		return b.Bytes(), true, nil
	case r.contentLength <= 0:
		return []byte{}, true, nil
	case r.contentLength <= max:
		b := make([]byte, r.contentLength)
		_, err := io.ReadFull(br, b)
		return b, err == nil, err
	}
	b := make([]byte, max+1)
	_, err := io.ReadFull(br, b)
	return b, false, err
}

// newChunkedReader decodes a chunked body (net/http/httputil's reader).
func newChunkedReader(r io.Reader) io.Reader { return newChunked(r) }

// forward sends the request upstream and streams the response back. It
// reports whether the client connection may be reused.
func (x *fastExchange) forward(complete bool) bool {
	e := x.e
	head := x.upstreamHead()
	var uc *upConn
	var resp *response
	var err error
	for attempt := 0; ; attempt++ {
		var reused bool
		uc, reused, err = e.get()
		if err != nil {
			return x.upstreamFailed(err)
		}
		x.mx.forwarded = time.Now()
		if err = x.send(uc, head, complete); err == nil {
			x.cc.watch.start(x.cc, uc)
			resp, err = x.readResponse(uc)
		}
		if err == nil {
			break
		}
		x.cc.watch.stop()
		uc.c.Close()
		if x.cc.watch.gone.Load() {
			// The watch closed the upstream connection: the client went
			// away before the upstream answered, and nobody is left to
			// answer.
			x.abort("the client went away before the upstream answered")
			return false
		}
		// A pooled connection the upstream closed while idle fails before
		// any response byte: retry once on a fresh one, if the whole
		// request is in hand.
		if !reused || !complete || attempt > 0 || !isConnReset(err) {
			return x.upstreamFailed(err)
		}
	}
	if resp == nil {
		return false
	}
	x.mx.upHeaders = time.Now()
	return x.relay(uc, resp)
}

func isConnReset(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe")
}

// upstreamHead is the request head as the upstream gets it.
func (x *fastExchange) upstreamHead() []byte {
	h := x.req.header.Clone()
	hopByHop(h)
	h.Del("Expect")
	h.Del("Host")
	h.Del("Content-Length") // written once, below, with the length forwarded
	var b bytes.Buffer
	b.Grow(512)
	b.WriteString(x.req.method)
	b.WriteByte(' ')
	b.WriteString(x.req.target)
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.WriteString(x.e.p.up.Host)
	b.WriteString("\r\n")
	writeHeader(&b, h)
	if x.req.contentLength >= 0 {
		b.WriteString("Content-Length: ")
		b.WriteString(strconv.FormatInt(x.req.contentLength, 10))
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// headerNewlineToSpace is net/http's: a value's CR and LF go out as spaces.
var headerNewlineToSpace = strings.NewReplacer("\r", " ", "\n", " ")

// writeHeader writes h in sorted key order, as net/http does.
func writeHeader(b *bytes.Buffer, h http.Header) {
	var arr [32]string // keys on the stack for a usual head
	keys := arr[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			b.WriteString(k)
			b.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = headerNewlineToSpace.Replace(v)
			}
			b.WriteString(v)
			b.WriteString("\r\n")
		}
	}
}

func (x *fastExchange) send(uc *upConn, head []byte, complete bool) error {
	bufs := net.Buffers{head}
	if len(x.body) > 0 {
		bufs = append(bufs, x.body)
	}
	if _, err := bufs.WriteTo(uc.c); err != nil {
		return err
	}
	if complete {
		return nil
	}
	// The rest of a large body streams, teed as it goes.
	remain := x.req.contentLength - int64(len(x.body))
	bp := bufPool32.Get().(*[]byte)
	defer bufPool32.Put(bp)
	for remain > 0 {
		n, err := x.cc.br.Read((*bp)[:min(int64(len(*bp)), remain)])
		if n > 0 {
			x.tap.RequestBody((*bp)[:n])
			x.mx.forwardedBytes(n)
			if _, werr := uc.c.Write((*bp)[:n]); werr != nil {
				return werr
			}
			remain -= int64(n)
		}
		if err != nil && remain > 0 {
			return fmt.Errorf("the client's request body ended early: %w", err)
		}
	}
	x.tap.RequestEnd()
	return nil
}

// response is a parsed response head.
type response struct {
	line          string // the status line as the upstream sent it
	status        int
	header        http.Header
	contentLength int64
	chunked       bool
	untilClose    bool
	close         bool
}

func (x *fastExchange) readResponse(uc *upConn) (*response, error) {
	tp := textproto.NewReader(uc.br)
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return nil, err
		}
		proto, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(proto, "HTTP/1.") {
			return nil, fmt.Errorf("malformed status line %q", clip(line, 60))
		}
		code, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, " ", 2)[0]))
		if err != nil || code < 100 || code > 999 {
			return nil, fmt.Errorf("malformed status line %q", clip(line, 60))
		}
		mh, err := tp.ReadMIMEHeader()
		if err != nil {
			return nil, fmt.Errorf("malformed response header: %w", err)
		}
		h := http.Header(mh)
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			// Interim responses go to the client as they come.
			hopByHop(h)
			var b bytes.Buffer
			b.WriteString("HTTP/1.1 " + rest + "\r\n")
			writeHeader(&b, h)
			b.WriteString("\r\n")
			if _, err := x.cc.c.Write(b.Bytes()); err != nil {
				return nil, err
			}
			continue
		}
		if code == http.StatusSwitchingProtocols {
			return nil, errors.New("the upstream switched protocols, which the proxy does not support")
		}
		r := &response{line: rest, status: code, header: h, contentLength: -1}
		conn := strings.ToLower(strings.Join(h.Values("Connection"), ","))
		r.close = strings.Contains(conn, "close") || proto == "HTTP/1.0" && !strings.Contains(conn, "keep-alive")
		te := h.Values("Transfer-Encoding")
		switch {
		case x.req.method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified:
			r.contentLength = 0
		case len(te) > 0:
			if !strings.EqualFold(strings.TrimSpace(te[len(te)-1]), "chunked") {
				r.untilClose = true
			} else {
				r.chunked = true
			}
		case h.Get("Content-Length") != "":
			n, err := strconv.ParseInt(strings.TrimSpace(h.Get("Content-Length")), 10, 64)
			if err != nil || n < 0 {
				return nil, errors.New("malformed Content-Length in the response")
			}
			r.contentLength = n
		default:
			r.untilClose = true
		}
		return r, nil
	}
}

// relay writes the response head to the client and streams the body,
// reporting every byte the client got to the recorder. It reports whether
// the client connection may carry another request.
func (x *fastExchange) relay(uc *upConn, r *response) bool {
	e := x.e
	h := r.header // this exchange's own, read only here: no copy needed
	hopByHop(h)
	clientChunked := r.chunked && x.req.minor >= 1
	closeClient := r.untilClose || (r.chunked && !clientChunked)
	var b bytes.Buffer
	b.Grow(512)
	b.WriteString("HTTP/1.1 ")
	b.WriteString(r.line)
	b.WriteString("\r\n")
	writeHeader(&b, h)
	if clientChunked {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if closeClient {
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n")
	// A long stream keeps the watch on: closing it cancels the upstream
	// request (on 2026-07-28 closing the stream is cancellation). A body of
	// known length is short enough to finish, or fails on the write.
	if !isSSE(h) && !r.untilClose && r.contentLength >= 0 {
		x.cc.watch.stop()
	}
	x.status = r.status
	if clientChunked {
		// The head is written and h is this exchange's own: it can take
		// the framing the client got, for the record, without a copy.
		h.Set("Transfer-Encoding", "chunked")
	}
	x.tap.Upstream(x.mx.forwarded, x.mx.upHeaders)
	x.tap.Response(r.status, h, false)
	x.mx.wroteHeader(r.status, h, false)
	if r.contentLength == 0 && !r.chunked && !r.untilClose {
		x.finish() // no body: the head is the whole response
	}
	x.wrote = true
	if uc.br.Buffered() > 0 && r.contentLength != 0 {
		// Body bytes are in hand: the head goes out with the first of them,
		// in one write.
		x.pendingHead = b.Bytes()
	} else if _, err := x.cc.c.Write(b.Bytes()); err != nil {
		x.cc.watch.stop()
		uc.c.Close()
		x.abort("writing to the client: " + err.Error())
		return false
	}

	ok, upErr, clientErr := x.copyBody(uc, r, clientChunked)
	x.cc.watch.stop()
	if x.pendingHead != nil && clientErr == nil {
		_, clientErr = x.cc.c.Write(x.pendingHead)
		x.pendingHead = nil
	}
	switch {
	case x.cc.watch.gone.Load():
		uc.c.Close()
		x.abort("the client went away")
		return false
	case clientErr != nil:
		uc.c.Close()
		x.abort("writing to the client: " + clientErr.Error())
		return false
	case upErr != nil:
		uc.c.Close()
		x.abort("reading the upstream response: " + upErr.Error())
		if !x.errTextSet() {
			x.errText = "reading the upstream response: " + upErr.Error()
		}
		return false
	case !ok:
		uc.c.Close()
		return false
	}
	if r.close || r.untilClose || e.closing.Load() {
		uc.c.Close()
	} else {
		e.put(uc)
	}
	return !closeClient
}

func (x *fastExchange) errTextSet() bool { return x.errText != "" }

func isSSE(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= len(protocol.ContentTypeSSE) && strings.EqualFold(ct[:len(protocol.ContentTypeSSE)], protocol.ContentTypeSSE)
}

// watchDelay is how long a request must wait for, or stream, its response
// before the engine watches the client for a disconnect: most responses
// are over sooner, and a watch costs a goroutine and a read.
const watchDelay = 5 * time.Millisecond

// clientWatch watches, once an exchange has lasted watchDelay, for the
// client closing its connection, and then closes the upstream connection,
// which cancels the upstream request and unblocks the engine's read of it.
// A byte from the client (its next request, pipelined) is not a close: the
// watch ends and keeps it buffered.
type clientWatch struct {
	mu      sync.Mutex
	t       *time.Timer
	cc      *clientConn
	uc      *upConn
	running bool
	done    chan struct{}
	gone    atomic.Bool
}

// start arms the watch; stop ends it. A stopped watch may start again (a
// retry on another upstream connection, the connection's next request).
func (w *clientWatch) start(cc *clientConn, uc *upConn) {
	w.mu.Lock()
	w.cc, w.uc, w.running = cc, uc, true
	if w.t == nil {
		w.t = time.AfterFunc(watchDelay, w.fire)
	} else {
		w.t.Reset(watchDelay)
	}
	w.mu.Unlock()
}

func (w *clientWatch) fire() {
	w.mu.Lock()
	if !w.running || w.done != nil {
		w.mu.Unlock()
		return
	}
	done := make(chan struct{})
	w.done = done
	cc, uc := w.cc, w.uc
	// Set here, under mu, so that stop's deadline comes after it.
	_ = cc.c.SetReadDeadline(time.Time{})
	w.mu.Unlock()
	defer close(done)
	_, err := cc.br.Peek(1)
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		w.gone.Store(true)
		uc.c.Close()
	}
}

// stop ends the watch and waits for its read to return, so that the
// client connection is the caller's again.
func (w *clientWatch) stop() {
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		return
	}
	w.running = false
	w.t.Stop()
	d := w.done
	w.done = nil
	if d != nil {
		_ = w.cc.c.SetReadDeadline(time.Unix(1, 0))
	}
	w.mu.Unlock()
	if d != nil {
		<-d
		_ = w.cc.c.SetReadDeadline(time.Time{})
	}
}

// copyBody streams the body from the upstream to the client.
func (x *fastExchange) copyBody(uc *upConn, r *response, clientChunked bool) (complete bool, upErr, clientErr error) {
	bp := bufPool32.Get().(*[]byte)
	defer bufPool32.Put(bp)
	buf := *bp
	var cs chunkScanner
	remain := r.contentLength
	for {
		if remain == 0 && !r.chunked && !r.untilClose {
			return true, nil, nil
		}
		limit := len(buf)
		if !r.chunked && !r.untilClose && remain < int64(limit) {
			limit = int(remain)
		}
		n, err := uc.br.Read(buf[:limit])
		if n > 0 {
			chunk := buf[:n]
			var done bool
			switch {
			case r.chunked:
				used, end, perr := cs.scan(chunk, func(data []byte) {
					if !clientChunked {
						x.writeClient(data, &clientErr)
					}
					x.tap.ResponseBody(data)
					x.mx.wrote(len(data))
				})
				if perr != nil {
					return false, perr, nil
				}
				if used < n {
					// Bytes after the end of the body: the upstream broke
					// the framing; the connection cannot be reused.
					r.close = true
				}
				if done = end; done {
					x.finish()
				}
				if clientChunked {
					x.writeClient(chunk[:used], &clientErr)
				}
			default:
				x.tap.ResponseBody(chunk)
				x.mx.wrote(n)
				remain -= int64(n)
				if done = remain == 0 && !r.untilClose; done {
					x.finish()
				}
				x.writeClient(chunk, &clientErr)
			}
			if clientErr != nil {
				return false, nil, clientErr
			}
			if done {
				return true, nil, nil
			}
		}
		if err != nil {
			if r.untilClose && err == io.EOF {
				return true, nil, nil
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return false, err, nil
		}
	}
}

func (x *fastExchange) writeClient(p []byte, errp *error) {
	if *errp != nil || len(p) == 0 {
		return
	}
	if h := x.pendingHead; h != nil {
		x.pendingHead = nil
		bufs := net.Buffers{h, p}
		if _, err := bufs.WriteTo(x.cc.c); err != nil {
			*errp = err
		}
		return
	}
	if _, err := x.cc.c.Write(p); err != nil {
		*errp = err
	}
}

func (x *fastExchange) abort(reason string) {
	x.aborted = true
	if x.errText == "" {
		x.errText = reason
	}
}

// upstreamFailed answers a request the upstream did not answer: 502 (504
// on a timeout) with a JSON-RPC error carrying the request's id, as the
// net/http path does; or, once headers went out, an abort.
func (x *fastExchange) upstreamFailed(err error) bool {
	if x.wrote {
		x.abort("reading the upstream response: " + err.Error())
		return false
	}
	p := x.e.p
	status := http.StatusBadGateway
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	msg := fmt.Sprintf("mcptape: upstream %s did not answer: %v", p.up.Redacted(), cleanErr(err))
	p.log.Warn("upstream error", capture.LogKeyUpstream, p.up.Redacted(), capture.LogKeyError, err)
	body := ErrorBody(requestID(x.body), CodeUpstream, msg, map[string]any{"upstream": p.up.Redacted(), "status": status})
	h := http.Header{"Content-Type": {protocol.ContentTypeJSON}, "Cache-Control": {"no-store"},
		"Content-Length": {strconv.Itoa(len(body))}}
	x.errText = msg
	x.tap.Response(status, h, true)
	x.mx.wroteHeader(status, h, true)
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	writeHeader(&b, h)
	b.WriteString("\r\n")
	b.Write(body)
	x.tap.ResponseBody(body)
	x.mx.wrote(len(body))
	x.finish()
	_, _ = x.cc.c.Write(b.Bytes())
	return !x.req.close
}

func (x *fastExchange) refuse() {
	p := x.e.p
	tap := p.begin(x.hr, []byte{}, true, true)
	x.mx.begin(p.m, x.hr, []byte{}, true, time.Time{})
	defer x.mx.end()
	msg := fmt.Sprintf("mcptape: refused: Host %q is not a loopback name, but the request arrived on a loopback address (DNS rebinding protection; run with --allow-any-host to turn it off)\n", x.hr.Host)
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Content-Length": {strconv.Itoa(len(msg))}}
	tap.Response(http.StatusForbidden, h, true)
	x.mx.wroteHeader(http.StatusForbidden, h, true)
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 403 Forbidden\r\nConnection: close\r\n")
	writeHeader(&b, h)
	b.WriteString("\r\n")
	b.WriteString(msg)
	_, _ = x.cc.c.Write(b.Bytes())
	tap.ResponseBody([]byte(msg))
	tap.End("", false)
}

// writeSimple answers with a plain-text error and no recording.
func writeSimple(c net.Conn, status int, msg string) {
	msg += "\n"
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(msg), msg)
}

// hostAllowedConn is hostAllowed for the engine: a request that arrives on
// a loopback address must name a loopback host.
func hostAllowedConn(local net.Addr, host string) bool {
	ta, ok := local.(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// get returns an idle upstream connection, or dials one.
func (e *engine) get() (*upConn, bool, error) {
	for {
		select {
		case uc := <-e.idle:
			return uc, true, nil
		default:
		}
		break
	}
	c, err := e.dialer.Dial("tcp", e.addr)
	if err != nil {
		return nil, false, err
	}
	if e.tls != nil {
		tc := tls.Client(c, e.tls)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.Close()
			return nil, false, err
		}
		c = tc
	}
	return &upConn{c: c, br: bufio.NewReaderSize(c, 32<<10)}, false, nil
}

func (e *engine) put(uc *upConn) {
	if uc.br.Buffered() > 0 {
		uc.c.Close()
		return
	}
	select {
	case e.idle <- uc:
	default:
		uc.c.Close()
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
