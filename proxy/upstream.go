package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// upstream is the RoundTripper the relay uses: the configured
// transport, plus what the proxy adds around each request — the instants
// for the metrics and the record, the wait for the response head bounded
// by Options.UpstreamTimeout, and one retry on a fresh connection when a
// pooled one turns out closed.
//
// The retry: an upstream closes idle keep-alive connections when it likes
// (Node's HTTP server after 5 s), and a request sent on one just as it
// closes fails before any response byte. net/http's transport retries that
// only for requests it can replay and deems idempotent, never a POST. The
// proxy holds the whole body of a buffered request, so it can replay it;
// and a connection that failed before answering anything, on its first
// use since it sat idle, did not process it.
type upstream struct {
	rt      http.RoundTripper
	fresh   http.RoundTripper // never reuses a connection
	timeout time.Duration     // <= 0: no limit
	waits   *headWaits
}

// headWaits are the attempts waiting for their response head, their
// bound kept by one sweep for the whole proxy rather than by a timer
// per request (see sweeper): an attempt past its bound is cancelled as
// its own timer would have cancelled it, within the sweep's slack.
type headWaits struct {
	sw  *sweeper
	mu  sync.Mutex
	set map[*attemptState]struct{}
}

// sweep cancels the attempts past their bound, and returns the earliest
// bound left.
func (w *headWaits) sweep(now time.Time) (next time.Time) {
	var late []*attemptState
	w.mu.Lock()
	for a := range w.set {
		switch {
		case !a.due.After(now):
			late = append(late, a)
			delete(w.set, a)
		case next.IsZero() || a.due.Before(next):
			next = a.due
		}
	}
	w.mu.Unlock()
	for _, a := range late {
		a.expire()
	}
	return next
}

// newUpstream wraps rt; base, the transport under it (rt itself unless
// it is the h1 transport), makes the fresh connection of a retry.
func newUpstream(rt, base http.RoundTripper, timeout time.Duration) *upstream {
	u := &upstream{rt: rt, fresh: base, timeout: timeout, waits: &headWaits{set: map[*attemptState]struct{}{}}}
	u.waits.sw = newSweeper(u.waits.sweep)
	if t, ok := base.(*http.Transport); ok {
		f := t.Clone()
		f.DisableKeepAlives = true
		u.fresh = f
	}
	return u
}

func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	x, _ := req.Context().Value(ctxKey{}).(*exchange)
	if x == nil {
		return u.rt.RoundTrip(req)
	}
	return u.roundTrip(req, x, nil)
}

// roundTrip is RoundTrip for an exchange's request; ir, when not nil,
// passes the interim responses on to the client.
func (u *upstream) roundTrip(req *http.Request, x *exchange, ir *interimRelay) (*http.Response, error) {
	res, retry, err := u.attempt(u.rt, req, x, ir)
	if retry {
		again := req.Clone(req.Context())
		again.Body = io.NopCloser(bytes.NewReader(x.body))
		res, _, err = u.attempt(u.fresh, again, x, ir)
	}
	return res, err
}

// attempt sends req once. retry reports a failure the request may be
// retried after: a reused connection that failed before any response byte,
// with the whole body in hand and the client still waiting.
func (u *upstream) attempt(rt http.RoundTripper, req *http.Request, x *exchange, ir *interimRelay) (_ *http.Response, retry bool, _ error) {
	a := &attemptState{d: u.timeout, relay: ir, waits: u.waits, mx: &x.mx, cw: x.watchFor(req)}
	x.mx.forwarded = time.Now()
	var res *http.Response
	var err error
	if h, ok := rt.(*h1Transport); ok && h.handles(req) {
		// The h1 transport calls the attempt's hooks itself (no trace) and
		// hands it its connection, which the attempt's own ends (the head's
		// timeout, too many interim responses) cut: the request keeps the
		// exchange's context, with no context of the attempt's own.
		res, err = h.roundTrip(req, a)
	} else {
		ctx, cancel := context.WithCancelCause(req.Context())
		a.cancel = cancel
		trace := &httptrace.ClientTrace{
			GotConn:              func(ci httptrace.GotConnInfo) { a.gotConn(nil, ci.Reused) },
			WroteRequest:         func(httptrace.WroteRequestInfo) { a.arm() },
			GotFirstResponseByte: a.gotFirstByte,
			// got1xx cancels as well as returning its error (net/http's
			// transport ends the round trip with it).
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error { return a.got1xx(code, http.Header(h)) },
		}
		res, err = rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	}
	a.disarm()
	if err == nil && a.timedOut.Load() {
		// The wait was over and the request cancelled before this response
		// came back: net/http's transport returns what an upstream sends
		// between the cancel and the connection's close (a TLS upstream
		// reads the close_notify, leaves its handler and answers an empty
		// 200). That is its answer to the cancellation, not to the client.
		res.Body.Close()
		return nil, false, &headTimeoutError{u.timeout}
	}
	if err == nil && a.interim.Load() > maxInterim {
		// The final response can be in hand before the cancel takes
		// effect (the interim ones arrived in one read): refuse it anyway.
		res.Body.Close()
		a.stop(errTooManyInterim)
		return nil, false, errTooManyInterim
	}
	if err == nil {
		x.mx.upHeaders = time.Now()
		if a.cancel != nil {
			// net/http's transport: the attempt's context ends with the body.
			res.Body = &attemptBody{ReadCloser: res.Body, cancel: a.cancel}
		}
		return res, false, nil
	}
	a.stop(nil)
	if a.timedOut.Load() {
		return nil, false, &headTimeoutError{u.timeout}
	}
	retry = a.reused.Load() && !a.gotByte.Load() && x.complete && x.ctx.Err() == nil && connGone(err)
	return nil, retry, err
}

// attemptState is one attempt's view of its connection, and the bound
// on the wait for the response head once the request is sent (kept by
// the upstream's headWaits).
type attemptState struct {
	reused, gotByte, timedOut atomic.Bool
	interim                   atomic.Int32            // 1xx responses seen
	relay                     *interimRelay           // passes them on; nil: nobody
	cancel                    context.CancelCauseFunc // the attempt's context's, through net/http's transport
	conn                      atomic.Pointer[h1Conn]  // the attempt's connection, through the h1 transport
	cw                        *connWatch              // the exchange's, for its own request
	d                         time.Duration
	waits                     *headWaits
	mx                        *exchangeMetrics // labelled once the request is written
	mu                        sync.Mutex
	due                       time.Time // the bound, once armed
	armed, over               bool
}

// attemptHooks are what the h1 transport tells an attempt of its
// connection, as net/http's transport does through a ClientTrace.
type attemptHooks interface {
	// gotConn returns the exchange's watch that cuts c when the request
	// is cancelled; nil: the request's context is watched instead.
	gotConn(c *h1Conn, reused bool) *connWatch
	arm() // the request was written
	gotFirstByte()
	got1xx(code int, h http.Header) error
}

var _ attemptHooks = (*attemptState)(nil)

func (a *attemptState) gotConn(c *h1Conn, reused bool) *connWatch {
	a.reused.Store(reused)
	if c == nil {
		return nil
	}
	a.conn.Store(c)
	if a.cw.watch(c) {
		return a.cw
	}
	return nil
}

// watchFor is the exchange's connWatch for req when req is the exchange's
// own request; nil for a request of the proxy's on its behalf (an answer,
// which outlives it: its context is the exchange's without the
// cancellation).
func (x *exchange) watchFor(req *http.Request) *connWatch {
	if req.Context() == context.Context(&x.outCtx) {
		return &x.cw
	}
	return nil
}

// stop ends the attempt for cause (nil: it is over): its context, or its
// connection, which is then spent. Its ends come once the request is
// written, so the h1 transport's connection is in hand by then.
func (a *attemptState) stop(cause error) {
	if a.cancel != nil {
		a.cancel(cause)
	} else if c := a.conn.Load(); c != nil && cause != nil {
		c.cut()
	}
}

func (a *attemptState) gotFirstByte() { a.gotByte.Store(true) }

// got1xx counts an interim response and passes it on to the client.
// net/http leaves bounding them to whoever sees them.
func (a *attemptState) got1xx(code int, h http.Header) error {
	if a.interim.Add(1) > maxInterim {
		a.stop(errTooManyInterim)
		return errTooManyInterim
	}
	if a.relay != nil {
		a.relay.relay(code, h)
	}
	return nil
}

func (a *attemptState) arm() {
	// The request is upstream: the metrics' labels can be worked out
	// while the upstream works on it.
	a.mx.label()
	if a.d <= 0 {
		return
	}
	a.mu.Lock()
	if a.over || a.armed {
		a.mu.Unlock()
		return
	}
	now := time.Now()
	a.armed, a.due = true, now.Add(a.d)
	w := a.waits
	w.mu.Lock()
	w.set[a] = struct{}{}
	w.mu.Unlock()
	a.mu.Unlock()
	w.sw.due(a.due, now)
}

// expire ends an attempt whose response head did not come in time.
func (a *attemptState) expire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.over {
		return
	}
	a.timedOut.Store(true)
	a.stop(&headTimeoutError{a.d})
}

func (a *attemptState) disarm() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.over = true
	if a.armed {
		a.waits.mu.Lock()
		delete(a.waits.set, a)
		a.waits.mu.Unlock()
	}
}

// attemptBody releases the attempt's context when the response is over.
type attemptBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *attemptBody) ready() bool {
	r, ok := b.ReadCloser.(readyReader)
	return ok && r.ready()
}

func (b *attemptBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// maxInterim bounds the interim (1xx) responses an upstream may send
// before its final one: 103 Early Hints, 100 Continue and 102 Processing
// come one or two at a time.
const maxInterim = 10

var errTooManyInterim = fmt.Errorf("the upstream sent more than %d interim (1xx) responses", maxInterim)

// headTimeoutError is an upstream that sent no response head within the
// upstream timeout.
type headTimeoutError struct{ d time.Duration }

func (e *headTimeoutError) Error() string {
	return fmt.Sprintf("no response head within %v", e.d)
}
func (e *headTimeoutError) Timeout() bool   { return true }
func (e *headTimeoutError) Temporary() bool { return false }

// connGone reports an error of a connection the upstream had closed.
func connGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "server closed idle connection")
}
