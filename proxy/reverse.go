package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Options configures a reverse proxy. Nil means defaults; every field's
// zero value is documented.
type Options struct {
	// Upstream is the server's URL. Its scheme and host are where requests
	// go; the request path is kept as the client sent it, so a client uses
	// the proxy's address with the server's path. Either Upstream, or
	// Routes and Forward (either or both, or neither when routes are added
	// later with [Proxy.AddRoute]).
	Upstream *url.URL
	// Routes are upstreams each reached under /NAME/ on the proxy (see
	// [Route]); more can be added while the proxy runs.
	Routes []Route
	// Forward, when set, makes the proxy a forward proxy as well: requests
	// in absolute form (http://host/path) and CONNECT tunnels (see
	// [ForwardOptions]). Origin-form requests still go to the routes.
	Forward *ForwardOptions
	// Transport carries requests upstream. Nil means [DefaultTransport]: no
	// environment proxy, no transparent compression (bytes pass
	// unchanged), generous idle connections, a bounded response head,
	// HTTP/2 to https upstreams; plain-HTTP upstreams then get the proxy's
	// own HTTP/1.1 client, with the same settings and net/http's wire
	// format, which writes and reads each request on one goroutine.
	Transport http.RoundTripper
	// TLSConfig, when Transport is nil, is used for https upstreams (a
	// custom CA, say). Nil means the system roots.
	TLSConfig *tls.Config
	// Recorder receives every exchange. Nil records nothing.
	Recorder *capture.Recorder
	// Logger receives the proxy's own events. Nil discards them.
	Logger *slog.Logger
	// MaxBufferedBody is how much of a request body the proxy reads before
	// forwarding (MCP requests are small; reading them first lets the
	// proxy answer an unreachable upstream with the request's own id, and
	// retry a request on a fresh connection when a pooled one turns out
	// closed). The rest of a larger body streams. Zero means 1 MiB.
	MaxBufferedBody int64
	// MaxRequestBody bounds a request body. A request that declares a
	// larger Content-Length is answered 413 before a byte of its body is
	// read; a chunked one that grows past it is cut, its upstream request
	// cancelled and the client answered 413. Zero means 64 MiB; negative
	// means no limit.
	MaxRequestBody int64
	// BodyIdleTimeout is how long the proxy waits for the next byte of a
	// request body. A client silent for longer is answered 408 and its
	// exchange recorded as cut. It bounds silence, not the whole upload: a
	// slow client that keeps sending is never cut. Zero means 30s;
	// negative means no limit.
	BodyIdleTimeout time.Duration
	// UpstreamTimeout bounds the wait for the upstream's response head,
	// counted from when the whole request has been sent: an upstream
	// silent for longer is cancelled and the client gets a 504 carrying a
	// JSON-RPC error with the request's id. A tool call may run for
	// minutes before its first byte (a stateless server answers with one
	// JSON body at the end), hence the generous default. The body of a
	// response is never timed: an SSE stream may stay idle as long as the
	// server likes, since MCP streams legitimately wait for notifications.
	// Zero means 5 minutes; negative means no limit.
	UpstreamTimeout time.Duration
	// AllowAnyHost turns off the DNS-rebinding check: by default, a
	// request that arrives on a loopback address must name a loopback
	// host (localhost, 127.0.0.1, [::1]), as go-sdk's servers require.
	AllowAnyHost bool
	// Registerer receives the proxy's Prometheus metrics (see the package
	// documentation). Nil means no metrics, at no cost. One proxy per
	// Registerer.
	Registerer prometheus.Registerer
	// Intercept holds the messages its rules match until a person decides
	// what goes on (see intercept.go). Nil holds nothing, at no cost.
	Intercept *capture.Interceptor
	// Answer has the proxy answer the server's sampling, elicitation and
	// roots requests in the client's place (see ClientAnswers). Nil leaves
	// them to the client.
	Answer *ClientAnswers
}

// Defaults of the Options fields whose zero value means one.
const (
	DefaultMaxBufferedBody = 1 << 20
	DefaultMaxRequestBody  = 64 << 20
	DefaultBodyIdleTimeout = 30 * time.Second
	DefaultUpstreamTimeout = 5 * time.Minute
	// MaxResponseHeaderBytes bounds the upstream's response head in
	// DefaultTransport, as the server bounds a client's request head.
	MaxResponseHeaderBytes = 1 << 20
)

// Proxy is a transparent reverse proxy for MCP over Streamable HTTP. It is an
// http.Handler; see the package documentation for what it guarantees.
type Proxy struct {
	single    *route // Options.Upstream; nil when the proxy serves routes
	routes    routeTable
	forward   *forwardLeg // nil without Options.Forward
	up        *upstream
	rec       *capture.Recorder
	log       *slog.Logger
	maxBuf    int64
	maxReq    int64 // <= 0: no limit
	bodyIdle  time.Duration
	upTimeout time.Duration
	checkHost bool
	m         *metrics // nil without a Registerer
	icpt      *capture.Interceptor
	ans       *ClientAnswers

	// live holds the exchanges in flight, so that a shutdown can cut them
	// with ErrShutdown as their cause.
	liveMu   sync.Mutex
	live     map[*exchange]struct{}
	stopping bool
}

// DefaultTransport returns the transport New uses when Options.Transport is nil.
func DefaultTransport(tlsConfig *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig:        tlsConfig,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		DisableCompression:     true,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
}

// New returns a proxy to opts.Upstream.
func New(opts *Options) (*Proxy, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.Upstream == nil && opts.Routes == nil && opts.Forward == nil {
		return nil, errors.New("proxy: no upstream URL")
	}
	if opts.Upstream != nil && len(opts.Routes) > 0 {
		return nil, errors.New("proxy: an upstream or routes, not both (the single upstream is the one-route form)")
	}
	p := &Proxy{rec: opts.Recorder, log: opts.Logger, checkHost: !opts.AllowAnyHost,
		maxBuf: orDefault(opts.MaxBufferedBody, DefaultMaxBufferedBody), maxReq: orDefault(opts.MaxRequestBody, DefaultMaxRequestBody),
		bodyIdle: orDefault(opts.BodyIdleTimeout, DefaultBodyIdleTimeout), upTimeout: orDefault(opts.UpstreamTimeout, DefaultUpstreamTimeout),
		live: map[*exchange]struct{}{}, icpt: opts.Intercept, ans: opts.Answer}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.maxReq > 0 && p.maxBuf > p.maxReq {
		p.maxBuf = p.maxReq
	}
	if opts.Upstream != nil {
		if err := checkUpstream(opts.Upstream); err != nil {
			return nil, err
		}
		p.single = newRoute("", capture.LegReverse, opts.Upstream)
	}
	for _, r := range opts.Routes {
		if added, err := p.routes.add(r); err != nil {
			return nil, err
		} else if !added {
			return nil, fmt.Errorf("proxy: route %q is given twice", r.Name)
		}
	}
	tr := opts.Transport
	up := tr
	if tr == nil {
		dt := DefaultTransport(opts.TLSConfig)
		tr, up = dt, dt
		if h1Supported {
			// Plain-HTTP upstreams over the proxy's own HTTP/1.1 client
			// (h1.go), the rest over this transport.
			up = newH1Transport(dt)
		}
	}
	if opts.Forward != nil {
		var err error
		if p.forward, err = newForwardLeg(p, opts.Forward, tr); err != nil {
			return nil, err
		}
	}
	if opts.Registerer != nil {
		var err error
		if p.m, err = newMetrics(opts.Registerer, opts.Upstream == nil || opts.Forward != nil); err != nil {
			return nil, err
		}
	}
	// Responses of known length are not flushed as they are written
	// (relay.go): their last bytes leave after the handler returned, that
	// is after the exchange was reported ended, so a client that has read
	// a whole JSON response finds it recorded.
	p.up = newUpstream(up, tr, p.upTimeout)
	return p, nil
}

// orDefault is v, or def when v is zero; a negative v means no limit (0).
func orDefault[T int64 | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Upstream is the single upstream's URL; nil for a proxy of routes.
func (p *Proxy) Upstream() *url.URL {
	if p.single == nil {
		return nil
	}
	return p.single.up
}

type ctxKey struct{}

// exchangeCtx is the outbound request's context: the exchange's, with the
// exchange under ctxKey (context.WithValue's, allocated with the exchange).
type exchangeCtx struct {
	context.Context
	x *exchange
}

func (c *exchangeCtx) Value(key any) any {
	if _, ok := key.(ctxKey); ok {
		return c.x
	}
	return c.Context.Value(key)
}

// exchange is the per-request state shared by the handler, the body
// wrappers, the upstream transport and the relay (relay.go).
type exchange struct {
	rt        *route
	upPath    string // the upstream's path (and raw path, when escaped) for the request
	upRaw     string
	tap       *capture.Tap
	w         *teeWriter
	body      []byte          // the buffered request body
	complete  bool            // body is the whole request body
	stream    bool            // a stream the server keeps open at will (GET, subscriptions/listen), cut first at shutdown
	ctx       context.Context // the exchange's own: the client's, plus the proxy's cancellation
	client    context.Context // the client's request context
	ctxCancel context.CancelCauseFunc
	cw        connWatch // cuts the upstream connection at x.cancel
	in        *clientBody
	mu        sync.Mutex
	upErr     error // a non-EOF error reading the upstream body
	mx        exchangeMetrics
	inbound             // the request as received, for the hold points (intercept.go)
	front     frontMap  // the upstream and the proxy as the client addressed it (oauth.go)
	orig      *original // set when the response was rewritten (oauth.go)

	// Parts of the exchange's path that live exactly as long as it does,
	// allocated with it rather than one by one.
	inBody  clientBody   // what in points to
	tw      teeWriter    // what x.w points to
	ir      interimRelay // the relay's, for the interim responses
	outURL  url.URL      // the outbound request's URL
	outBody bytes.Reader // the outbound request's body, when held whole
	outCtx  exchangeCtx  // the outbound request's context
	upBody  upstreamBody // the upstream's response body, as takeBody wraps it
}

func (x *exchange) setUpErr(err error) {
	x.mu.Lock()
	if x.upErr == nil {
		x.upErr = err
	}
	x.mu.Unlock()
}

func (x *exchange) getUpErr() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.upErr
}

// ErrShutdown is the cause of an exchange cut because its server shut
// down (see [Server.Shutdown]); the record says so.
var ErrShutdown = errors.New("cut by shutdown: the recorder stopped before the response ended")

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var arrived time.Time
	if p.m != nil {
		arrived = time.Now()
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if r.RequestURI == "*" {
		// An asterisk-form target (OPTIONS *, or an HTTP/2 preface) asks
		// about this server, not a resource upstream.
		p.refuse(w, r, nil, nil, false, http.StatusBadRequest, "mcptape: asterisk-form targets (*) are not forwarded")
		return
	}
	t, ok := p.target(w, r)
	if !ok {
		return
	}
	if p.maxReq > 0 && r.ContentLength > p.maxReq {
		p.refuse(w, r, t.rt, nil, false, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"mcptape: the request body (%d bytes) is larger than the proxy forwards (%d bytes); raise --max-request-body to allow it", r.ContentLength, p.maxReq))
		return
	}
	x := new(exchange) // (here, so that the body is allocated with it)
	x.inBody = clientBody{rc: r.Body, ctl: *http.NewResponseController(w), idle: p.bodyIdle, max: p.maxReq, declared: r.ContentLength}
	in := &x.inBody
	defer in.handlerDone()
	body, complete, err := readPrefix(in, r.ContentLength, p.maxBuf)
	if err != nil {
		p.bodyFailed(w, r, t.rt, body, err)
		return
	}
	if p.draining() && opensCall(r, body, complete) {
		p.refuse(w, r, t.rt, body, complete, http.StatusServiceUnavailable,
			"mcptape: the recorder is shutting down; send this request again once it runs")
		return
	}
	recv := body
	var tap *capture.Tap
	if complete && p.holdsRequests() {
		held := p.holdRequest(w, r, t, body)
		if held.done {
			return
		}
		body = held.fwd
		tap = p.beginHeld(r, t, recv, held.note, held.header)
	} else {
		tap = p.beginTarget(r, t, body, complete)
	}
	ctx := x.context(w, r)
	defer x.cancel(nil)
	// The standalone GET stream and a 2026-07-28 subscriptions/listen
	// stream (which always carries its Mcp-Method header) stay open at the
	// server's will and carry no call: a shutdown cuts them first.
	stream := r.Method == http.MethodGet || r.Header.Get(protocol.HeaderMethod) == protocol.MethodSubscriptionsListen
	x.rt, x.upPath, x.upRaw, x.tap, x.body, x.complete, x.stream = t.rt, t.path, t.rawPath, tap, body, complete, stream
	x.ctx, x.client, x.in, x.inbound = ctx, r.Context(), in, inboundOf(r, t, recv)
	if t.rt.leg == capture.LegReverse {
		// Only a reverse route changes what passes (OAuth, the legacy
		// endpoint): forward legs use the server's own URLs.
		x.front.up, x.front.prefix = t.rt.up, t.rt.prefix
		x.front.scheme, x.front.host = frontOf(r)
	}
	if !p.track(x) && x.stream {
		x.cancel(ErrShutdown) // it arrived as the drain began
	}
	defer p.untrack(x)
	x.mx.beginLater(p.m, t.rt, r, body, complete, arrived)
	x.tw = teeWriter{ResponseWriter: w, x: x}
	x.w = &x.tw
	x.outCtx = exchangeCtx{Context: ctx, x: x}
	out := r.WithContext(&x.outCtx)
	switch {
	case complete && len(body) == 0:
		out.Body, out.ContentLength = http.NoBody, 0
	case complete:
		// The whole body is in hand: forward it with its exact length, so
		// the transport never reads the inbound body again (that extra
		// read races the server closing it, and cuts streamed responses).
		x.outBody.Reset(body)
		out.Body, out.ContentLength = io.NopCloser(&x.outBody), int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	default:
		out.Body = &forwardBody{prefix: body, rest: in, remain: r.ContentLength - int64(len(body)), tap: tap, mx: &x.mx}
	}
	// Request trailers are dropped: the reference proxy cannot forward them
	// either (it clones them before the body is read), and no MCP client
	// sends any.
	out.Trailer = nil
	defer func() {
		x.w.settle()
		x.mx.end()
		v := recover()
		if v == nil {
			tap.End(x.w.endText(), x.w.aborted)
			if x.w.aborted && !x.w.wroteHeader {
				// Nothing was answered: net/http would send an empty 200
				// that nobody sent. The connection is closed instead.
				panic(http.ErrAbortHandler)
			}
			return
		}
		tap.End(x.abortReason(), true)
		panic(v)
	}()
	p.relay(x, r, out)
}

// context makes the exchange's context: a child of the request's,
// cancelled with the request's and by the proxy (x.cancel, at shutdown).
// Under the proxy's own engine it is not registered with the request's
// context (the engine cancels it when it cancels the request's), and its
// upstream connection is cut by x.cancel itself rather than by a
// context.AfterFunc (see connWatch): a request's contexts then need no list
// of children.
func (x *exchange) context(w http.ResponseWriter, r *http.Request) context.Context {
	if e, ok := w.(*eresp); ok && e.owns(r) {
		ctx, cancel := context.WithCancelCause(e.c.ctx)
		x.ctxCancel, x.cw.on = cancel, true
		e.join(x)
		return ctx
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	x.ctxCancel = cancel
	return ctx
}

// cancel cancels the exchange's context for cause, and cuts the upstream
// connection its request is on.
func (x *exchange) cancel(cause error) {
	x.ctxCancel(cause)
	x.cw.cancelled()
}

// connWatch cuts the upstream connection of an exchange's request when the
// exchange is cancelled, in place of a context.AfterFunc on its context,
// while the exchange's cancel is the only way that context ends (on: under
// the proxy's own engine). It watches one connection at a time: an
// exchange's own requests of the proxy (answers, which outlive it) and a
// second request while one is watched use AfterFunc.
type connWatch struct {
	on   bool
	mu   sync.Mutex
	c    *h1Conn
	done bool // the exchange was cancelled
}

// watch has c cut when the exchange is cancelled (at once, when it was);
// false when the watch is not for c (then the caller uses AfterFunc).
func (w *connWatch) watch(c *h1Conn) bool {
	if w == nil || !w.on {
		return false
	}
	w.mu.Lock()
	if w.c != nil {
		w.mu.Unlock()
		return false
	}
	done := w.done
	if !done {
		w.c = c
	}
	w.mu.Unlock()
	if done {
		c.cut()
	}
	return true
}

// release ends the watch of c: true when c was not cut and now will not
// be (AfterFunc's stop).
func (w *connWatch) release(c *h1Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c == c {
		w.c = nil
	}
	return !w.done
}

// cancelled cuts the watched connection, and any watched from now on.
func (w *connWatch) cancelled() {
	w.mu.Lock()
	w.done = true
	c := w.c
	w.c = nil
	w.mu.Unlock()
	if c != nil {
		c.cut()
	}
}

// target is where a request goes: its route and the upstream's path.
type target struct {
	rt            *route
	path, rawPath string
}

// target resolves a request to its route, applying the route's Host
// rules (the one place they live, for every leg): on a reverse route, the
// DNS-rebinding guard; in an intercepted tunnel, the Host must name the
// tunnel's host; a forward request must not name the proxy itself. When
// ok is false the request has been answered.
func (p *Proxy) target(w http.ResponseWriter, r *http.Request) (t target, ok bool) {
	if tn := tunnelOf(r); tn != nil {
		if !tn.hostMatches(r) {
			p.refuseAs(w, r, tn.rt, nil, false, http.StatusMisdirectedRequest, fmt.Sprintf(
				"mcptape: refused: the request names host %q inside a tunnel to %s; send it through a tunnel to its own host", r.Host, tn.rt.up.Host), true)
			return t, false
		}
		return target{rt: tn.rt, path: r.URL.Path, rawPath: r.URL.RawPath}, true
	}
	if r.URL.IsAbs() && p.forward != nil {
		rt, err := p.forward.route(r)
		if err != nil {
			p.refuseAs(w, r, nil, nil, false, err.status, err.msg, true)
			return t, false
		}
		return target{rt: rt, path: r.URL.Path, rawPath: r.URL.RawPath}, true
	}
	if p.checkHost && !protocol.HostAllowed(r) {
		p.refuseHost(w, r)
		return t, false
	}
	rt, path, raw, ok := p.reverseTarget(r.URL)
	if !ok {
		p.noRoute(w, r)
		return t, false
	}
	return target{rt: rt, path: path, rawPath: raw}, true
}

// beginTarget reports a forwarded request to the recorder, labelled with
// its leg and route, with the path the upstream gets.
func (p *Proxy) beginTarget(r *http.Request, t target, body []byte, complete bool) *capture.Tap {
	if p.rec == nil {
		return nil
	}
	req := capture.RequestFrom(r, body, complete)
	req.Leg, req.Route, req.Upstream = t.rt.leg, t.rt.name, t.rt.base
	if t.rt.prefix != "" || r.URL.IsAbs() {
		u := url.URL{Path: t.path, RawPath: t.rawPath, RawQuery: r.URL.RawQuery}
		req.Target = u.RequestURI()
	}
	return p.rec.Begin(req)
}

// begin reports a request to the recorder that the proxy answers itself
// (a refusal; rt may be nil when no route was resolved yet). refused
// marks a policy refusal, filed with the client's plain-HTTP traffic.
func (p *Proxy) begin(r *http.Request, rt *route, body []byte, complete, refused bool) *capture.Tap {
	if p.rec == nil {
		return nil
	}
	req := capture.RequestFrom(r, body, complete)
	req.Refused = refused
	if rt != nil {
		req.Leg, req.Route, req.Upstream = rt.leg, rt.name, rt.base
	} else if tn := tunnelOf(r); tn != nil {
		req.Leg = tn.rt.leg
	} else if r.URL.IsAbs() && p.forward != nil {
		req.Leg = capture.LegForward
	}
	return p.rec.Begin(req)
}

// abortReason says why a response that had begun was cut.
func (x *exchange) abortReason() string {
	switch {
	case errors.Is(context.Cause(x.ctx), ErrShutdown):
		return ErrShutdown.Error()
	case x.getUpErr() != nil:
		return "reading the upstream response: " + x.getUpErr().Error()
	case x.w.writeErr != nil:
		return "writing to the client: " + x.w.writeErr.Error()
	case x.client.Err() != nil:
		return "the client went away"
	}
	return "response aborted"
}

// errSwitched is an upstream's 101 Switching Protocols, which the proxy
// never asked for.
var errSwitched = errors.New("the upstream switched protocols, which mcptape does not forward (nothing would record the connection)")

func (p *Proxy) modifyResponse(res *http.Response) error {
	if res.StatusCode == http.StatusSwitchingProtocols {
		return errSwitched
	}
	x, _ := res.Request.Context().Value(ctxKey{}).(*exchange)
	if x == nil {
		return nil
	}
	if err := p.rewriteOAuth(res, x); err != nil {
		return err
	}
	by, err := p.takeBody(res, x)
	x.w.body = by
	return err
}

// takeBody wraps the upstream's response body for what the proxy does
// with it, and decides, once for the response, who reports its bytes to
// the recorder: the teeWriter, as they are written to the client, unless
// a wrapper reports them as it reads them (the legacy endpoint rewrite,
// the hold points) or the OAuth rewrite kept the original body whole.
func (p *Proxy) takeBody(res *http.Response, x *exchange) (bodyReporter, error) {
	by := reportByWriter
	if x.orig != nil && x.orig.body != nil {
		by = reportWithHead
	}
	if res.Body == nil || res.Body == http.NoBody {
		return by, nil
	}
	x.upBody = upstreamBody{ReadCloser: res.Body, x: x} // (once: relay modifies one response)
	res.Body = &x.upBody
	switch {
	case legacyStream(res, x):
		res.Body = &endpointBody{ReadCloser: res.Body, x: x}
		return reportByBody, nil
	case p.examines():
		if took, err := p.interceptResponse(res, x); took || err != nil {
			return reportByBody, err
		}
	}
	return by, nil
}

// track registers an exchange in flight; false means the proxy is
// shutting down, and the exchange is to be cut at once.
func (p *Proxy) track(x *exchange) bool {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	p.live[x] = struct{}{}
	return !p.stopping
}

func (p *Proxy) untrack(x *exchange) {
	p.liveMu.Lock()
	delete(p.live, x)
	p.liveMu.Unlock()
}

// cut cancels the exchanges in flight with ErrShutdown as their cause:
// only the streams a server keeps open at will and which carry no call
// (GET, subscriptions/listen) when all is false, every exchange when it is
// true. Exchanges
// that arrive afterwards are cut at once.
func (p *Proxy) cut(all bool) {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	p.stopping = true
	for x := range p.live {
		if all || x.stream {
			x.cancel(ErrShutdown)
		}
	}
}

// draining reports whether a shutdown has begun.
func (p *Proxy) draining() bool {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	return p.stopping
}

// opensCall reports whether a request would open something a draining
// proxy no longer starts: a GET stream, or a POST carrying a JSON-RPC
// request (a new call). A client's answers, notifications and
// cancellations still go through, so that the calls in flight can finish.
func opensCall(r *http.Request, body []byte, complete bool) bool {
	if r.Method == http.MethodGet {
		return true
	}
	if !complete {
		return true
	}
	for _, m := range protocol.Split(body) {
		if m.Kind == protocol.KindRequest {
			return true
		}
	}
	return false
}

// InFlight is the number of exchanges in flight (open streams included).
func (p *Proxy) InFlight() int {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	return len(p.live)
}

// bufPool holds the response copy buffers (relay.go), of the recorder's pooled
// chunk size. A read returns what has arrived, so a larger buffer never
// holds bytes back; it lets a result arriving fast go through in fewer
// reads, writes and recorder events.
var bufPool = sync.Pool{New: func() any { b := make([]byte, capture.BodyChunk); return &b }}

// NewHandler is New with only an upstream and a recorder: the shape
// replay.RecordIfMissing takes, so a test can record a missing tape through
// the proxy.
func NewHandler(upstream *url.URL, rec *capture.Recorder) (http.Handler, error) {
	return New(&Options{Upstream: upstream, Recorder: rec})
}
