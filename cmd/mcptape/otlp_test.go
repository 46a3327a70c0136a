package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
)

// otlpReceiver is an OTLP/HTTP trace receiver, as a collector is one:
// POST /v1/traces with a protobuf ExportTraceServiceRequest.
type otlpReceiver struct {
	srv       *httptest.Server
	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []*commonpb.KeyValue
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			r.resources = append(r.resources, rs.GetResource().GetAttributes()...)
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return strconv.FormatInt(v.IntValue, 10)
			case *commonpb.AnyValue_BoolValue:
				return strconv.FormatBool(v.BoolValue)
			}
		}
	}
	return ""
}

func spanNamed(spans []*tracepb.Span, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// answeredRequests is the seqs of the requests of data's sessions that
// have an answer, by direction.
func answeredRequests(t *testing.T, data string) map[uint64]protocol.Direction {
	t.Helper()
	st, err := badgerstore.Open(data, &badgerstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	requests := map[uint64]protocol.Direction{}
	answered := map[uint64]bool{}
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			switch m.Kind {
			case protocol.KindRequest:
				requests[m.Seq] = m.Direction
			case protocol.KindResult, protocol.KindError:
				answered[m.Links.Request] = true
			}
		}
	}
	for seq := range requests {
		if !answered[seq] {
			delete(requests, seq)
		}
	}
	return requests
}

// TestOTLPTracesOfTSClient: record --otlp sends a span per call of a
// TypeScript SDK client's run against server-everything; the sampling
// request is a child of the tools/call that set it off, progress is a
// span event, the attributes follow the MCP conventions, and the client's
// traceparent (in params._meta) puts the calls in its trace.
func TestOTLPTracesOfTSClient(t *testing.T) {
	requirePeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	recv := newOTLPReceiver(t)
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", srv.URL(), "--listen", "127.0.0.1:0", "--data", data,
		"--dashboard", "off", "--otlp", recv.srv.URL)
	proxyURL := r.wait(t, "point your MCP client at ")
	if got := r.wait(t, "exporting each call as a span to "); got != recv.srv.URL+"/v1/traces" {
		t.Errorf("record says spans go to %q, want %s/v1/traces", got, recv.srv.URL)
	}
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rep, err := interop.RunClient(ctx, proxyURL, &interop.ClientOptions{Env: []string{"INTEROP_TRACEPARENT=00-" + traceID + "-" + parentID + "-01"}})
	if err != nil {
		t.Fatalf("the client through record: %v", err)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	spans := recv.all()

	// One span per answered request, each naming its request.
	want := answeredRequests(t, data)
	seen := map[string]bool{}
	for _, s := range spans {
		seq := attr(s, "mcptape.message.seq")
		if seq == "" || strings.Contains(s.Name, " round ") {
			continue
		}
		if seen[seq] {
			t.Errorf("two spans for request seq %s (%s)", seq, s.Name)
		}
		seen[seq] = true
	}
	for seq, dir := range want {
		if !seen[strconv.FormatUint(seq, 10)] {
			t.Errorf("no span for the answered %s request seq %d", dir, seq)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d spans for %d answered requests", len(seen), len(want))
	}

	calls := spanNamed(spans, "tools/call trigger-sampling-request")
	if len(calls) != 1 {
		t.Fatalf("%d spans named tools/call trigger-sampling-request, want 1; names: %v", len(calls), names(spans))
	}
	call := calls[0]
	for k, v := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "trigger-sampling-request", "gen_ai.operation.name": "execute_tool",
		"mcp.protocol.version": rep.ProtocolVersion, "mcptape.era": "legacy", "mcptape.leg": "reverse",
		"network.transport": "tcp", "network.protocol.name": "http", "server.address": "127.0.0.1",
		"server.port": strconv.Itoa(srv.Port()), "http.response.status_code": "200", "mcptape.direction": "c2s",
	} {
		if got := attr(call, k); got != v {
			t.Errorf("tools/call span: %s = %q, want %q", k, got, v)
		}
	}
	if attr(call, "jsonrpc.request.id") == "" || !strings.HasPrefix(attr(call, "mcp.session.id"), "") || attr(call, "mcp.session.id") == "" {
		t.Errorf("tools/call span lacks jsonrpc.request.id or mcp.session.id: %v", call.Attributes)
	}
	if call.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("tools/call span kind %v, want CLIENT", call.Kind)
	}
	if got := hex.EncodeToString(call.TraceId); got != traceID {
		t.Errorf("tools/call span's trace %s, want the client's %s (its traceparent)", got, traceID)
	}
	if got := hex.EncodeToString(call.ParentSpanId); got != parentID {
		t.Errorf("tools/call span's parent %s, want the client's span %s", got, parentID)
	}
	sampling := spanNamed(spans, "sampling/createMessage")
	if len(sampling) != 1 {
		t.Fatalf("%d sampling/createMessage spans, want 1", len(sampling))
	}
	if !bytes.Equal(sampling[0].ParentSpanId, call.SpanId) || !bytes.Equal(sampling[0].TraceId, call.TraceId) {
		t.Errorf("the sampling request's span is not a child of its tools/call: parent %x, call %x", sampling[0].ParentSpanId, call.SpanId)
	}
	if attr(sampling[0], "mcptape.direction") != "s2c" {
		t.Errorf("sampling span direction %q", attr(sampling[0], "mcptape.direction"))
	}
	if sampling[0].StartTimeUnixNano < call.StartTimeUnixNano || sampling[0].EndTimeUnixNano > call.EndTimeUnixNano {
		t.Errorf("the sampling span does not lie within its call's")
	}

	long := spanNamed(spans, "tools/call trigger-long-running-operation")
	if len(long) != 1 {
		t.Fatalf("%d trigger-long-running-operation spans", len(long))
	}
	progress := 0
	for _, ev := range long[0].Events {
		if ev.Name == "notifications/progress" {
			progress++
		}
	}
	if progress == 0 || progress != rep.Counts.Progress {
		t.Errorf("the long-running call's span has %d progress events; the client saw %d progress notifications", progress, rep.Counts.Progress)
	}
	// A request without a traceparent starts a trace of its own.
	for _, s := range spanNamed(spans, "initialize") {
		if hex.EncodeToString(s.TraceId) == traceID {
			t.Errorf("initialize (sent without traceparent) joined the client's trace")
		}
	}
	service := ""
	recv.mu.Lock()
	for _, kv := range recv.resources {
		if kv.Key == "service.name" {
			service = kv.Value.GetStringValue()
		}
	}
	recv.mu.Unlock()
	if service != "mcptape" {
		t.Errorf("resource service.name %q, want mcptape", service)
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// traceHeader adds a traceparent header to every request.
type traceHeader struct {
	rt http.RoundTripper
	tp string
}

func (h traceHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", h.tp)
	return h.rt.RoundTrip(r)
}

// TestOTLPTracesMRTRAndHeader: the rounds of a 2026-07-28 multi round-trip
// request are child spans of one span for the call, which ends with the
// last round; a traceparent HTTP header is honoured like one in _meta.
func TestOTLPTracesMRTRAndHeader(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	recv := newOTLPReceiver(t)
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateless, "--listen", "127.0.0.1:0", "--data", data,
		"--dashboard", "off", "--otlp", recv.srv.URL)
	proxyURL := r.wait(t, "point your MCP client at ")
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	hc := &http.Client{Transport: traceHeader{rt: &http.Transport{Proxy: nil}, tp: "00-" + traceID + "-b7ad6b7169203331-01"}}
	rep, err := fixtures.RunClient(within(t, time.Minute), proxyURL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolSample}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("client through record: %v %v", err, failures(rep))
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	spans := recv.all()
	calls := spanNamed(spans, "tools/call "+fixtures.ToolSample)
	if len(calls) != 1 {
		t.Fatalf("%d spans for the sample call, want 1 logical call; names: %v", len(calls), names(spans))
	}
	call := calls[0]
	if attr(call, "mcptape.mrtr") != "true" || attr(call, "mcptape.era") != "modern" || attr(call, "mcp.protocol.version") != "2026-07-28" {
		t.Errorf("the MRTR call's span: %v", call.Attributes)
	}
	rounds := 0
	var lastEnd uint64
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "tools/call "+fixtures.ToolSample+" round ") {
			rounds++
			if !bytes.Equal(s.ParentSpanId, call.SpanId) {
				t.Errorf("%s is not a child of its logical call", s.Name)
			}
			lastEnd = max(lastEnd, s.EndTimeUnixNano)
		}
	}
	if rounds < 2 {
		t.Errorf("%d round spans, want at least 2 (input_required, then the retry)", rounds)
	}
	if call.EndTimeUnixNano != lastEnd {
		t.Errorf("the logical call ends at %d, its last round at %d", call.EndTimeUnixNano, lastEnd)
	}
	if got := hex.EncodeToString(call.TraceId); got != traceID {
		t.Errorf("the call's trace %s, want the traceparent header's %s", got, traceID)
	}
}

// TestOTLPCollectorDown: a collector that does not answer costs no call
// and no record; the spans it misses are counted in the metrics and said
// once in the log.
func TestOTLPCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data,
		"--dashboard", "off", "--metrics", "127.0.0.1:0", "--otlp", down)
	proxyURL := r.wait(t, "point your MCP client at ")
	metricsURL := r.wait(t, "Prometheus metrics at ")
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	rep, err := fixtures.RunClient(within(t, time.Minute), proxyURL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho, fixtures.ToolSample}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("client through record with the collector down: %v %v", err, failures(rep))
	}
	fixtures.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if v := metricValue(string(body), "mcptape_traces_spans_failed_total"); v == 0 {
			return fmt.Errorf("no failed export counted:\n%s", grepLines(string(body), "mcptape_traces"))
		}
		return nil
	})
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	if !strings.Contains(r.out.String(), "0 lost") {
		t.Errorf("the record lost messages with the collector down: %s", r.out.String())
	}
	if n := strings.Count(r.errOut.String(), "export to the OTLP endpoint failed"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, r.errOut.String())
	}
}

func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name)), 64)
			return v
		}
	}
	return 0
}

func grepLines(text, sub string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestOTLPWrapAndOwnerExportOnce: a wrap with --otlp exports its server's
// calls itself, and the dashboard that owns the store and exports too
// leaves them out, so each call is one span; a wrap without --otlp has its
// calls exported by the owner.
func TestOTLPWrapAndOwnerExportOnce(t *testing.T) {
	r := newOTLPReceiver(t)
	data := t.TempDir()
	_, _, stop := startCmd(t, "mcptape: dashboard of", "dashboard", "--data", data, "--listen", "127.0.0.1:0", "--otlp", r.srv.URL)
	const calls = 4
	want := map[string]int{}
	for _, name := range []string{"exports-itself", "exports-nothing"} {
		var flags []string
		if name == "exports-itself" {
			flags = []string{"--otlp", r.srv.URL}
		}
		sent, got := runWrapped(t, data, name, calls, flags...)
		want[name] = sent + got
	}
	fixtures.Eventually(t, 10*time.Second, func() error {
		if got := countStdio(storeOf(t, data)); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("the dashboard's store holds %v, want %v", got, want)
		}
		return nil
	})
	if code := stop(); code != 0 { // its last spans go out as it stops
		t.Errorf("dashboard exited %d", code)
	}
	ids := map[string]int{} // tools/call spans by their request id
	for _, s := range spanNamed(r.all(), "tools/call echo") {
		ids[attr(s, "jsonrpc.request.id")]++
	}
	// Both wraps' calls have the ids 2 to 1+calls: each id twice.
	for i := 2; i < 2+calls; i++ {
		if n := ids[strconv.Itoa(i)]; n != 2 {
			t.Errorf("request id %d: %d tools/call spans, want 2 (one a wrap): %v", i, n, ids)
		}
	}
}
