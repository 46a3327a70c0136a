package dashboard

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Measure is what the latency chart measures.
type Measure uint8

const (
	// MeasureUpstream is the upstream's latency: from the proxy handing a
	// request to the upstream to the upstream's response headers
	// (Exchange.Forwarded to Exchange.UpstreamHeaders), one sample per
	// exchange the upstream answered, labelled by method and tool as the
	// proxy labels mcptape_proxy_upstream_latency_seconds. The default.
	MeasureUpstream Measure = iota
	// MeasureDuration is a call's duration: from the request message to
	// its response message as they crossed the proxy (Message.Time), one
	// sample per answered request, by the request's method and tool.
	MeasureDuration
)

func (m Measure) String() string {
	if m == MeasureDuration {
		return "duration"
	}
	return "upstream"
}

func parseMeasure(v string) (Measure, bool) {
	switch v {
	case "", "upstream":
		return MeasureUpstream, true
	case "duration":
		return MeasureDuration, true
	}
	return 0, false
}

// latencyAnswer is GET /api/v1/latency: p50 and p99 of the measure, per
// method and per tool, over time buckets.
type latencyAnswer struct {
	Measure  string          `json:"measure"`
	From     time.Time       `json:"from"`
	To       time.Time       `json:"to"`
	BucketMs float64         `json:"bucketMs"`
	Methods  []methodLatency `json:"methods"`
	// Tools are the tools/call samples again, by tool.
	Tools []methodLatency `json:"tools"`
}

type methodLatency struct {
	Method string         `json:"method"`
	Tool   string         `json:"tool,omitempty"`
	N      int            `json:"n"`
	P50    float64        `json:"p50"` // milliseconds
	P99    float64        `json:"p99"`
	Points []latencyPoint `json:"points"` // buckets with samples only
}

type latencyPoint struct {
	T   time.Time `json:"t"` // the bucket's start
	N   int       `json:"n"`
	P50 float64   `json:"p50"`
	P99 float64   `json:"p99"`
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Nanoseconds()) / 1e6
}

// latencyQuery is what GET /api/v1/latency asks.
type latencyQuery struct {
	measure      Measure
	since, until time.Time
	buckets      int
	method, tool string
	session      string
	tools        *capture.ToolLabels
}

func (s *Server) apiLatency(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lq := latencyQuery{buckets: 24, method: q.Get("method"), tool: q.Get("tool"), session: q.Get("session")}
	var ok bool
	if lq.measure, ok = parseMeasure(q.Get("measure")); !ok {
		badRequest(w, "measure: want upstream or duration")
		return
	}
	var err error
	if lq.since, err = parseTime(q.Get("since")); err != nil {
		badRequest(w, "since: "+err.Error())
		return
	}
	if lq.until, err = parseTime(q.Get("until")); err != nil {
		badRequest(w, "until: "+err.Error())
		return
	}
	if v := q.Get("buckets"); v != "" {
		if lq.buckets, err = strconv.Atoi(v); err != nil || lq.buckets < 1 {
			badRequest(w, "buckets: want a positive number")
			return
		}
		lq.buckets = min(lq.buckets, 500)
	}
	ans, err := s.latency(r.Context(), &lq)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// latencySample is one measured exchange or call: its method and tool,
// when it started, and how long it took.
type latencySample struct {
	method, tool string
	at           time.Time
	d            time.Duration
}

// defaultLatencyWindow is the range the chart covers when none is given:
// the last day of recording.
const defaultLatencyWindow = 24 * time.Hour

// latency reads the samples of the sessions in the range from the store
// and buckets them.
func (s *Server) latency(ctx context.Context, q *latencyQuery) (*latencyAnswer, error) {
	// With no range asked for, the answer's range fits the samples: the
	// default window only bounds what is read.
	fit := q.since.IsZero() && q.until.IsZero()
	if q.since.IsZero() && q.until.IsZero() && q.session == "" {
		for x, err := range s.store.Sessions(ctx, capture.SessionQuery{Limit: 1}) {
			if err != nil {
				return nil, err
			}
			q.since = x.Start.Add(-defaultLatencyWindow)
		}
	}
	// Tool names become bounded labels as the proxy's do: the first
	// capture.MaxToolLabels names seen, then "other".
	q.tools = capture.NewToolLabels(0)
	var samples []latencySample
	add := func(x *capture.Session) error {
		end := x.End
		if end.IsZero() {
			end = x.Start
		}
		if !q.since.IsZero() && end.Before(q.since) {
			return nil
		}
		var err error
		if q.measure == MeasureDuration {
			samples, err = s.durationSamples(ctx, x.ID, q, samples)
		} else {
			samples, err = s.upstreamSamples(ctx, x.ID, q, samples)
		}
		return err
	}
	if q.session != "" {
		x, err := s.store.Session(ctx, q.session)
		if err != nil {
			return nil, err
		}
		if err := add(x); err != nil {
			return nil, err
		}
	} else {
		for x, err := range s.store.Sessions(ctx, capture.SessionQuery{Until: q.until}) {
			if err != nil {
				return nil, err
			}
			if err := add(x); err != nil {
				return nil, err
			}
		}
	}
	ans := &latencyAnswer{Measure: q.measure.String(), From: q.since, To: q.until, Methods: []methodLatency{}, Tools: []methodLatency{}}
	if len(samples) == 0 {
		return ans, nil
	}
	if fit || q.since.IsZero() || q.until.IsZero() {
		lo, hi := samples[0].at, samples[0].at
		for _, p := range samples {
			if p.at.Before(lo) {
				lo = p.at
			}
			if p.at.After(hi) {
				hi = p.at
			}
		}
		if fit || q.since.IsZero() {
			ans.From = lo
		}
		if fit || q.until.IsZero() {
			ans.To = hi.Add(time.Millisecond)
		}
	}
	width := max(ans.To.Sub(ans.From)/time.Duration(q.buckets), time.Millisecond)
	ans.BucketMs = float64(width.Microseconds()) / 1000

	byMethod := map[string][]latencySample{}
	byTool := map[string][]latencySample{}
	for _, p := range samples {
		byMethod[p.method] = append(byMethod[p.method], p)
		if p.tool != "" {
			byTool[p.tool] = append(byTool[p.tool], p)
		}
	}
	series := func(ps []latencySample) methodLatency {
		all := make([]time.Duration, len(ps))
		perBucket := map[int][]time.Duration{}
		for i, p := range ps {
			all[i] = p.d
			b := min(int(p.at.Sub(ans.From)/width), q.buckets-1)
			perBucket[b] = append(perBucket[b], p.d)
		}
		slices.Sort(all)
		ml := methodLatency{Method: ps[0].method, N: len(all), P50: percentile(all, 50), P99: percentile(all, 99), Points: []latencyPoint{}}
		for b := range q.buckets {
			ds := perBucket[b]
			if len(ds) == 0 {
				continue
			}
			slices.Sort(ds)
			ml.Points = append(ml.Points, latencyPoint{T: ans.From.Add(time.Duration(b) * width), N: len(ds),
				P50: percentile(ds, 50), P99: percentile(ds, 99)})
		}
		return ml
	}
	for _, ps := range byMethod {
		ans.Methods = append(ans.Methods, series(ps))
	}
	for tool, ps := range byTool {
		ml := series(ps)
		ml.Method, ml.Tool = protocol.MethodToolsCall, tool
		ans.Tools = append(ans.Tools, ml)
	}
	// The busiest first.
	busiest := func(a, b methodLatency) int {
		if a.N != b.N {
			return b.N - a.N
		}
		if a.Method+"\x00"+a.Tool < b.Method+"\x00"+b.Tool {
			return -1
		}
		return 1
	}
	slices.SortFunc(ans.Methods, busiest)
	slices.SortFunc(ans.Tools, busiest)
	return ans, nil
}

// inRange reports whether t is in [since, until), a zero bound being open.
func (q *latencyQuery) inRange(t time.Time) bool {
	return (q.since.IsZero() || !t.Before(q.since)) && (q.until.IsZero() || t.Before(q.until))
}

// keep reports whether a sample's labels pass the query's filters.
func (q *latencyQuery) keep(method, tool string) bool {
	return (q.method == "" || method == q.method) && (q.tool == "" || tool == q.tool)
}

// durationSamples are a session's answered requests: request message to
// response message, by the request's method and tool.
func (s *Server) durationSamples(ctx context.Context, id string, q *latencyQuery, samples []latencySample) ([]latencySample, error) {
	sent := map[uint64]latencySample{}
	for m, err := range s.store.Messages(ctx, id, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return samples, err
		}
		switch m.Kind {
		case protocol.KindRequest:
			tool := ""
			if m.Method == protocol.MethodToolsCall {
				tool = q.tools.Label(m.Name)
			}
			if q.inRange(m.Time) && q.keep(m.Method, tool) {
				sent[m.Seq] = latencySample{method: m.Method, tool: tool, at: m.Time}
			}
		case protocol.KindResult, protocol.KindError:
			if p, ok := sent[m.Links.Request]; ok && m.Links.Request != 0 {
				delete(sent, m.Links.Request)
				if p.d = m.Time.Sub(p.at); p.d >= 0 {
					samples = append(samples, p)
				}
			}
		}
	}
	return samples, nil
}

// exchangeBody is what an exchange's request body held, for its labels.
type exchangeBody struct {
	n            int // client messages in the body
	batch        bool
	kind         protocol.Kind
	method, name string
}

// upstreamSamples are a session's exchanges the upstream answered:
// Forwarded to UpstreamHeaders, the span
// mcptape_proxy_upstream_latency_seconds observes, with its labels.
func (s *Server) upstreamSamples(ctx context.Context, id string, q *latencyQuery, samples []latencySample) ([]latencySample, error) {
	var xs []*capture.Exchange
	for x, err := range s.store.Exchanges(ctx, id) {
		if err != nil {
			return samples, err
		}
		if !x.Forwarded.IsZero() && !x.UpstreamHeaders.IsZero() && !x.Synthesized && q.inRange(x.Forwarded) {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return samples, nil
	}
	bodies := map[uint64]*exchangeBody{}
	for m, err := range s.store.Messages(ctx, id, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return samples, err
		}
		if m.Direction != protocol.ClientToServer {
			continue
		}
		b := bodies[m.ExchangeID]
		if b == nil {
			b = &exchangeBody{kind: m.Kind, method: m.Method, name: m.Name}
			bodies[m.ExchangeID] = b
		}
		b.n++
		b.batch = b.batch || m.Batch >= 0
	}
	for _, x := range xs {
		method, tool := q.labels(x.RequestHeader, bodies[x.ID])
		if d := x.UpstreamHeaders.Sub(x.Forwarded); d >= 0 && q.keep(method, tool) {
			samples = append(samples, latencySample{method: method, tool: tool, at: x.Forwarded, d: d})
		}
	}
	return samples, nil
}

// labels are an exchange's method and tool labels by the proxy's rule
// (capture.RoutingLabels, then the request body: no message is "none", a
// batch "other", one message by capture.MessageLabels).
func (q *latencyQuery) labels(h http.Header, b *exchangeBody) (method, tool string) {
	if method, tool, ok := capture.RoutingLabels(h, q.tools); ok {
		return method, tool
	}
	switch {
	case b == nil || b.n == 0:
		return capture.LabelNone, ""
	case b.batch:
		return capture.LabelOther, ""
	}
	return capture.MessageLabels(b.kind, b.method, func() string { return q.tools.Label(b.name) })
}
