package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

// BenchmarkInterceptIdle measures what intercepting costs an echo call
// (stateless fixture endpoint, SSE answer) that no rule holds: without an
// interceptor; with one and no rule (record with a dashboard); with a
// request rule for another tool (the body is decoded and matched); with a
// response rule for another tool (matched on the request, so the answer
// takes the plain tee path); and with a rule that concerns this exchange's
// stream (a notification rule: the answer is split into events, none
// held). Each op is 5 rounds of 50 calls; allocs/call (the fewest of a
// round) and µs/call compare the paths (the process holds client, proxy
// and server, so absolute figures include all three). The target: an interceptor without a rule costs a call no
// allocation (at most 1 per call of measuring noise) — recording with a
// dashboard, where an interceptor always waits for rules, is free until a
// rule is set.
func BenchmarkInterceptIdle(b *testing.B) {
	const calls, rounds = 50, 5
	perCall := map[string]float64{}
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	cases := []struct {
		name  string
		rules []string
		icpt  bool
	}{
		{"none", nil, false},
		{"interceptor-no-rule", nil, true},
		{"request-rule-other-tool", []string{"tools/call:delete_*"}, true},
		{"response-rule-other-tool", []string{"response:tools/call:delete_*"}, true},
		{"stream-split", []string{"notification:notifications/never"}, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rec, err := capture.NewRecorder(context.Background(), memstore.New(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer rec.Close(context.Background())
			o := &proxy.Options{Upstream: u, Recorder: rec}
			if c.icpt {
				var rs []capture.InterceptRule
				for _, s := range c.rules {
					r, _ := capture.ParseInterceptRule(s)
					rs = append(rs, r)
				}
				if o.Intercept, err = capture.NewInterceptor(rs, nil); err != nil {
					b.Fatal(err)
				}
			}
			p, _ := proxy.New(o)
			px := serveProxy(b, p)
			defer px.Close()
			tr := &http.Transport{Proxy: nil}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			call := func(i int) {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`, i)
				req, _ := http.NewRequest("POST", px.URL+fixtures.PathStateless, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "echo")
				res, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				got, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if !bytes.Contains(got, []byte(`"result"`)) {
					b.Fatalf("bad response %q", got)
				}
			}
			for i := range 10 { // the connection and the pools, warm
				call(-1 - i)
			}
			// The recorder's work for the calls measured is inside the
			// window, whenever its goroutines get to it.
			sync := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := rec.Sync(ctx); err != nil {
					b.Fatal(err)
				}
			}
			// Allocations are counted process-wide, so anything else the
			// process does in a round (a GC's own work, a fresh pooled
			// connection) adds to it: the fewest of a few rounds is the
			// calls' own count.
			sync()
			b.ResetTimer()
			start := time.Now()
			best := math.Inf(1)
			for r := range rounds {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i := range b.N * calls {
					call(r*b.N*calls + i + 1)
				}
				sync()
				runtime.ReadMemStats(&after)
				best = min(best, float64(after.Mallocs-before.Mallocs)/float64(b.N*calls))
			}
			b.StopTimer()
			elapsed := time.Since(start)
			n := float64(rounds * b.N * calls)
			perCall[c.name] = best
			b.ReportMetric(perCall[c.name], "allocs/call")
			b.ReportMetric(float64(elapsed.Microseconds())/n, "µs/call")
		})
	}
	if extra := perCall["interceptor-no-rule"] - perCall["none"]; extra > 1 {
		b.Errorf("an interceptor without a rule costs %.1f allocations per call (target: none)", extra)
	}
}
