package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
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
	// the proxy's address with the server's path. Required.
	Upstream *url.URL
	// Transport carries requests upstream. Nil means a transport tuned for
	// a proxy: no environment proxy, no transparent compression (bytes
	// pass unchanged), generous idle connections, HTTP/2 to https upstreams.
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
	// proxy answer an unreachable upstream with the request's own id).
	// The rest of a larger body streams. Zero means 1 MiB.
	MaxBufferedBody int64
	// AllowAnyHost turns off the DNS-rebinding check: by default, a
	// request that arrives on a loopback address must name a loopback
	// host (localhost, 127.0.0.1, [::1]), as go-sdk's servers require.
	AllowAnyHost bool
	// Registerer receives the proxy's Prometheus metrics (see the package
	// documentation). Nil means no metrics, at no cost. One proxy per
	// Registerer.
	Registerer prometheus.Registerer
	// Engine chooses how Listen serves the proxy; the zero value is
	// EngineAuto.
	Engine Engine
}

// Engine is how a listening proxy handles HTTP.
type Engine uint8

const (
	// EngineAuto uses the proxy's own HTTP/1.1 engine when the proxy talks
	// to its upstream itself (Transport is nil), net/http otherwise.
	EngineAuto Engine = iota
	// EngineNetHTTP always uses net/http's server and httputil.ReverseProxy.
	EngineNetHTTP
)

func (e Engine) String() string {
	if e == EngineNetHTTP {
		return "net/http"
	}
	return "auto"
}

// Proxy is a transparent reverse proxy for MCP over Streamable HTTP. It is an
// http.Handler; see the package documentation for what it guarantees.
type Proxy struct {
	up        *url.URL
	rp        *httputil.ReverseProxy
	rec       *capture.Recorder
	log       *slog.Logger
	maxBuf    int64
	checkHost bool
	m         *metrics // nil without a Registerer
	engine    bool     // Listen may use the own engine
	tlsConf   *tls.Config
}

// DefaultTransport returns the transport New uses when Options.Transport is nil.
func DefaultTransport(tlsConfig *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig:       tlsConfig,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
}

// New returns a proxy to opts.Upstream.
func New(opts *Options) (*Proxy, error) {
	if opts == nil || opts.Upstream == nil {
		return nil, errors.New("proxy: no upstream URL")
	}
	up := opts.Upstream
	if up.Scheme != "http" && up.Scheme != "https" {
		return nil, fmt.Errorf("proxy: upstream %q: the scheme must be http or https", up.String())
	}
	if up.Host == "" {
		return nil, fmt.Errorf("proxy: upstream %q has no host", up.String())
	}
	p := &Proxy{up: up, rec: opts.Recorder, log: opts.Logger, maxBuf: opts.MaxBufferedBody, checkHost: !opts.AllowAnyHost}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.maxBuf <= 0 {
		p.maxBuf = 1 << 20
	}
	p.engine = opts.Transport == nil && opts.Engine == EngineAuto
	p.tlsConf = opts.TLSConfig
	tr := opts.Transport
	if tr == nil {
		tr = DefaultTransport(opts.TLSConfig)
	}
	if opts.Registerer != nil {
		var err error
		if p.m, err = newMetrics(opts.Registerer); err != nil {
			return nil, err
		}
	}
	if p.m != nil || p.rec != nil {
		tr = timedTransport{tr}
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      tr,
		FlushInterval:  -1,
		BufferPool:     bufferPool{},
		ErrorLog:       log.New(io.Discard, "", 0),
		ErrorHandler:   p.upstreamError,
		ModifyResponse: p.modifyResponse,
	}
	return p, nil
}

// Upstream is the upstream URL.
func (p *Proxy) Upstream() *url.URL { return p.up }

type ctxKey struct{}

// exchange is the per-request state shared by the handler, the body
// wrappers and the ReverseProxy callbacks.
type exchange struct {
	tap      *capture.Tap
	w        *teeWriter
	body     []byte // the buffered request body (for the error handler)
	upErr    error  // a non-EOF error reading the upstream body
	upErrMu  sync.Mutex
	finished bool
	mx       exchangeMetrics
}

func (x *exchange) setUpErr(err error) {
	x.upErrMu.Lock()
	if x.upErr == nil {
		x.upErr = err
	}
	x.upErrMu.Unlock()
}

func (x *exchange) getUpErr() error {
	x.upErrMu.Lock()
	defer x.upErrMu.Unlock()
	return x.upErr
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var arrived time.Time
	if p.m != nil {
		arrived = time.Now()
	}
	if p.checkHost && !hostAllowed(r) {
		p.refuseHost(w, r)
		return
	}
	body, complete, err := readPrefix(r.Body, r.ContentLength, p.maxBuf)
	if err != nil {
		tap := p.begin(r, body, false, false)
		tap.End("reading the request body: "+err.Error(), true)
		// The client's own body broke; there is nobody to answer.
		panic(http.ErrAbortHandler)
	}
	tap := p.begin(r, body, complete, false)
	x := &exchange{tap: tap, body: body}
	x.mx.begin(p.m, r, body, complete, arrived)
	x.w = &teeWriter{ResponseWriter: w, x: x}
	out := r.WithContext(context.WithValue(r.Context(), ctxKey{}, x))
	switch {
	case complete && len(body) == 0:
		out.Body, out.ContentLength = http.NoBody, 0
	case complete:
		// The whole body is in hand: forward it with its exact length, so
		// the transport never reads the inbound body again (see
		// libraries.md §3.6b: that extra read races the server closing it
		// and cuts streamed responses).
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	default:
		out.Body = &forwardBody{prefix: body, rest: r.Body, remain: r.ContentLength - int64(len(body)), tap: tap, mx: &x.mx}
	}
	defer func() {
		x.mx.end()
		v := recover()
		if v == nil {
			tap.End(x.w.endText(), x.w.aborted)
			return
		}
		reason := "response aborted"
		if err := x.getUpErr(); err != nil {
			reason = "reading the upstream response: " + err.Error()
		} else if x.w.writeErr != nil {
			reason = "writing to the client: " + x.w.writeErr.Error()
		} else if err := r.Context().Err(); err != nil {
			reason = "the client went away"
		}
		tap.End(reason, true)
		panic(v)
	}()
	p.rp.ServeHTTP(x.w, out)
}

// begin reports a request to the recorder, if there is one. refused marks
// a request the proxy answers itself without forwarding it.
func (p *Proxy) begin(r *http.Request, body []byte, complete, refused bool) *capture.Tap {
	if p.rec == nil {
		return nil
	}
	req := capture.RequestFrom(r, body, complete)
	req.Refused = refused
	return p.rec.Begin(req)
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme = p.up.Scheme
	pr.Out.URL.Host = p.up.Host
	pr.Out.Host = p.up.Host
	// Keep the path exactly as the client sent it (RawPath included).
	pr.Out.URL.Path = pr.In.URL.Path
	pr.Out.URL.RawPath = pr.In.URL.RawPath
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
}

func (p *Proxy) modifyResponse(res *http.Response) error {
	x, _ := res.Request.Context().Value(ctxKey{}).(*exchange)
	if x != nil && res.Body != nil && res.Body != http.NoBody {
		res.Body = &upstreamBody{ReadCloser: res.Body, x: x}
	}
	return nil
}

// upstreamError answers when the upstream could not be reached or did not
// answer: a 502 (504 on a timeout) whose body is a JSON-RPC error with the
// request's own id, naming the upstream and the cause.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	x, _ := r.Context().Value(ctxKey{}).(*exchange)
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away before the upstream answered: the
		// exchange is aborted and nobody is left to answer.
		if x != nil {
			x.w.aborted = true
			x.w.abortText = "the client went away before the upstream answered"
		}
		return
	}
	status := http.StatusBadGateway
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	var id json.RawMessage
	if x != nil {
		id = requestID(x.body)
	}
	msg := fmt.Sprintf("mcptape: upstream %s did not answer: %v", p.up.Redacted(), cleanErr(err))
	p.log.Warn("upstream error", capture.LogKeyUpstream, p.up.Redacted(), capture.LogKeyError, err)
	body := ErrorBody(id, CodeUpstream, msg, map[string]any{"upstream": p.up.Redacted(), "status": status})
	if x != nil {
		x.w.synthesized = true
		x.w.upstreamErr = msg
	}
	h := w.Header()
	h.Set("Content-Type", protocol.ContentTypeJSON)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// CodeUpstream is the JSON-RPC error code of the proxy's own errors (the
// upstream is unreachable or timed out): -32000, the first of the range
// JSON-RPC leaves to implementations.
const CodeUpstream = -32000

// ErrorBody is a JSON-RPC error response; a nil id is written as null.
func ErrorBody(id json.RawMessage, code int, message string, data any) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    any    `json:"data,omitempty"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}{code, message, data}})
	return b
}

// requestID is the id of the single request in body, if any.
func requestID(body []byte) json.RawMessage {
	if protocol.IsBatch(body) {
		return nil
	}
	m := protocol.Decode(body)
	if m.Kind == protocol.KindRequest && m.HasID() {
		return m.ID
	}
	return nil
}

func cleanErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (p *Proxy) refuseHost(w http.ResponseWriter, r *http.Request) {
	tap := p.begin(r, []byte{}, true, true)
	x := &exchange{tap: tap}
	x.mx.begin(p.m, r, []byte{}, true, time.Time{})
	defer x.mx.end()
	tw := &teeWriter{ResponseWriter: w, x: x, synthesized: true}
	msg := fmt.Sprintf("mcptape: refused: Host %q is not a loopback name, but the request arrived on a loopback address (DNS rebinding protection; run with --allow-any-host to turn it off)", r.Host)
	tw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	tw.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(tw, msg+"\n")
	tap.End("", false)
}

// hostAllowed is go-sdk's DNS-rebinding rule: a request that arrives on a
// loopback address must name a loopback host.
func hostAllowed(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return true
	}
	ta, ok := la.(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return true
	}
	host := r.Host
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

// readPrefix reads up to max bytes of a request body. complete reports
// whether that was all of it; when it is not, buf holds max+1 bytes and the
// rest is still in body.
func readPrefix(body io.ReadCloser, contentLength, max int64) (buf []byte, complete bool, err error) {
	if body == nil || body == http.NoBody || contentLength == 0 {
		return []byte{}, true, nil
	}
	var b bytes.Buffer
	if contentLength > 0 {
		b.Grow(int(min(contentLength, max+1)))
	}
	_, err = b.ReadFrom(io.LimitReader(body, max+1))
	buf = b.Bytes()
	switch {
	case err != nil:
		return buf, false, err
	case int64(len(buf)) > max:
		return buf, false, nil
	case contentLength > 0 && int64(len(buf)) < contentLength:
		return buf, false, io.ErrUnexpectedEOF
	}
	return buf, true, nil
}

type bufferPool struct{}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *(bufPool.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { bufPool.Put(&b) }

// NewHandler is New with only an upstream and a recorder: the shape
// replay.RecordIfMissing takes, so a test can record a missing tape through
// the proxy.
func NewHandler(upstream *url.URL, rec *capture.Recorder) (http.Handler, error) {
	return New(&Options{Upstream: upstream, Recorder: rec})
}
