package proxy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
)

// scrape reads reg's /metrics in the text format, as Prometheus without
// native histograms does.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("scrape Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return fams
}

// series maps a family's label sets ("k=v,k=v", sorted) to the counter or
// gauge value, or to a histogram's sample count.
func series(fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	f := fams[name]
	if f == nil {
		return out
	}
	for _, m := range f.Metric {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(ls)
		k := strings.Join(ls, ",")
		switch {
		case m.Counter != nil:
			out[k] = m.Counter.GetValue()
		case m.Gauge != nil:
			out[k] = m.Gauge.GetValue()
		case m.Histogram != nil:
			out[k] = float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			out[k] = m.Untyped.GetValue()
		}
	}
	return out
}

// checkSeries compares a family with want, series by series; series
// with value 0 may be absent.
func checkSeries(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]float64) {
	t.Helper()
	got := series(fams, name)
	for k, v := range got {
		if v == 0 {
			if _, ok := want[k]; !ok {
				delete(got, k)
			}
		}
	}
	var diff []string
	for k, w := range want {
		if g, ok := got[k]; !ok && w != 0 || g != w {
			diff = append(diff, fmt.Sprintf("  {%s}: got %v, want %v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("  {%s}: got %v, want none", k, g))
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		t.Errorf("%s:\n%s", name, strings.Join(diff, "\n"))
	}
}

// metricsRig is the fixture server behind a recording proxy on Badger,
// both registered on one registry.
type metricsRig struct {
	*rig
	reg *prometheus.Registry
}

func newMetricsRig(t *testing.T, h http.Handler) *metricsRig {
	t.Helper()
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewRegistry()
	r := newRig(t, h, &rigOptions{store: store,
		recorder: &capture.RecorderOptions{Registerer: reg},
		proxy:    &proxy.Options{Registerer: reg}})
	return &metricsRig{rig: r, reg: reg}
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"metrics-test","version":"1"}}`

// post sends one request through the proxy and returns the status, the
// response headers and the body.
func (r *metricsRig) post(t *testing.T, method, path, body string, h map[string]string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, r.px.URL+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(path, "/mcp") {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	res, err := r.px.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, string(b)
}

// modern sends a 2026-07-28 request with routing headers; name "" means
// no Mcp-Name.
func (r *metricsRig) modern(t *testing.T, id int, method, params, name string) (int, string) {
	t.Helper()
	h := map[string]string{protocol.HeaderProtocolVersion: "2026-07-28", protocol.HeaderMethod: method}
	if name != "" {
		h[protocol.HeaderName] = name
	}
	if params != "" {
		params += ","
	}
	code, _, body := r.post(t, "POST", fixtures.PathStateless,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, id, method, params, modernMeta), h)
	return code, body
}

// TestMetricsKnownTraffic runs a known script through the recording proxy
// on both eras and checks every count a dashboard shows.
func TestMetricsKnownTraffic(t *testing.T) {
	r := newMetricsRig(t, fixtures.Handler(nil))
	call := func(tool, args string) string { return fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args) }
	expect := func(code, want int, body string) {
		t.Helper()
		if code != want {
			t.Fatalf("status %d, want %d: %s", code, want, body)
		}
	}

	// 2026-07-28, stateless: every answer is an SSE stream.
	code, body := r.modern(t, 1, "server/discover", "", "")
	expect(code, 200, body)
	for i := range 3 {
		code, body := r.modern(t, 10+i, "tools/call", call("echo", `{"text":"hi"}`), "echo")
		expect(code, 200, body)
	}
	code, body = r.modern(t, 20, "tools/call", call("error", `{}`), "error")
	expect(code, 200, body)
	if !strings.Contains(body, `"code":-32000`) {
		t.Fatalf("the error tool answered %s", body)
	}
	code, body = r.modern(t, 21, "tools/call", call("fail", `{}`), "fail")
	expect(code, 200, body)
	// The body names add, the header another tool: 400 with -32020, and a
	// header-mismatch finding. The proxy labels by the routing headers, the
	// recorder by the body.
	code, body = r.modern(t, 22, "tools/call", call("add", `{"a":1,"b":2}`), "nope")
	expect(code, 400, body)
	code, body = r.modern(t, 23, "bogus/method", "", "")
	expect(code, 404, body)
	// Not MCP at all.
	code, _, body = r.post(t, "GET", "/healthz", "", nil)
	expect(code, 404, body)

	// 2025-11-25, stateful: streams open with a priming event.
	code, h, body := r.post(t, "POST", fixtures.PathStateful,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"metrics-test","version":"1"}}}`, nil)
	expect(code, 200, body)
	sh := map[string]string{protocol.HeaderSessionID: h.Get(protocol.HeaderSessionID), protocol.HeaderProtocolVersion: "2025-11-25"}
	code, _, body = r.post(t, "POST", fixtures.PathStateful, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, sh)
	expect(code, 202, body)
	code, _, body = r.post(t, "POST", fixtures.PathStateful, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, sh)
	expect(code, 200, body)
	code, _, body = r.post(t, "DELETE", fixtures.PathStateful, "", sh)
	expect(code, 204, body)

	r.sync(t)
	fams := scrape(t, r.reg)

	// Proxy: one histogram sample per answered request, by method and tool.
	perCall := map[string]float64{
		"method=server/discover,tool=":           1,
		"method=tools/call,tool=echo":            3,
		"method=tools/call,tool=error":           1,
		"method=tools/call,tool=fail":            1,
		"method=tools/call,tool=nope":            1,
		"method=other,tool=":                     1,
		"method=none,tool=":                      2, // GET /healthz, DELETE
		"method=initialize,tool=":                1,
		"method=notifications/initialized,tool=": 1,
		"method=tools/list,tool=":                1,
	}
	checkSeries(t, fams, "mcptape_proxy_upstream_latency_seconds", perCall)
	checkSeries(t, fams, "mcptape_proxy_overhead_seconds", perCall)
	sse := map[string]float64{
		"method=server/discover,tool=": 1,
		"method=tools/call,tool=echo":  3,
		"method=tools/call,tool=error": 1,
		"method=tools/call,tool=fail":  1,
		"method=initialize,tool=":      1,
		"method=tools/list,tool=":      1,
	}
	checkSeries(t, fams, "mcptape_proxy_sse_first_event_seconds", sse)
	checkSeries(t, fams, "mcptape_proxy_sse_headers_to_first_event_seconds", sse)
	checkSeries(t, fams, "mcptape_proxy_requests_total", map[string]float64{
		"code=200,method=server/discover":           1,
		"code=200,method=tools/call":                5,
		"code=400,method=tools/call":                1,
		"code=404,method=other":                     1,
		"code=404,method=none":                      1,
		"code=204,method=none":                      1,
		"code=200,method=initialize":                1,
		"code=202,method=notifications/initialized": 1,
		"code=200,method=tools/list":                1,
	})
	checkSeries(t, fams, "mcptape_proxy_requests_in_flight", map[string]float64{"": 0})
	checkSeries(t, fams, "mcptape_proxy_sse_streams_open", map[string]float64{})

	// Bytes: what the recorder saw cross the proxy, exchange by exchange.
	var in, out float64
	// And the upstream's instants: the exchanges note the two the upstream
	// latency is measured between, for as many exchanges.
	var upN uint64
	var upSum float64
	for _, s := range r.sessions(t) {
		for x, err := range r.store.Exchanges(t.Context(), s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			in += float64(x.RequestBytes)
			out += float64(x.ResponseBytes)
			if !x.Forwarded.IsZero() && !x.UpstreamHeaders.IsZero() {
				upN++
				upSum += x.UpstreamHeaders.Sub(x.Forwarded).Seconds()
				if x.Forwarded.Before(x.Start) || x.UpstreamHeaders.After(x.End) {
					t.Errorf("exchange %d: forwarded %v, upstream headers %v, outside %v … %v", x.ID, x.Forwarded, x.UpstreamHeaders, x.Start, x.End)
				}
			}
		}
	}
	var histN uint64
	var histSum float64
	for _, m := range fams["mcptape_proxy_upstream_latency_seconds"].GetMetric() {
		histN += m.Histogram.GetSampleCount()
		histSum += m.Histogram.GetSampleSum()
	}
	if upN != histN || math.Abs(upSum-histSum) > 1e-6*float64(upN) {
		t.Errorf("exchanges with the upstream's instants: %d spanning %vs; the histogram: %d samples, %vs", upN, upSum, histN, histSum)
	}
	if got := sum(series(fams, "mcptape_proxy_request_bytes_total")); got != in || in == 0 {
		t.Errorf("request bytes %v, the store's exchanges say %v", got, in)
	}
	if got := sum(series(fams, "mcptape_proxy_response_bytes_total")); got != out || out == 0 {
		t.Errorf("response bytes %v, the store's exchanges say %v", got, out)
	}

	// Capture: messages by direction, kind and method.
	checkSeries(t, fams, "mcptape_capture_messages_total", map[string]float64{
		"direction=c2s,kind=request,method=server/discover":                1,
		"direction=c2s,kind=request,method=tools/call":                     6,
		"direction=c2s,kind=request,method=other":                          1,
		"direction=c2s,kind=request,method=initialize":                     1,
		"direction=c2s,kind=request,method=tools/list":                     1,
		"direction=c2s,kind=notification,method=notifications/initialized": 1,
		"direction=s2c,kind=result,method=server/discover":                 1,
		"direction=s2c,kind=result,method=tools/call":                      4, // 3 echo, fail
		"direction=s2c,kind=error,method=tools/call":                       2, // error, the mismatch
		"direction=s2c,kind=error,method=other":                            1,
		"direction=s2c,kind=result,method=initialize":                      1,
		"direction=s2c,kind=result,method=tools/list":                      1,
		"direction=s2c,kind=frame,method=none":                             3, // the priming events, GET /healthz's plain 404
	})
	checkSeries(t, fams, "mcptape_capture_errors_total", map[string]float64{
		"code=-32000,method=tools/call,tool=error": 1,
		"code=-32020,method=tools/call,tool=add":   1,
		"code=-32601,method=other,tool=":           1,
	})
	checkSeries(t, fams, "mcptape_capture_tool_errors_total", map[string]float64{"tool=fail": 1})
	checkSeries(t, fams, "mcptape_capture_findings_total", map[string]float64{"kind=header-mismatch": 1})
	stored := series(fams, "mcptape_capture_messages_stored_total")[""]
	checkSeries(t, fams, "mcptape_capture_messages_stored_total", map[string]float64{"": 24})
	checkSeries(t, fams, "mcptape_capture_messages_lost_total", map[string]float64{"": 0})
	checkSeries(t, fams, "mcptape_capture_events_dropped_total", map[string]float64{"": 0})
	if st := r.rec.Stats(); float64(st.Stored) != stored {
		t.Errorf("stored %v in the scrape, %d in Stats", stored, st.Stored)
	}
	// One modern session, open; the legacy one was closed by DELETE; the
	// health check is not an MCP session.
	checkSeries(t, fams, "mcptape_capture_sessions_active", map[string]float64{"": 1})
	checkSeries(t, fams, "mcptape_capture_queue_events", map[string]float64{"": 0})
	checkSeries(t, fams, "mcptape_capture_queue_bytes", map[string]float64{"": 0})
	if size := series(fams, "mcptape_capture_store_size_bytes")[""]; size <= 0 {
		t.Errorf("store size %v", size)
	}

	// The histograms carry native buckets beside the classic ones (the
	// protobuf exposition Prometheus negotiates shows them).
	gathered, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gathered {
		if f.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range f.Metric {
			h := m.Histogram
			if h.GetSampleCount() == 0 {
				t.Errorf("%s %v: an empty series", f.GetName(), m.Label)
				continue
			}
			if h.Schema == nil || h.GetZeroThreshold() <= 0 || len(h.PositiveSpan) == 0 || len(h.Bucket) < 10 {
				t.Errorf("%s %v: schema %v, %d native spans, %d classic buckets", f.GetName(), m.Label, h.Schema, len(h.PositiveSpan), len(h.Bucket))
			}
		}
	}
}

// TestAnsweredCallIsCountedAndRecorded: the proxy ends a response before
// its handler has tidied up, but never before the call is counted and its
// end reported to the recorder: a client that has read a whole answer, and
// then scrapes or asks the recorder, finds it there, call after call.
func TestAnsweredCallIsCountedAndRecorded(t *testing.T) {
	r := newMetricsRig(t, fixtures.Handler(nil))
	const calls = 150
	for i := 1; i <= calls; i++ {
		code, body := r.modern(t, i, "tools/call", `"name":"echo","arguments":{"text":"hi"}`, "echo")
		if code != 200 || !strings.Contains(body, `"result"`) {
			t.Fatalf("call %d: %d %s", i, code, body)
		}
		if st := r.rec.Stats(); st.InFlight != 0 {
			t.Fatalf("call %d: the client has the whole answer, but the recorder has %d exchanges in flight", i, st.InFlight)
		}
		got := series(scrape(t, r.reg), "mcptape_proxy_requests_total")["code=200,method=tools/call"]
		if got != float64(i) {
			t.Fatalf("call %d: the client has the whole answer, but mcptape_proxy_requests_total counts %v calls", i, got)
		}
	}
	r.sync(t)
	if st := r.rec.Stats(); st.Exchanges != calls || st.Lost != 0 {
		t.Fatalf("recorder: %+v, want %d exchanges and none lost", st, calls)
	}
}

// TestMetricsGaugesInFlight: while a slow call streams its answer, the
// in-flight and open-stream gauges count it; after, they are back to 0.
func TestMetricsGaugesInFlight(t *testing.T) {
	r := newMetricsRig(t, fixtures.Handler(nil))
	type answer struct {
		code int
		body string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		meta := strings.Replace(modernMeta, `"_meta":{`, `"_meta":{"progressToken":"p1",`, 1)
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":1500,"steps":5},` + meta + `}}`
		req, _ := http.NewRequest("POST", r.px.URL+fixtures.PathStateless, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(protocol.HeaderProtocolVersion, "2026-07-28")
		req.Header.Set(protocol.HeaderMethod, "tools/call")
		req.Header.Set(protocol.HeaderName, "slow")
		res, err := r.px.Client().Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		done <- answer{res.StatusCode, string(b), err}
	}()
	seen := false
	var last map[string]*dto.MetricFamily
	for !seen {
		select {
		case a := <-done:
			t.Fatalf("the slow call ended (%d %v) before the scrape showed it in flight: in flight %v, streams %v", a.code, a.err,
				series(last, "mcptape_proxy_requests_in_flight"), series(last, "mcptape_proxy_sse_streams_open"))
		case <-time.After(20 * time.Millisecond):
		}
		last = scrape(t, r.reg)
		seen = series(last, "mcptape_proxy_requests_in_flight")[""] >= 1 &&
			series(last, "mcptape_proxy_sse_streams_open")["method=tools/call"] >= 1
	}
	a := <-done
	if a.err != nil || a.code != 200 || !strings.Contains(a.body, `"result"`) {
		t.Fatalf("the slow call: %d %v %s", a.code, a.err, a.body)
	}
	r.sync(t)
	fams := scrape(t, r.reg)
	checkSeries(t, fams, "mcptape_proxy_requests_in_flight", map[string]float64{"": 0})
	checkSeries(t, fams, "mcptape_proxy_sse_streams_open", map[string]float64{"method=tools/call": 0})
	checkSeries(t, fams, "mcptape_proxy_sse_first_event_seconds", map[string]float64{"method=tools/call,tool=slow": 1})
}

// TestMetricsStoreFailure: when the store fails, the scrape says so:
// messages lost and failed writes, while the traffic flows.
func TestMetricsStoreFailure(t *testing.T) {
	fs := &failingStore{Store: memstore.New()}
	reg := prometheus.NewRegistry()
	r := &metricsRig{rig: newRig(t, fixtures.Handler(nil), &rigOptions{store: fs,
		recorder: &capture.RecorderOptions{Registerer: reg}, proxy: &proxy.Options{Registerer: reg}}), reg: reg}
	call := func(id int) {
		t.Helper()
		code, body := r.modern(t, id, "tools/call", `"name":"echo","arguments":{"text":"x"}`, "echo")
		if code != 200 || !strings.Contains(body, `"result"`) {
			t.Fatalf("call %d: %d %s", id, code, body)
		}
		r.sync(t)
	}
	call(1)
	fams := scrape(t, r.reg)
	checkSeries(t, fams, "mcptape_capture_messages_lost_total", map[string]float64{"": 0})
	checkSeries(t, fams, "mcptape_capture_store_write_errors_total", map[string]float64{"": 0})
	fs.fail.Store(true)
	for i := range 3 {
		call(10 + i)
	}
	fs.fail.Store(false)
	call(20)
	fams = scrape(t, r.reg)
	st := r.rec.Stats()
	lost := series(fams, "mcptape_capture_messages_lost_total")[""]
	errs := series(fams, "mcptape_capture_store_write_errors_total")[""]
	if lost < 6 || errs < 1 || lost != float64(st.Lost) || errs != float64(st.StoreErrors) {
		t.Errorf("after 3 calls into a failing store: lost %v, write errors %v on the scrape; Stats %+v", lost, errs, st)
	}
	if stored := series(fams, "mcptape_capture_messages_stored_total")[""]; stored != float64(st.Stored) || stored < 4 {
		t.Errorf("stored %v on the scrape, Stats %+v", stored, st)
	}
}

func sum(m map[string]float64) float64 {
	n := 0.0
	for _, v := range m {
		n += v
	}
	return n
}

// TestMetricsCardinality is a hostile client and server: a thousand tool
// names, methods, error codes and HTTP statuses, names that are not valid
// UTF-8 or are huge. The registry keeps a bounded set of label values.
func TestMetricsCardinality(t *testing.T) {
	hostile := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		m := protocol.Decode(b)
		var status, code int
		fmt.Sscan(req.Header.Get("X-Status"), &status)
		fmt.Sscan(req.Header.Get("X-Code"), &code)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"no"}}`, m.ID, code)
	})
	r := newMetricsRig(t, hostile)
	const n = 1000
	names := make([]string, 0, n+3)
	for i := range n {
		names = append(names, fmt.Sprintf("tool-%04d", i))
	}
	names = append(names, "bad\xff\xfeutf8", strings.Repeat("long", 100), "ctl\x01char")
	send := func(i int, body string) {
		req, _ := http.NewRequest("POST", r.px.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Status", fmt.Sprint(200+i%800))
		req.Header.Set("X-Code", fmt.Sprint(-i*7))
		res, err := r.px.Client().Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	work := make(chan int)
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range work {
				if i < len(names) {
					name, _ := json.Marshal(names[i])
					send(i, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s}}`, i, name))
				} else {
					send(i, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"x/%d","params":{}}`, i, i))
				}
			}
		}()
	}
	for i := range len(names) + n {
		work <- i
	}
	close(work)
	for range 8 {
		<-done
	}
	r.sync(t)
	fams := scrape(t, r.reg)

	limits := map[string]int{
		"tool":   capture.MaxToolLabels + 2, // the kept names, other, and "" (not a tools/call)
		"method": 3,                         // tools/call, other, none
		"code":   len(statusCodes()) + 2,    // statuses net/http knows, other, none; JSON-RPC's and MCP's codes are fewer
	}
	total := 0
	for name, f := range fams {
		if !strings.HasPrefix(name, "mcptape_") {
			continue
		}
		values := map[string]map[string]bool{}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if values[l.GetName()] == nil {
					values[l.GetName()] = map[string]bool{}
				}
				values[l.GetName()][l.GetValue()] = true
			}
		}
		total += len(f.Metric)
		for label, vs := range values {
			if max, ok := limits[label]; ok && len(vs) > max {
				t.Errorf("%s: %d values of %s, want at most %d", name, len(vs), label, max)
			}
		}
	}
	tools := map[string]bool{}
	for _, m := range fams["mcptape_proxy_upstream_latency_seconds"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "tool" {
				tools[l.GetValue()] = true
			}
		}
	}
	if len(tools) != capture.MaxToolLabels+2 || !tools[capture.LabelOther] || !tools["tool-0000"] {
		t.Errorf("%d tool label values (want %d kept, other and none)", len(tools), capture.MaxToolLabels)
	}
	if other := series(fams, "mcptape_proxy_upstream_latency_seconds")["method=tools/call,tool=other"]; other < n-capture.MaxToolLabels {
		t.Errorf("%v calls counted as tool=other, want at least %d", other, n-capture.MaxToolLabels)
	}
	// Three histograms × (method, tool) pairs dominate; a few hundred series in all.
	if total > 2000 {
		t.Errorf("%d series after %d hostile requests", total, len(names)+n)
	}
	t.Logf("%d mcptape series after %d hostile requests", total, len(names)+n)
}

// statusCodes are the statuses net/http has a text for.
func statusCodes() []int {
	var out []int
	for c := 100; c < 1000; c++ {
		if http.StatusText(c) != "" {
			out = append(out, c)
		}
	}
	return out
}

func TestMetricsRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	u, _ := url.Parse("http://127.0.0.1:1")
	if _, err := proxy.New(&proxy.Options{Upstream: u, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	_, err := proxy.New(&proxy.Options{Upstream: u, Registerer: reg})
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Errorf("a second proxy on one registry: %v, want AlreadyRegisteredError", err)
	}
	// An unreachable upstream: a 502 the proxy made, no latency sample.
	reg = prometheus.NewRegistry()
	p, err := proxy.New(&proxy.Options{Upstream: u, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	defer px.Close()
	res, err := http.Post(px.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	fams := scrape(t, reg)
	checkSeries(t, fams, "mcptape_proxy_requests_total", map[string]float64{"code=502,method=ping": 1})
	checkSeries(t, fams, "mcptape_proxy_upstream_latency_seconds", map[string]float64{})
	checkSeries(t, fams, "mcptape_proxy_requests_in_flight", map[string]float64{"": 0})
}
