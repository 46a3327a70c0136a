package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Classic buckets, beside the native ones: latencies from a loopback
// server (100µs) to a slow tool across a WAN (30s); the proxy's own
// overhead from 10µs to a recorder applying backpressure (5s and more).
var (
	latencyBuckets  = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	overheadBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5, 10}
)

// metrics are the proxy's Prometheus metrics; nil means none.
type metrics struct {
	upstream       *prometheus.HistogramVec
	overhead       *prometheus.HistogramVec
	firstEvent     *prometheus.HistogramVec
	headersToEvent *prometheus.HistogramVec
	requests       *prometheus.CounterVec
	reqBytes       *prometheus.CounterVec
	respBytes      *prometheus.CounterVec
	inFlight       prometheus.Gauge
	sseOpen        *prometheus.GaugeVec
	tools          *capture.ToolLabels
	routed         bool // the series have a route label

	// The children of one (method, tool) pair, looked up once: there are
	// at most a few hundred pairs (see the package documentation).
	mu    sync.RWMutex
	pairs map[labelPair]*pairMetrics
}

type labelPair struct{ route, method, tool string }

type pairMetrics struct {
	upstream, overhead  prometheus.Observer
	reqBytes, respBytes prometheus.Counter
	// The SSE series exist once the pair has seen a stream, so that
	// methods answered with JSON show none.
	sseOnce                    sync.Once
	firstEvent, headersToEvent prometheus.Observer
	sseOpen                    prometheus.Gauge
	// The requests counter of the status the pair was last answered with:
	// most pairs see one status, whose series is then not looked up by
	// its label values for every request.
	lastStatus atomic.Pointer[statusCounter]
}

type statusCounter struct {
	code int
	c    prometheus.Counter
}

// requests is the pair's requests counter for status code.
func (pm *pairMetrics) requests(m *metrics, k labelPair, code int) prometheus.Counter {
	if sc := pm.lastStatus.Load(); sc != nil && sc.code == code {
		return sc.c
	}
	c := m.requests.WithLabelValues(m.lv(k.route, k.method, statusLabel(code))...)
	pm.lastStatus.Store(&statusCounter{code, c})
	return c
}

func (pm *pairMetrics) sse(m *metrics, k labelPair) {
	pm.sseOnce.Do(func() {
		pm.firstEvent = m.firstEvent.WithLabelValues(m.lv(k.route, k.method, k.tool)...)
		pm.headersToEvent = m.headersToEvent.WithLabelValues(m.lv(k.route, k.method, k.tool)...)
		pm.sseOpen = m.sseOpen.WithLabelValues(m.lv(k.route, k.method)...)
	})
}

func (m *metrics) pair(route, method, tool string) *pairMetrics {
	k := labelPair{route, method, tool}
	m.mu.RLock()
	pm := m.pairs[k]
	m.mu.RUnlock()
	if pm != nil {
		return pm
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if pm = m.pairs[k]; pm == nil {
		pm = &pairMetrics{
			upstream:  m.upstream.WithLabelValues(m.lv(route, method, tool)...),
			overhead:  m.overhead.WithLabelValues(m.lv(route, method, tool)...),
			reqBytes:  m.reqBytes.WithLabelValues(m.lv(route, method)...),
			respBytes: m.respBytes.WithLabelValues(m.lv(route, method)...),
		}
		m.pairs[k] = pm
	}
	return pm
}

// lv is a series' label values: the route first when the proxy has
// routes or a forward leg; a proxy of one upstream has no route label.
func (m *metrics) lv(route string, vals ...string) []string {
	if !m.routed {
		return vals
	}
	return append([]string{route}, vals...)
}

func histogram(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: name, Help: help, Buckets: buckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, labels)
}

func newMetrics(reg prometheus.Registerer, routed bool) (*metrics, error) {
	labels := func(names ...string) []string {
		if routed {
			return append([]string{"route"}, names...)
		}
		return names
	}
	m := &metrics{
		routed: routed,
		upstream: histogram("mcptape_proxy_upstream_latency_seconds",
			"Time from forwarding a request to the upstream's response headers, by JSON-RPC method and tool.", latencyBuckets, labels("method", "tool")),
		overhead: histogram("mcptape_proxy_overhead_seconds",
			"Time the proxy itself spent on a request: from its arrival to forwarding it, plus from the upstream's response headers to writing them to the client.", overheadBuckets, labels("method", "tool")),
		firstEvent: histogram("mcptape_proxy_sse_first_event_seconds",
			"For text/event-stream responses, time from the request's arrival to the first body byte written to the client.", latencyBuckets, labels("method", "tool")),
		headersToEvent: histogram("mcptape_proxy_sse_headers_to_first_event_seconds",
			"For text/event-stream responses, time from the upstream's response headers to the first body byte written to the client.", latencyBuckets, labels("method", "tool")),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcptape_proxy_requests_total",
			Help: `Requests proxied, by JSON-RPC method and the HTTP status sent to the client ("none" when none was: the client left first).`,
		}, labels("method", "code")),
		reqBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcptape_proxy_request_bytes_total",
			Help: "Request body bytes forwarded from clients to the upstream, by JSON-RPC method.",
		}, labels("method")),
		respBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcptape_proxy_response_bytes_total",
			Help: "Response body bytes written to clients, by JSON-RPC method.",
		}, labels("method")),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcptape_proxy_requests_in_flight",
			Help: "Requests being proxied now (open SSE streams included).",
		}),
		sseOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcptape_proxy_sse_streams_open",
			Help: `Open text/event-stream responses, by JSON-RPC method ("none" is the standalone GET stream).`,
		}, labels("method")),
		tools: capture.NewToolLabels(0),
		pairs: map[labelPair]*pairMetrics{},
	}
	cs := []prometheus.Collector{m.upstream, m.overhead, m.firstEvent, m.headersToEvent,
		m.requests, m.reqBytes, m.respBytes, m.inFlight, m.sseOpen}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("proxy: registering metrics: %w", err)
		}
	}
	return m, nil
}

// exchangeMetrics is one request's share of the metrics. Its zero value
// (metrics off) does nothing. Only the request's handler goroutine touches
// it: ServeHTTP, the transport's RoundTrip and the response writer all run
// there.
type exchangeMetrics struct {
	m         *metrics
	p         *pairMetrics
	labels    labelPair
	arrived   time.Time
	forwarded time.Time // the transport was handed the request
	upHeaders time.Time // the transport returned the upstream's headers
	code      int
	sse       bool
	firstByte bool
	ended     bool

	// What label needs, from beginLater: the labels decode the request's
	// body, which its way upstream need not wait for.
	later struct {
		rt       *route
		r        *http.Request
		body     []byte
		complete bool
	}
	labelled sync.Once
}

// begin labels a request and counts it in flight.
func (x *exchangeMetrics) begin(m *metrics, rt *route, r *http.Request, body []byte, complete bool, arrived time.Time) {
	if m == nil {
		return
	}
	method, tool := m.labels(r, body, complete)
	var route string
	if rt != nil {
		route = rt.label
	}
	x.m, x.p, x.labels, x.arrived = m, m.pair(route, method, tool), labelPair{route, method, tool}, arrived
	if n := len(body); n > 0 {
		x.p.reqBytes.Add(float64(n)) // the buffered prefix is forwarded whole
	}
	m.inFlight.Inc()
}

// beginLater counts a request in flight, and leaves its labels to label,
// once it is on its way upstream (or when a series needs them first).
func (x *exchangeMetrics) beginLater(m *metrics, rt *route, r *http.Request, body []byte, complete bool, arrived time.Time) {
	if m == nil {
		return
	}
	x.m, x.arrived = m, arrived
	x.later.rt, x.later.r, x.later.body, x.later.complete = rt, r, body, complete
	m.inFlight.Inc()
}

// label labels a request begun by beginLater, once. The transport may call
// it from its own goroutine (a body streamed upstream, the request's
// written hook); the Once orders it before every use of the series.
func (x *exchangeMetrics) label() {
	if x.m == nil {
		return
	}
	x.labelled.Do(x.doLabel)
}

func (x *exchangeMetrics) doLabel() {
	l := &x.later
	if l.r == nil {
		return // begun by begin
	}
	method, tool := x.m.labels(l.r, l.body, l.complete)
	var route string
	if l.rt != nil {
		route = l.rt.label
	}
	x.p, x.labels = x.m.pair(route, method, tool), labelPair{route, method, tool}
	if n := len(l.body); n > 0 {
		x.p.reqBytes.Add(float64(n)) // the buffered prefix is forwarded whole
	}
	l.r, l.body = nil, nil
}

// labels are a request's method and tool labels. The 2026-07-28 routing
// headers say them without parsing the body (that is what they are for; a
// server refuses a request whose headers and body disagree); otherwise
// the buffered body is decoded.
func (m *metrics) labels(r *http.Request, body []byte, complete bool) (method, tool string) {
	if method, tool, ok := capture.RoutingLabels(r.Header, m.tools); ok {
		return method, tool
	}
	switch {
	case complete && len(body) == 0:
		return capture.LabelNone, ""
	case complete && protocol.IsBatch(body):
		// A 2025-03-26 batch: its elements' methods are counted by the
		// recorder; here the exchange is one request of several methods.
		return capture.LabelOther, ""
	case complete:
		msg := protocol.Decode(body)
		return capture.MessageLabels(msg.Kind, msg.Method, func() string { return m.toolFromParams(msg.Params) })
	}
	// The body did not fit the buffer.
	if hm := r.Header.Get(protocol.HeaderMethod); hm != "" {
		return capture.MethodLabel(hm), ""
	}
	return capture.LabelOther, ""
}

// toolFromParams is the label of params.name, without decoding the rest
// of params (the arguments may be large).
func (m *metrics) toolFromParams(params json.RawMessage) string {
	v, ok := protocol.ValidMember(params, "name")
	if !ok || len(v) < 2 || v[0] != '"' {
		return ""
	}
	if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 {
		return m.tools.LabelBytes(s)
	}
	var name string
	if json.Unmarshal(v, &name) != nil {
		return ""
	}
	return m.tools.Label(name)
}

// wroteHeader runs once the response headers went to the client.
func (x *exchangeMetrics) wroteHeader(code int, h http.Header, synthesized bool) {
	if x.m == nil {
		return
	}
	x.label()
	x.code = code
	if synthesized || x.upHeaders.IsZero() {
		return
	}
	now := time.Now()
	x.p.upstream.Observe(x.upHeaders.Sub(x.forwarded).Seconds())
	x.p.overhead.Observe((x.forwarded.Sub(x.arrived) + now.Sub(x.upHeaders)).Seconds())
	if ct := h.Get("Content-Type"); len(ct) >= len(protocol.ContentTypeSSE) && strings.EqualFold(ct[:len(protocol.ContentTypeSSE)], protocol.ContentTypeSSE) {
		x.sse = true
		x.p.sse(x.m, x.labels)
		x.p.sseOpen.Inc()
	}
}

// wrote counts n body bytes written to the client.
func (x *exchangeMetrics) wrote(n int) {
	if x.m == nil || n == 0 {
		return
	}
	x.label()
	x.p.respBytes.Add(float64(n))
	if x.sse && !x.firstByte {
		x.firstByte = true
		now := time.Now()
		x.p.firstEvent.Observe(now.Sub(x.arrived).Seconds())
		x.p.headersToEvent.Observe(now.Sub(x.upHeaders).Seconds())
	}
}

// forwardedBytes counts request body bytes streamed upstream after the
// buffered prefix. The transport calls it from its own goroutine, so it
// reads only what begin set, and the series through label.
func (x *exchangeMetrics) forwardedBytes(n int) {
	if x.m != nil && n > 0 {
		x.label()
		x.p.reqBytes.Add(float64(n))
	}
}

// end runs once, when the handler returns or aborts.
func (x *exchangeMetrics) end() {
	if x.m == nil || x.ended {
		return
	}
	x.label()
	x.ended = true
	x.p.requests(x.m, x.labels, x.code).Inc()
	x.m.inFlight.Dec()
	if x.sse {
		x.p.sseOpen.Dec()
	}
}

// statusLabels are the label values of the statuses net/http knows; an
// upstream inventing codes (599, 299) cannot add label values.
var statusLabels [600]string

func init() {
	for c := range statusLabels {
		if http.StatusText(c) != "" {
			statusLabels[c] = strconv.Itoa(c)
		}
	}
}

func statusLabel(code int) string {
	switch {
	case code == 0:
		return capture.LabelNone
	case code < 0 || code >= len(statusLabels) || statusLabels[code] == "":
		return capture.LabelOther
	}
	return statusLabels[code]
}
