package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcptape/mcptape/fixtures"
)

// No container engine runs where the tests run, so the compose stack and
// the image are checked by reading them: what they start, publish and
// mount exists and fits together, every command line they give mcptape is
// one it takes, and every panel of the provisioned Grafana dashboard asks
// for a metric mcptape exports.

type composeFile struct {
	Services map[string]struct {
		Image       string                                `yaml:"image"`
		Build       *struct{ Context, Dockerfile string } `yaml:"build"`
		Command     []string                              `yaml:"command"`
		Ports       []string                              `yaml:"ports"`
		Volumes     []string                              `yaml:"volumes"`
		Environment map[string]string                     `yaml:"environment"`
		DependsOn   []string                              `yaml:"depends_on"`
		Healthcheck *struct {
			Disable bool `yaml:"disable"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

const repoRoot = "../.."

func readCompose(t *testing.T) *composeFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml is not valid YAML: %v", err)
	}
	return &c
}

// helpFlags is the flags `mcptape ARGS -h` lists.
func helpFlags(t *testing.T, args ...string) map[string]bool {
	t.Helper()
	_, _, stderr := mcptape(t, append(args, "-h")...)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(stderr, -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		t.Fatalf("mcptape %s -h listed no flags:\n%s", strings.Join(args, " "), stderr)
	}
	return flags
}

func TestComposeStack(t *testing.T) {
	c := readCompose(t)
	want := []string{"client", "fixture", "grafana", "jaeger", "mcptape", "prometheus"}
	var got []string
	for name := range c.Services {
		got = append(got, name)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("compose services %v, want %v", got, want)
	}
	built := ""
	for name, s := range c.Services {
		if s.Image == "" {
			t.Errorf("service %s has no image", name)
		}
		if s.Build != nil {
			built = s.Image
			if _, err := os.Stat(filepath.Join(repoRoot, s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("service %s builds from %s, which is missing: %v", name, s.Build.Dockerfile, err)
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %q beyond loopback", name, p)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("service %s mounts %s, which is missing", name, src)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("service %s uses the volume %s, which the file does not declare", name, src)
			}
		}
		for _, d := range s.DependsOn {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("service %s depends on %s, which is not a service", name, d)
			}
		}
	}
	if built == "" {
		t.Fatal("no service builds mcptape's image")
	}
	// Every service of mcptape's image runs a command mcptape has, with
	// flags it takes; only the recorder keeps the image's health check.
	metricsPort, otlp := "", ""
	for name, s := range c.Services {
		if s.Image != built {
			continue
		}
		args := s.Command
		sub := 1
		if args[0] == "fixture" {
			sub = 2
		}
		flags := helpFlags(t, args[:sub]...)
		for i, a := range args[sub:] {
			if strings.HasPrefix(a, "--") && !flags[strings.TrimPrefix(a, "--")] {
				t.Errorf("service %s runs `mcptape %s` with %s, which it does not take", name, strings.Join(args[:sub], " "), a)
			}
			if a == "--metrics" {
				metricsPort = args[sub+i+1][strings.LastIndex(args[sub+i+1], ":")+1:]
			}
			if a == "--otlp" {
				otlp = args[sub+i+1]
			}
		}
		recorder := args[0] == "record"
		if (s.Healthcheck == nil || !s.Healthcheck.Disable) != recorder {
			t.Errorf("service %s: the image's health check (the recorder's /readyz) should be on for the recorder only", name)
		}
	}
	if metricsPort != "9464" {
		t.Errorf("the recorder's --metrics port is %q; the image's health check and Prometheus use 9464", metricsPort)
	}
	if otlp != "http://jaeger:4318" {
		t.Errorf("the recorder sends spans to %q, want Jaeger's OTLP/HTTP http://jaeger:4318", otlp)
	}

	// Prometheus scrapes the recorder's metrics listener.
	var prom struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "cmd/mcptape/compose/prometheus.yml", &prom)
	if len(prom.ScrapeConfigs) == 0 || len(prom.ScrapeConfigs[0].StaticConfigs) == 0 ||
		!slices.Contains(prom.ScrapeConfigs[0].StaticConfigs[0].Targets, "mcptape:"+metricsPort) {
		t.Errorf("Prometheus does not scrape mcptape:%s: %+v", metricsPort, prom)
	}
	// Grafana's data source is that Prometheus, and its dashboards folder
	// is where compose mounts mcptape's dashboard.
	var ds struct {
		Datasources []struct{ Type, URL string } `yaml:"datasources"`
	}
	readYAML(t, "cmd/mcptape/compose/grafana-datasources.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("Grafana's data source: %+v", ds)
	}
	var dp struct {
		Providers []struct {
			Options struct{ Path string } `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "cmd/mcptape/compose/grafana-dashboards.yml", &dp)
	mounted := false
	for _, v := range c.Services["grafana"].Volumes {
		parts := strings.Split(v, ":")
		if len(dp.Providers) == 1 && parts[0] == "./cmd/mcptape/grafana" && parts[1] == dp.Providers[0].Options.Path {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("Grafana's dashboard provider reads %+v, where compose does not mount cmd/mcptape/grafana", dp)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestDockerfile: a multi-stage build of a static binary, run as a
// non-root user with a volume for the store, a health check that asks
// the recorder, and mcptape as the entrypoint.
func TestDockerfile(t *testing.T) {
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var froms, copies []string
	directives := map[string]string{}
	sc := bufio.NewScanner(f)
	var line string
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		line += l
		if strings.HasSuffix(line, "\\") {
			line = strings.TrimSuffix(line, "\\") + " "
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			froms = append(froms, rest)
		case "COPY":
			copies = append(copies, rest)
		}
		directives[strings.ToUpper(word)] = rest
		line = ""
	}
	if len(froms) < 2 || !strings.Contains(froms[0], " AS build") {
		t.Errorf("not a multi-stage build: FROM %v", froms)
	}
	if !strings.Contains(directives["RUN"], "CGO_ENABLED=0 go build") || !strings.Contains(directives["RUN"], "./cmd/mcptape") {
		t.Errorf("the build does not make a static mcptape: RUN %s", directives["RUN"])
	}
	if u := directives["USER"]; u == "" || strings.HasPrefix(u, "0") || strings.HasPrefix(u, "root") {
		t.Errorf("the image runs as %q, want a non-root user", u)
	}
	if !strings.Contains(directives["VOLUME"], "/data") || !strings.Contains(directives["ENV"], "MCPTAPE_DATA=/data") {
		t.Errorf("the store is not a volume at /data: VOLUME %s, ENV %s", directives["VOLUME"], directives["ENV"])
	}
	if !strings.Contains(directives["HEALTHCHECK"], `"/mcptape", "healthcheck"`) || !strings.Contains(directives["HEALTHCHECK"], ":9464/readyz") {
		t.Errorf("the health check does not ask the recorder's /readyz: %s", directives["HEALTHCHECK"])
	}
	if directives["ENTRYPOINT"] != `["/mcptape"]` {
		t.Errorf("ENTRYPOINT %s, want mcptape", directives["ENTRYPOINT"])
	}
	for _, c := range copies {
		if strings.HasPrefix(c, "--from") {
			continue
		}
		for _, src := range strings.Fields(c)[:len(strings.Fields(c))-1] {
			if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
				t.Errorf("COPY %s: %s is not in the repository", c, src)
			}
		}
	}
	if _, err := os.Stat("Dockerfile.dockerignore"); err != nil {
		t.Errorf("no Dockerfile.dockerignore: the build would send node_modules along: %v", err)
	}
	// The health check's command is one mcptape has.
	if code, _, stderr := mcptape(t, "healthcheck", "-h"); code != 0 && !strings.Contains(stderr, "-url") {
		t.Errorf("mcptape healthcheck -h: %d %s", code, stderr)
	}
}

// TestGrafanaDashboardMetrics: every panel of the dashboard that compose
// provisions (and `mcptape metrics grafana` prints) asks for metrics a
// recorder exports; a renamed metric would leave a panel empty.
func TestGrafanaDashboardMetrics(t *testing.T) {
	raw, err := os.ReadFile(grafanaDashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the Grafana dashboard is not valid JSON: %v", err)
	}
	exported := exportedMetrics(t)
	name := regexp.MustCompile(`\b((?:mcptape|go|process)_[a-z0-9_]+)`)
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				continue
			}
			queries++
			for _, m := range name.FindAllString(tg.Expr, -1) {
				base := m
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					base = strings.TrimSuffix(base, suf)
				}
				if !exported[m] && !exported[base] {
					t.Errorf("panel %q asks for %s, which a recorder does not export", p.Title, m)
				}
			}
		}
	}
	if queries < 10 {
		t.Errorf("only %d queries in the dashboard", queries)
	}
}

// exportedMetrics runs a recorder with --metrics and the fixture client
// through it (errors and tool failures included), and returns the metric
// names its /metrics serves.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	recv := newOTLPReceiver(t)
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data,
		"--dashboard", "off", "--metrics", "127.0.0.1:0", "--otlp", recv.srv.URL)
	proxyURL := r.wait(t, "point your MCP client at ")
	metricsURL := r.wait(t, "Prometheus metrics at ")
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	if _, err := fixtures.RunClient(within(t, time.Minute), proxyURL, &fixtures.ClientOptions{HTTPClient: hc}); err != nil {
		t.Fatal(err)
	}
	// A frame that is not JSON: a finding, so that its counter has a series.
	if resp, err := hc.Post(proxyURL, "application/json", strings.NewReader("{not json")); err == nil {
		resp.Body.Close()
	}
	if code, _, e := mcptape(t, "ls", "--data", data); code != 0 { // a read through the recorder waits for its writes
		t.Fatalf("ls: %s", e)
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE ([a-z0-9_]+) `).FindAllStringSubmatch(string(body), -1) {
		out[m[1]] = true
	}
	return out
}
