package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

func TestMetricsAddr(t *testing.T) {
	for in, want := range map[string]string{
		"9464": "127.0.0.1:9464", ":9464": "127.0.0.1:9464", "0": "127.0.0.1:0",
		"0.0.0.0:9464": "0.0.0.0:9464", "[::1]:9464": "[::1]:9464", "localhost:9464": "localhost:9464",
		"nope": "", "1.2.3.4": "", "99999": "",
	} {
		got, err := metricsAddr(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("metricsAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestRecordMetrics runs `mcptape record --metrics 0` (a bare port:
// loopback), sends traffic through it, scrapes /metrics as Prometheus does,
// and checks that every metric the Grafana dashboard queries is there.
func TestRecordMetrics(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateless, "--listen", "127.0.0.1:0",
		"--data", t.TempDir(), "--metrics", "0")
	proxyURL := r.wait(t, "point your MCP client at ")
	metricsURL := r.wait(t, "Prometheus metrics at ") // --metrics's; the dashboard's follows
	if !strings.HasPrefix(metricsURL, "http://127.0.0.1:") || !strings.HasSuffix(metricsURL, "/metrics") {
		t.Errorf("metrics at %s, want loopback for a bare port", metricsURL)
	}

	// Traffic that touches every family: SSE answers, a JSON-RPC error, a
	// tool failure, a header-mismatch finding.
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	for i, c := range []struct{ tool, header string }{{"echo", "echo"}, {"echo", "echo"}, {"error", "error"}, {"fail", "fail"}, {"echo", "mismatch"}} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"x"},%s}}`, i, c.tool, meta)
		req, _ := http.NewRequest("POST", proxyURL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(protocol.HeaderProtocolVersion, "2026-07-28")
		req.Header.Set(protocol.HeaderMethod, "tools/call")
		req.Header.Set(protocol.HeaderName, c.header)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}

	// The recorder writes within a second; scrape until it has.
	scrapeUntil(t, hc, metricsURL, func(fams map[string]*dto.MetricFamily) error {
		if f := fams["mcptape_capture_messages_stored_total"]; f == nil || f.Metric[0].Counter.GetValue() != 10 {
			return fmt.Errorf("the scrape does not show 10 stored messages: %v", f)
		}
		return nil
	})
	// A scrape reads each family in turn, not all at one instant: the one
	// that saw the last message stored may have read other families before
	// it was decoded. The next scrape sees everything.
	fams := scrapeText(t, hc, metricsURL)
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "mcptape_build_info",
		"mcptape_proxy_upstream_latency_seconds", "mcptape_capture_store_size_bytes"} {
		if fams[name] == nil {
			t.Errorf("the scrape has no %s", name)
		}
	}
	if got := histCount(fams["mcptape_proxy_upstream_latency_seconds"], "tool", "echo"); got != 2 {
		t.Errorf("upstream latency samples for echo: %d, want 2", got)
	}

	t.Run("grafana", func(t *testing.T) {
		var printed syncBuffer
		if code := run(context.Background(), []string{"metrics", "grafana"}, &printed, io.Discard); code != 0 {
			t.Fatalf("metrics grafana exited %d", code)
		}
		checkDashboard(t, []byte(printed.String()), fams)
	})

	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	if _, err := hc.Get(metricsURL); err == nil {
		t.Error("the metrics listener outlived record")
	}
}

// TestLatencyChartMatchesMetric: after known traffic through `mcptape
// record`, the dashboard's latency chart (its default measure, upstream
// latency, read from the stored exchanges) counts the same samples per
// method and per tool as mcptape_proxy_upstream_latency_seconds on the same
// process's /metrics, and its p50 lies in the histogram bucket that holds
// the metric's median.
func TestLatencyChartMatchesMetric(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	dashURL, out, _ := startCmd(t, "dashboard at ", "record", "--upstream", up.URL+fixtures.PathStateless, "--listen", "127.0.0.1:0",
		"--data", t.TempDir(), "--dashboard", "127.0.0.1:0")
	proxyURL := outputValue(out.String(), "point your MCP client at ")
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	id := 0
	for _, c := range []struct {
		method, tool string
		n            int
	}{{"tools/call", "echo", 9}, {"tools/call", "add", 4}, {"tools/list", "", 3}, {"server/discover", "", 1}} {
		for range c.n {
			id++
			modernCall(t, hc, proxyURL, id, c.method, c.tool)
		}
	}

	type series struct {
		Method string  `json:"method"`
		Tool   string  `json:"tool"`
		N      int     `json:"n"`
		P50    float64 `json:"p50"`
	}
	var chart struct {
		Measure string   `json:"measure"`
		Methods []series `json:"methods"`
		Tools   []series `json:"tools"`
	}
	c := newDashClient(t, dashURL)
	fixtures.Eventually(t, 10*time.Second, func() error {
		c.do(http.MethodGet, "/api/v1/latency", &chart)
		n := 0
		for _, m := range chart.Methods {
			n += m.N
		}
		if n != id {
			return fmt.Errorf("the chart does not count the %d exchanges: %+v", id, chart)
		}
		return nil
	})
	if chart.Measure != "upstream" {
		t.Errorf("the chart's default measure is %q, want upstream", chart.Measure)
	}
	fams := scrapeText(t, hc, dashMetrics(dashURL))
	hist := fams["mcptape_proxy_upstream_latency_seconds"]
	check := func(what string, s series, label, value string) {
		t.Helper()
		n, lo, hi := medianBucket(hist, label, value)
		if uint64(s.N) != n || n == 0 {
			t.Errorf("%s: the chart counts %d samples, the histogram %d", what, s.N, n)
			return
		}
		if p50 := s.P50 / 1000; p50 <= lo || p50 > hi {
			t.Errorf("%s: the chart's p50 %vs is outside the histogram's median bucket (%v, %v]", what, p50, lo, hi)
		}
	}
	for _, m := range chart.Methods {
		check("method "+m.Method, m, "method", m.Method)
	}
	for _, x := range chart.Tools {
		check("tool "+x.Tool, x, "tool", x.Tool)
	}
	if len(chart.Methods) != 3 || len(chart.Tools) != 2 {
		t.Errorf("chart series: methods %+v, tools %+v", chart.Methods, chart.Tools)
	}
}

// medianBucket sums the histogram's series with label=value and returns
// their sample count and the bounds of the classic bucket that holds the
// median (the nearest-rank one, as the chart's p50).
func medianBucket(f *dto.MetricFamily, label, value string) (n uint64, lo, hi float64) {
	cum := map[float64]uint64{}
	var bounds []float64
	for _, m := range f.GetMetric() {
		match := false
		for _, l := range m.Label {
			match = match || (l.GetName() == label && l.GetValue() == value)
		}
		if !match {
			continue
		}
		n += m.Histogram.GetSampleCount()
		for _, b := range m.Histogram.Bucket {
			if _, ok := cum[b.GetUpperBound()]; !ok {
				bounds = append(bounds, b.GetUpperBound())
			}
			cum[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	slices.Sort(bounds)
	rank := (n + 1) / 2
	for _, b := range bounds {
		if cum[b] >= rank {
			return n, lo, b
		}
		lo = b
	}
	return n, lo, math.Inf(1)
}

// modernCall sends one 2026-07-28 request with its routing headers through
// the proxy at proxyURL and reads the whole answer; tool "" is a method
// without one.
func modernCall(t *testing.T, hc *http.Client, proxyURL string, id int, method, tool string) {
	t.Helper()
	params := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	switch tool {
	case "":
	case "add":
		params = `"name":"add","arguments":{"a":1,"b":2},` + params
	case "error":
		params = `"name":"error","arguments":{},` + params
	default:
		params = fmt.Sprintf(`"name":%q,"arguments":{"text":"x"},`, tool) + params
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, id, method, params)
	req, _ := http.NewRequest("POST", proxyURL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(protocol.HeaderProtocolVersion, "2026-07-28")
	req.Header.Set(protocol.HeaderMethod, method)
	if tool != "" {
		req.Header.Set(protocol.HeaderName, tool)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, tool, res.StatusCode, b)
	}
}

// scrapeUntil scrapes url until ok returns nil, for up to 10 seconds (the
// recorder writes within a second), and fails with ok's last error.
func scrapeUntil(t *testing.T, hc *http.Client, url string, ok func(map[string]*dto.MetricFamily) error) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	fixtures.Eventually(t, 10*time.Second, func() error {
		fams = scrapeText(t, hc, url)
		if err := ok(fams); err != nil {
			return fmt.Errorf("the scrape of %s: %w", url, err)
		}
		return nil
	})
	return fams
}

// familyValues maps a family's label sets ("k=v,k=v", sorted) to the
// counter or gauge value, or to a histogram's sample count.
func familyValues(fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range fams[name].GetMetric() {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		slices.Sort(ls)
		k := strings.Join(ls, ",")
		switch {
		case m.Counter != nil:
			out[k] = m.Counter.GetValue()
		case m.Gauge != nil:
			out[k] = m.Gauge.GetValue()
		case m.Histogram != nil:
			out[k] = float64(m.Histogram.GetSampleCount())
		}
	}
	return out
}

// scrapeText scrapes u as Prometheus does; a token in u's query goes as a
// bearer token (a dashboard's /metrics).
func scrapeText(t *testing.T, hc *http.Client, u string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if tok := req.URL.Query().Get("token"); tok != "" {
		req.URL.RawQuery = ""
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return fams
}

func histCount(f *dto.MetricFamily, label, value string) uint64 {
	if f == nil {
		return 0
	}
	var n uint64
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == label && l.GetValue() == value {
				n += m.Histogram.GetSampleCount()
			}
		}
	}
	return n
}

// metricName finds the metric names in a PromQL expression: identifiers
// that are not followed by "(" (functions) and are not label names or
// keywords; ours all start with one of these prefixes.
var metricName = regexp.MustCompile(`\b((?:mcptape|go|process)_[a-zA-Z0-9_]+)\b`)

func checkDashboard(t *testing.T, b []byte, fams map[string]*dto.MetricFamily) {
	var d struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q uid %q", d.Title, d.UID)
	}
	var exprs []string
	for _, v := range d.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		titles[p.Title] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") || strings.Count(tg.Expr, "{") != strings.Count(tg.Expr, "}") {
				t.Errorf("panel %q: unbalanced query %s", p.Title, tg.Expr)
			}
		}
	}
	used := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllStringSubmatch(e, -1) {
			name := m[1]
			if fams[name] == nil {
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if base := strings.TrimSuffix(name, suffix); base != name && fams[base].GetType() == dto.MetricType_HISTOGRAM {
						name = base
					}
				}
			}
			used[name] = true
			if fams[name] == nil {
				t.Errorf("the dashboard queries %s, which the scrape lacks", m[1])
			}
		}
	}
	// Every mcptape family is on the dashboard.
	for name := range fams {
		if strings.HasPrefix(name, "mcptape_") && !used[name] {
			t.Errorf("%s is in the scrape but on no panel", name)
		}
	}
	for _, want := range []string{"Upstream latency p50 / p99 by method and tool", "Proxy overhead p50 / p99 by method",
		"First SSE event delay p50 / p99", "Request rate by status", "Messages by kind", "JSON-RPC errors by code",
		"Findings by kind", "Capture queue depth", "Stored vs lost", "Store size"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}
