package capture

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptape/mcptape/protocol"
)

// Label values with a fixed meaning, shared by the capture and proxy metrics.
const (
	// LabelOther stands for every value a label does not keep: a method
	// outside the MCP method set, a tool past the first [MaxToolLabels],
	// an error code outside the JSON-RPC and MCP sets.
	LabelOther = "other"
	// LabelNone is the method of traffic that carries no JSON-RPC method
	// (a GET stream, a DELETE, a client's answer, a body that is not
	// JSON-RPC, a response to an unknown request).
	LabelNone = "none"
)

// MaxToolLabels is how many distinct tool names a [ToolLabels] keeps as
// label values; later names are counted as [LabelOther].
const MaxToolLabels = 100

// maxToolLabelLen bounds a tool name kept as a label value (the spec's
// limit on tool names).
const maxToolLabelLen = 128

// RoutingLabels are a request's method and tool labels as its 2026-07-28
// routing headers say them (Mcp-Method, and Mcp-Name for tools/call); ok is
// false when they say nothing usable and the body must decide. The proxy's
// metrics and the dashboard's latency chart both label requests this way.
func RoutingLabels(h http.Header, tools *ToolLabels) (method, tool string, ok bool) {
	hm := h.Get(protocol.HeaderMethod)
	if hm == "" {
		return "", "", false
	}
	if hm != protocol.MethodToolsCall {
		return MethodLabel(hm), "", true
	}
	if hn := h.Get(protocol.HeaderName); hn != "" {
		if name, err := protocol.DecodeHeaderValue(hn); err == nil {
			return hm, tools.Label(name), true
		}
	}
	return "", "", false
}

// MessageLabels are the method and tool labels of a request body holding
// one client message of kind and method: [LabelNone] for one that is not a
// request or notification; toolLabel gives a tools/call's tool label.
func MessageLabels(kind protocol.Kind, method string, toolLabel func() string) (string, string) {
	if kind != protocol.KindRequest && kind != protocol.KindNotification {
		return LabelNone, ""
	}
	if method == protocol.MethodToolsCall {
		return MethodLabel(method), toolLabel()
	}
	return MethodLabel(method), ""
}

// MethodLabel is the label value of a JSON-RPC method: the method itself
// when the MCP specification defines it ([protocol.IsSpecMethod]),
// [LabelNone] for "", else [LabelOther].
func MethodLabel(method string) string {
	switch {
	case method == "":
		return LabelNone
	case protocol.IsSpecMethod(method):
		return method
	}
	return LabelOther
}

// errorCodes are the JSON-RPC error codes kept as label values: JSON-RPC's
// own, the MCP specification's (with the numbers drafts and go-sdk ≤1.6
// used), and -32000, the implementation-defined code SDKs use most.
var errorCodes = map[int64]string{}

func init() {
	for _, c := range []int64{
		-32700, -32600, -32601, -32602, -32603, // JSON-RPC
		-32000,                 // implementation-defined (TS SDK "Bad Request", mcptape's own upstream errors)
		-32001, -32002, -32003, // header mismatch (drafts), resource not found, missing capability (draft)
		-32004,                 // unsupported version (draft)
		-32020, -32021, -32022, // header mismatch, missing client capability, unsupported version
		-32042, // URL elicitation required
	} {
		errorCodes[c] = strconv.FormatInt(c, 10)
	}
}

// ErrorCodeLabel is the label value of a JSON-RPC error code (its raw JSON
// number): the code in decimal when JSON-RPC or MCP defines it, else
// [LabelOther].
func ErrorCodeLabel(raw []byte) string {
	c, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return LabelOther
	}
	if s, ok := errorCodes[c]; ok {
		return s
	}
	return LabelOther
}

// ToolLabels turns tool names into a bounded set of label values: the first
// max distinct names it is asked about are kept, every later one (and any
// name that is not short printable UTF-8) becomes [LabelOther]. A hostile
// client calling a million tool names adds one label value. Safe for
// concurrent use.
type ToolLabels struct {
	max  int
	mu   sync.RWMutex
	kept map[string]string
}

// NewToolLabels returns a ToolLabels that keeps max names; max <= 0 means
// [MaxToolLabels].
func NewToolLabels(max int) *ToolLabels {
	if max <= 0 {
		max = MaxToolLabels
	}
	return &ToolLabels{max: max, kept: make(map[string]string, max)}
}

// Label is the label value of tool name: "" for "", name itself while it is
// among the kept ones, else [LabelOther].
func (t *ToolLabels) Label(name string) string {
	if name == "" {
		return ""
	}
	t.mu.RLock()
	s, ok := t.kept[name]
	full := len(t.kept) >= t.max
	t.mu.RUnlock()
	if ok {
		return s
	}
	if full || !labelSafe(name) {
		return LabelOther
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.kept[name]; ok {
		return s
	}
	if len(t.kept) >= t.max {
		return LabelOther
	}
	t.kept[name] = name
	return name
}

// LabelBytes is Label for a name held in bytes; a kept name costs no
// allocation.
func (t *ToolLabels) LabelBytes(name []byte) string {
	if len(name) == 0 {
		return ""
	}
	t.mu.RLock()
	s, ok := t.kept[string(name)]
	t.mu.RUnlock()
	if ok {
		return s
	}
	return t.Label(string(name))
}

// labelSafe accepts short valid UTF-8 without control characters, so that
// a label value stays readable and valid for Prometheus.
func labelSafe(s string) bool {
	if len(s) > maxToolLabelLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// Sizer is implemented by a store that can tell its size in bytes cheaply
// (a cached figure: it is read on every metrics scrape). The recorder
// exports it as mcptape_capture_store_size_bytes.
type Sizer interface {
	Size() (int64, error)
}

// recorderMetrics are the recorder's Prometheus metrics. A nil
// *recorderMetrics (no Registerer) records nothing.
type recorderMetrics struct {
	messages   *prometheus.CounterVec
	errors     *prometheus.CounterVec
	toolErrors *prometheus.CounterVec
	findings   *prometheus.CounterVec
	calls      *prometheus.HistogramVec
	tools      *ToolLabels
	queued     atomic.Int64 // body bytes held against the queue budget
	active     atomic.Int64 // sessions seen within IdleGap
}

func newRecorderMetrics(r *Recorder, reg prometheus.Registerer) (*recorderMetrics, error) {
	m := &recorderMetrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcptape_capture_messages_total",
			Help: "JSON-RPC messages (and frames that are not) recorded, by direction (c2s, s2c), kind and method; a response counts under its request's method.",
		}, []string{"direction", "kind", "method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcptape_capture_errors_total",
			Help: "JSON-RPC error responses recorded, by the method of the request they answer, tool (tools/call only) and error code.",
		}, []string{"method", "tool", "code"}),
		toolErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcptape_capture_tool_errors_total",
			Help: "tools/call results with isError true (tool execution failures, which are not JSON-RPC errors), by tool.",
		}, []string{"tool"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcptape_capture_findings_total",
			Help: "Protocol findings attached to recorded messages and exchanges, by kind.",
		}, []string{"kind"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                        "mcptape_capture_call_duration_seconds",
			Help:                        "Client requests answered: from the request to its response as each crossed mcptape, by method, tool (tools/call only) and leg (reverse, forward, mitm, stdio). The one latency measure of stdio servers.",
			Buckets:                     []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 100, NativeHistogramMinResetDuration: time.Hour,
		}, []string{"method", "tool", "leg"}),
		tools: NewToolLabels(0),
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	cs := []prometheus.Collector{
		m.messages, m.errors, m.toolErrors, m.findings, m.calls,
		gauge("mcptape_capture_queue_events", "Events waiting between the proxy and the capture pipeline.",
			func() float64 { return float64(len(r.events)) }),
		gauge("mcptape_capture_queue_bytes", "Body bytes waiting between the proxy and the capture pipeline.",
			func() float64 { return float64(m.queued.Load()) }),
		gauge("mcptape_capture_queue_capacity_events", "The capture queue's bound in events (RecorderOptions.QueueSize).",
			func() float64 { return float64(cap(r.events)) }),
		gauge("mcptape_capture_queue_capacity_bytes", "The capture queue's bound in body bytes (RecorderOptions.QueueBytes).",
			func() float64 { return float64(r.qlimit) }),
		gauge("mcptape_capture_sessions_active", "MCP sessions that saw traffic within the recorder's idle gap and are not closed (updated every second).",
			func() float64 { return float64(m.active.Load()) }),
		counter("mcptape_capture_messages_stored_total", "Messages the store accepted.", &r.stored),
		counter("mcptape_capture_messages_lost_total", "Messages decoded but not stored because a store write failed.", &r.lost),
		counter("mcptape_capture_events_dropped_total", "Proxy events given up on a full capture queue after the backpressure bound; each marks its session incomplete.", &r.dropped),
		counter("mcptape_capture_store_write_errors_total", "Failed store writes.", &r.storeErrors),
	}
	if s, ok := r.store.(Sizer); ok {
		cs = append(cs, &sizeCollector{s: s, desc: prometheus.NewDesc("mcptape_capture_store_size_bytes",
			"Size of the capture store on disk (for Badger: the space its directory takes).", nil, nil)})
	}
	if err := registerAll(reg, cs); err != nil {
		return nil, fmt.Errorf("registering the capture metrics: %w", err)
	}
	return m, nil
}

// registerAll registers every collector, or none.
func registerAll(reg prometheus.Registerer, cs []prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			return err
		}
	}
	return nil
}

// sizeCollector reports a Sizer's size, and nothing when it fails.
type sizeCollector struct {
	s    Sizer
	desc *prometheus.Desc
}

func (c *sizeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sizeCollector) Collect(ch chan<- prometheus.Metric) {
	if n, err := c.s.Size(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
	}
}

// message counts one recorded message; pm is its decoded form, nil for a
// message the recorder made up (an invalid or oversize body).
func (m *recorderMetrics) message(msg *Message, pm *protocol.Message) {
	if m == nil {
		return
	}
	method := MethodLabel(msg.Method)
	m.messages.WithLabelValues(msg.Direction.String(), msg.Kind.String(), method).Inc()
	if msg.Kind == protocol.KindError && pm != nil {
		code := LabelOther
		if v, ok := protocol.ValidMember(pm.Error, "code"); ok {
			code = ErrorCodeLabel(v)
		}
		tool := ""
		if msg.Method == protocol.MethodToolsCall {
			tool = m.tools.Label(msg.Name)
		}
		m.errors.WithLabelValues(method, tool, code).Inc()
	}
	m.findingList(msg.Findings)
}

func (m *recorderMetrics) findingList(fs []Finding) {
	if m == nil {
		return
	}
	for _, f := range fs {
		m.findings.WithLabelValues(string(f.Kind)).Inc()
	}
}

// call observes a client request answered after d.
func (m *recorderMetrics) call(method, name string, leg Leg, d time.Duration) {
	if m == nil || d < 0 {
		return
	}
	tool := ""
	if method == protocol.MethodToolsCall {
		tool = m.tools.Label(name)
	}
	m.calls.WithLabelValues(MethodLabel(method), tool, leg.String()).Observe(d.Seconds())
}

// toolError counts a result with isError true, when it answers a tools/call.
func (m *recorderMetrics) toolError(method, tool string) {
	if m == nil || method != protocol.MethodToolsCall {
		return
	}
	m.toolErrors.WithLabelValues(m.tools.Label(tool)).Inc()
}

// addQueued tracks the body bytes held against the queue budget.
func (m *recorderMetrics) addQueued(n int64) {
	if m != nil && n != 0 {
		m.queued.Add(n)
	}
}

// countActive updates mcptape_capture_sessions_active: MCP sessions (not
// the "http" groups of non-MCP exchanges) that are not closed and saw
// traffic within IdleGap. It runs on the pipeline goroutine.
func (p *pipeline) countActive(now time.Time) {
	if p.r.met == nil {
		return
	}
	n := int64(0)
	for _, st := range p.groups.sessions {
		if !st.plainHTTP && st.s.Status != StatusClosed && now.Sub(st.last) < p.o.IdleGap {
			n++
		}
	}
	p.r.met.active.Store(n)
}
