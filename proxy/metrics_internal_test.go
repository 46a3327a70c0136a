package proxy

import (
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
