package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures"
)

// TestHealthEndpoints: /healthz says the recorder runs, /readyz that it
// records (its store takes writes, its upstream answers), and `mcptape
// healthcheck` turns that into an exit code for a container's
// HEALTHCHECK.
func TestHealthEndpoints(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", t.TempDir(),
		"--dashboard", "off", "--metrics", "127.0.0.1:0")
	metricsURL := r.wait(t, "Prometheus metrics at ")
	base := strings.TrimSuffix(metricsURL, "/metrics")
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get("/readyz")
	var rep healthReport
	if err := json.Unmarshal([]byte(body), &rep); err != nil || code != 200 || !rep.Ready {
		t.Errorf("/readyz with the upstream up: %d %s", code, body)
	}
	if c, out, e := mcptape(t, "healthcheck", "--url", base+"/readyz"); c != 0 || !strings.Contains(out, "ready") {
		t.Errorf("healthcheck of a ready recorder: exit %d\n%s%s", c, out, e)
	}

	up.CloseClientConnections()
	up.Close() // the upstream is gone: the recorder runs, but records nothing
	code, body = get("/readyz")
	if err := json.Unmarshal([]byte(body), &rep); err != nil || code != http.StatusServiceUnavailable || rep.Ready ||
		len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "is not reachable") {
		t.Errorf("/readyz with the upstream down: %d %s", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz with the upstream down: %d, want 200 (the process runs)", code)
	}
	c, _, e := mcptape(t, "healthcheck", "--url", base+"/readyz")
	if c != exitError || !strings.Contains(e, "not ready: upstream") {
		t.Errorf("healthcheck with the upstream down: exit %d, %s", c, e)
	}
	c, _, e = mcptape(t, "healthcheck", "--url", "http://127.0.0.1:1/readyz")
	if c != exitError || !strings.Contains(e, "--metrics") {
		t.Errorf("healthcheck with nothing listening: exit %d, %s (it should say what to check)", c, e)
	}
}

// TestPrometheusScrapesRecorder: Debian's Prometheus, with the config the
// compose stack provisions (the target pointed at this test's recorder),
// scrapes a recorder and answers a PromQL query for the per-method
// latency histogram.
func TestPrometheusScrapesRecorder(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatalf("prometheus is not installed (apt-get install prometheus): %v", err)
		}
		t.Skipf("prometheus is not installed (apt-get install prometheus): %v", err)
	}
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", t.TempDir(),
		"--dashboard", "off", "--metrics", "127.0.0.1:0")
	proxyURL := r.wait(t, "point your MCP client at ")
	metricsURL, _ := url.Parse(r.wait(t, "Prometheus metrics at "))
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	if rep, err := fixtures.RunClient(within(t, time.Minute), proxyURL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho, fixtures.ToolSample}}); err != nil || failures(rep) != nil {
		t.Fatalf("client through record: %v %v", err, failures(rep))
	}

	provisioned, err := os.ReadFile("compose/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(provisioned), `"mcptape:9464"`) {
		t.Fatalf("the provisioned config no longer scrapes mcptape:9464:\n%s", provisioned)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(provisioned), "mcptape:9464", metricsURL.Host, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	promAddr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prom := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	var logs syncBuffer
	prom.Stdout, prom.Stderr = &logs, &logs
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = prom.Wait() }()

	query := func(q string) ([]promSample, error) {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []promSample `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, err
		}
		if out.Status != "success" {
			return nil, fmt.Errorf("query %s: %s", q, out.Error)
		}
		return out.Data.Result, nil
	}
	// The provisioned interval is 5s: the first scrape comes within it.
	q := `histogram_quantile(0.5, sum by (le, method) (mcptape_proxy_upstream_latency_seconds_bucket{job="mcptape"}))`
	fixtures.Eventually(t, 40*time.Second, func() error {
		res, err := query(q)
		if err == nil {
			for _, s := range res {
				if s.Metric["method"] == "tools/call" && len(s.Value) == 2 && s.Value[1] != "NaN" {
					return nil
				}
			}
		}
		return fmt.Errorf("Prometheus gave no tools/call latency (last: %v %v); its log:\n%s", res, err, logs.String())
	})
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}
