package proxy

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkExchangeMetrics is the metrics' share of one proxied tools/call
// answered by an SSE stream: labelling from the body, the histograms, the
// counters and gauges.
func BenchmarkExchangeMetrics(b *testing.B) {
	m, err := newMetrics(prometheus.NewRegistry(), false)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`)
	h := http.Header{"Content-Type": {"text/event-stream"}}
	for _, headers := range []bool{false, true} {
		name := "body"
		if headers {
			name = "headers"
		}
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest("POST", "/mcp", strings.NewReader(string(body)))
			if headers {
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "echo")
			}
			b.ReportAllocs()
			for b.Loop() {
				var x exchangeMetrics
				now := time.Now()
				x.begin(m, nil, req, body, true, now)
				x.forwarded, x.upHeaders = now, now
				x.wroteHeader(200, h, false)
				x.wrote(100)
				x.wrote(100)
				x.end()
			}
		})
	}
}

// TestRequestsCountedByStatus: a pair's requests are counted under the
// status each was answered with, as the statuses change from one request
// to the next (the pair keeps the series of the last one at hand).
func TestRequestsCountedByStatus(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, true)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	req := httptest.NewRequest("POST", "/mcp", strings.NewReader(string(body)))
	rt := &route{label: "a"}
	for _, code := range []int{200, 200, 500, 200, 0, 599, 299, 200} {
		var x exchangeMetrics
		x.beginLater(m, rt, req, body, true, time.Now())
		if code != 0 {
			x.wroteHeader(code, http.Header{}, true)
		}
		x.end()
	}
	want := map[string]float64{"200": 4, "500": 1, "none": 1, "other": 2}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcptape_proxy_requests_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			var status, route, method string
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case "code":
					status = l.GetValue()
				case "route":
					route = l.GetValue()
				case "method":
					method = l.GetValue()
				}
			}
			if route != "a" || method != "tools/call" {
				t.Errorf("a series labelled route %q method %q", route, method)
			}
			got[status] += s.GetCounter().GetValue()
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("requests by status %v, want %v", got, want)
	}
}
