package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/mcptape/mcptape/capture"
)

// ForwardOptions configures the forward-proxy leg (see the package
// documentation).
type ForwardOptions struct {
	// MITM are the hosts whose CONNECT tunnels are intercepted and
	// recorded, as globs on the host name without its port (path.Match
	// syntax, case-insensitive: "*.example.com", "127.0.0.1"). A CONNECT to
	// any other host is tunnelled unrecorded. Nil intercepts nothing.
	MITM []string
	// Certificate returns the certificate the proxy shows a client for an
	// intercepted host (a leaf signed by a CA the client trusts). Required
	// with MITM.
	Certificate func(host string) (*tls.Certificate, error)
	// MaxTunnelsPerClient bounds the CONNECT tunnels one client (by IP
	// address) holds open at a time; past it a CONNECT is answered 429.
	// Zero means DefaultMaxTunnelsPerClient; negative means no bound.
	MaxTunnelsPerClient int
}

// forwardLeg is the forward proxy: plain-HTTP requests in absolute form
// and CONNECT tunnels. goproxy handles CONNECT (the decision, the
// tunnels, the hijack); every HTTP request — plain, or read from an
// intercepted tunnel — is served by the proxy's own handler, on net/http's
// server, so that one set of rules (bounds, refusals, Host rules, error
// synthesis, abort handling, the tee) serves every leg. goproxy's own MITM
// loop is not used: it reads requests with its own parser, unbounded, and
// writes responses outside those rules.
type forwardLeg struct {
	p    *Proxy
	gp   *goproxy.ProxyHttpServer
	mitm []string
	cert func(host string) (*tls.Certificate, error)
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	self *selfGuard // the proxy's own addresses, tunnels per client (forward_guard.go)

	// srv serves the intercepted tunnels' connections, handed to it
	// through ln; started at the first one.
	srvOnce sync.Once
	srv     *http.Server
	ln      *connListener
	tunnels sync.Map // *tls.Conn → *tunnel, while the connection lives

	// open are the connections of unrecorded tunnels to their hosts,
	// closed at shutdown (net/http's Shutdown does not see hijacked
	// connections).
	mu     sync.Mutex
	open   map[*tunnelConn]struct{}
	closed bool
}

// tunnel is an intercepted CONNECT: the route its requests take.
type tunnel struct {
	rt      *route
	host    string // the CONNECT's host, lower case, without a default port
	defPort string // the scheme's default port: 443 in TLS, 80 for plain HTTP
}

type tunnelKey struct{}

// tunnelOf is the intercepted tunnel a request came through, or nil.
func tunnelOf(r *http.Request) *tunnel {
	t, _ := r.Context().Value(tunnelKey{}).(*tunnel)
	return t
}

// hostMatches reports whether a request read from the tunnel names the
// tunnel's host: a client cannot open a tunnel to one host and address
// another through it.
func (t *tunnel) hostMatches(r *http.Request) bool {
	return hostKey(r.Host, t.defPort) == t.host
}

// hostKey is host:port in lower case, without the scheme's default port.
func hostKey(hostport, defPort string) string {
	h, port, err := net.SplitHostPort(hostport)
	if err != nil {
		h, port = hostport, ""
	}
	h = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	if port == "" || port == defPort {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return net.JoinHostPort(h, port)
}

func newForwardLeg(p *Proxy, o *ForwardOptions, tr http.RoundTripper) (*forwardLeg, error) {
	f := &forwardLeg{p: p, cert: o.Certificate, open: map[*tunnelConn]struct{}{}, ln: newConnListener(),
		self: newSelfGuard(o.MaxTunnelsPerClient)}
	for _, g := range o.MITM {
		g = strings.ToLower(strings.TrimSpace(g))
		if _, err := path.Match(g, "x"); err != nil || g == "" {
			return nil, fmt.Errorf("proxy: --mitm %q is not a host glob like *.example.com", g)
		}
		f.mitm = append(f.mitm, g)
	}
	if len(f.mitm) > 0 && f.cert == nil {
		return nil, errors.New("proxy: intercepting tunnels needs a CA to sign certificates with")
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	f.dial = d.DialContext
	if t, ok := tr.(*http.Transport); ok && t.DialContext != nil {
		f.dial = t.DialContext
	}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = slogPrintf{p.log}
	// Never the environment's proxy (HTTPS_PROXY set for a client in the
	// same shell would send tunnels back here), never goproxy's CA.
	gp.Tr = &http.Transport{Proxy: nil, DialContext: f.dial}
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = f.dialTunnel
	gp.NonproxyHandler = http.NotFoundHandler()
	gp.OnRequest().HandleConnectFunc(f.decide)
	f.gp = gp
	f.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: DefaultHeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if t, ok := f.tunnels.Load(c); ok {
				return context.WithValue(ctx, tunnelKey{}, t)
			}
			return ctx
		},
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				f.tunnels.Delete(c)
			}
		},
	}
	return f, nil
}

// configure takes the listener's address (which a tunnel must not reach)
// and its bounds for the intercepted tunnels' server, before it starts.
func (f *forwardLeg) configure(own net.Addr, headerTimeout, idle time.Duration, maxHeader int, logger *slog.Logger) {
	f.self.addOwn(own.String())
	f.srv.ReadHeaderTimeout, f.srv.IdleTimeout, f.srv.MaxHeaderBytes = headerTimeout, idle, maxHeader
	if logger != nil {
		f.srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	}
}

// intercepts reports whether a CONNECT to host is intercepted.
func (f *forwardLeg) intercepts(host string) bool {
	h := strings.ToLower(host)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	for _, g := range f.mitm {
		if ok, _ := path.Match(g, h); ok {
			return true
		}
	}
	return false
}

// decide is goproxy's CONNECT handler: every tunnel is taken over, and
// what the client sends first decides what it is (see hijack).
func (f *forwardLeg) decide(host string, _ *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: f.hijack}, host
}

// peekWait bounds the wait for a tunnel's first bytes: TLS and HTTP
// clients speak first at once; a protocol whose server speaks first gets
// its tunnel after this.
const peekWait = time.Second

// hijack takes over a CONNECT. Its host is dialled first unless --mitm
// names it (so an unreachable host gets 502, as a plain tunnel would), then
// the client's first bytes say what the tunnel carries:
//   - plain HTTP (Node's fetch tunnels http:// URLs through CONNECT too):
//     served and recorded on the forward leg, like a plain request;
//   - TLS to a host --mitm names: intercepted with mcptape's CA;
//   - anything else (TLS to another host, another protocol): tunnelled as
//     bytes, unrecorded.
func (f *forwardLeg) hijack(req *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
	if slot, _ := req.Context().Value(slotKey{}).(*tunnelSlot); slot != nil {
		// The tunnel's slot is given back when its connection closes.
		client, slot.taken = &slotConn{Conn: client, slot: slot}, true
	}
	host := req.URL.Host
	mitm := f.intercepts(host)
	var up net.Conn
	if !mitm {
		var err error
		if up, err = f.dialTunnel(req, "tcp", host); err != nil {
			f.p.log.Debug("a CONNECT's host is unreachable", "host", host, "error", err)
			status := "502 Bad Gateway"
			if errors.Is(err, errDialledSelf) {
				status = "508 Loop Detected"
			}
			_, _ = io.WriteString(client, "HTTP/1.1 "+status+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			client.Close()
			return
		}
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	br := bufio.NewReader(client)
	_ = client.SetReadDeadline(time.Now().Add(peekWait))
	first, _ := br.Peek(1)
	plain := false
	if len(first) == 1 && first[0] >= 'A' && first[0] <= 'Z' {
		head, _ := br.Peek(8)
		plain = looksLikeHTTP(head)
	}
	_ = client.SetReadDeadline(time.Time{})
	conn := &peekedConn{Conn: client, r: br}
	switch {
	case plain:
		if up != nil {
			up.Close()
		}
		key := hostKey(host, "80")
		f.serve(conn, &tunnel{host: key, defPort: "80", rt: newRoute("", capture.LegForward, &url.URL{Scheme: "http", Host: key})})
	case mitm && len(first) == 1 && first[0] == 0x16: // a TLS handshake record
		f.intercept(host, conn)
	case mitm:
		f.p.log.Debug("a tunnel to a --mitm host carries neither TLS nor HTTP: closed", "host", host)
		conn.Close()
	default:
		f.p.log.Debug("tunnelling a CONNECT unrecorded (not matched by --mitm)", "host", host)
		splice(br, client, up)
	}
}

// looksLikeHTTP reports whether a tunnel's first bytes start an HTTP/1
// request line: a method net/http knows, then a space.
func looksLikeHTTP(b []byte) bool {
	for _, m := range []string{"GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "OPTIONS ", "PATCH ", "TRACE "} {
		if strings.HasPrefix(string(b), m) {
			return true
		}
	}
	return false
}

// peekedConn is a connection whose first bytes were peeked: reads come
// from r until what it holds is read, then from the connection itself (the
// TLS or HTTP server reading it has a buffer of its own).
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

// CloseWrite half-closes the connection when it can, and closes it
// otherwise.
func (c *peekedConn) CloseWrite() error { return closeWrite(c.Conn) }

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}

// splice copies bytes both ways between a tunnel's client (read through
// fromClient, which holds what was peeked) and its host until both
// directions end, passing each end on as a half-close.
//
// It copies through pooled buffers, never with splice(2): the runtime
// keeps the pipes splice(2) borrows in a pool that only a garbage
// collection empties, so a burst of tunnels would leave the process
// holding thousands of pipe descriptors long after the tunnels ended.
func splice(fromClient io.Reader, client, up net.Conn) {
	var wg sync.WaitGroup
	half := func(dst net.Conn, src io.Reader) {
		buf := tunnelBufs.Get().(*[]byte)
		_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buf)
		tunnelBufs.Put(buf)
		_ = closeWrite(dst)
	}
	wg.Go(func() { half(up, fromClient) })
	wg.Go(func() { half(client, up) })
	wg.Wait()
	client.Close()
	up.Close()
}

// tunnelBufs are the copy buffers of unrecorded tunnels: two per tunnel
// while it lives.
var tunnelBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// connect answers a CONNECT request.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	switch f := p.forward; {
	case f == nil:
		p.refuseAs(w, r, nil, nil, false, http.StatusMethodNotAllowed,
			"mcptape: CONNECT: this recorder is a reverse proxy; start it with --forward to use it as an HTTP(S) proxy", true)
	case p.draining():
		p.refuseAs(w, r, nil, nil, false, http.StatusServiceUnavailable,
			"mcptape: the recorder is shutting down; connect again once it runs", true)
	case tunnelOf(r) != nil:
		p.refuseAs(w, r, nil, nil, false, http.StatusBadRequest, msgNestedTunnel, true)
	case f.self.fromOwnTunnel(r) || f.self.targets(r.Context(), localAddr(r), r.URL.Host, ""):
		p.refuseAs(w, r, nil, nil, false, http.StatusLoopDetected, msgSelfTunnel, true)
	default:
		slot, n, ok := f.self.admit(r.RemoteAddr)
		if !ok {
			p.refuseAs(w, r, nil, nil, false, http.StatusTooManyRequests, tooManyTunnels(n), true)
			return
		}
		// The hijack takes the slot with the connection; a CONNECT that
		// never got that far gives it back here.
		defer func() {
			if !slot.taken {
				slot.done()
			}
		}()
		f.gp.ServeHTTP(keepBuffered{w}, r.WithContext(context.WithValue(r.Context(), slotKey{}, slot)))
	}
}

type slotKey struct{}

// keepBuffered hands goproxy the hijacked connection with what the server
// read past the CONNECT's head (a client may send its first bytes, a TLS
// hello, with it), which goproxy's hijack would drop.
type keepBuffered struct{ http.ResponseWriter }

func (k keepBuffered) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(k.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if rw.Reader.Buffered() > 0 {
		c = &peekedConn{Conn: c, r: rw.Reader}
	}
	return c, rw, nil
}

// localAddr is the address of the listener r arrived on, or nil.
func localAddr(r *http.Request) net.Addr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return a
}

// intercept serves a tunnel to a host --mitm names as a TLS server with a
// certificate for the host, to the server that reads its requests.
func (f *forwardLeg) intercept(host string, client net.Conn) {
	key := hostKey(host, "443")
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		// The certificate names the host of the CONNECT, whatever name the
		// client's hello says: that is the host the requests go to.
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return f.cert(host) },
	}
	f.serve(tls.Server(client, cfg), &tunnel{host: key, defPort: "443", rt: newRoute("", capture.LegMITM, &url.URL{Scheme: "https", Host: key})})
}

// serve hands a tunnel's connection to the server that reads its requests.
func (f *forwardLeg) serve(c net.Conn, t *tunnel) {
	f.tunnels.Store(c, t)
	f.srvOnce.Do(func() { go func() { _ = f.srv.Serve(f.ln) }() })
	if !f.ln.push(c) {
		f.tunnels.Delete(c)
		c.Close()
	}
}

// refusal is a forward request the proxy answers itself.
type refusal struct {
	status int
	msg    string
}

// route is the route of a request in absolute form: to the host it
// names, recorded on the forward leg.
func (f *forwardLeg) route(r *http.Request) (*route, *refusal) {
	u := r.URL
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, &refusal{http.StatusBadRequest, fmt.Sprintf("mcptape: the forward proxy takes http:// and https:// URLs, not %q", u.Scheme+"://")}
	}
	if f.self.targets(r.Context(), localAddr(r), u.Host, map[string]string{"http": "80", "https": "443"}[u.Scheme]) {
		return nil, &refusal{http.StatusLoopDetected, "mcptape: refused: the request names the proxy itself, which would loop; use a route's path, or the server's own URL"}
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	return newRoute("", capture.LegForward, &url.URL{Scheme: u.Scheme, Host: hostKey(u.Host, def)}), nil
}

// dialTunnel dials a tunnel's host, keeping the connection so that a
// shutdown can close it.
func (f *forwardLeg) dialTunnel(req *http.Request, network, addr string) (net.Conn, error) {
	ctx := context.Background()
	if req != nil {
		ctx = req.Context()
	}
	c, err := f.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if f.self.dialled(c) {
		c.Close()
		return nil, errDialledSelf
	}
	tcp, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	tc := &tunnelConn{TCPConn: tcp, f: f, forget: f.self.dialledOut(tcp)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		tc.forget()
		tcp.Close()
		return nil, errors.New("the recorder is shutting down")
	}
	f.open[tc] = struct{}{}
	return tc, nil
}

// errDialledSelf is a tunnel whose host turned out to be the proxy itself.
var errDialledSelf = errors.New("the tunnel's host is the proxy itself")

// tunnelConn is an unrecorded tunnel's connection to its host.
type tunnelConn struct {
	*net.TCPConn
	f      *forwardLeg
	forget func() // forgets its local end (selfGuard.dialledOut)
	once   sync.Once
}

func (c *tunnelConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.open, c)
		c.f.mu.Unlock()
		c.forget()
	})
	return c.TCPConn.Close()
}

// shutdown stops the intercepted tunnels' server within ctx (their calls
// in flight were drained with the proxy's) and closes the unrecorded
// tunnels.
func (f *forwardLeg) shutdown(ctx context.Context) {
	f.mu.Lock()
	f.closed = true
	open := make([]*tunnelConn, 0, len(f.open))
	for c := range f.open {
		open = append(open, c)
	}
	f.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
	if err := f.srv.Shutdown(ctx); err != nil {
		_ = f.srv.Close()
	}
	f.ln.Close()
}

// connListener hands connections to an http.Server.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// push hands c to the server; false when the listener is closed.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// slogPrintf takes goproxy's log lines at debug level.
type slogPrintf struct{ l *slog.Logger }

func (s slogPrintf) Printf(format string, v ...any) {
	s.l.Debug("goproxy: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}
