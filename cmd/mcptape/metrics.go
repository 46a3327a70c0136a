package main

import (
	"context"
	"embed"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// grafanaFS holds the Grafana dashboard for mcptape's metrics.
//
//go:embed grafana/mcptape-dashboard.json
var grafanaFS embed.FS

const grafanaDashboard = "grafana/mcptape-dashboard.json"

const metricsUsage = "grafana"

// runMetrics is `mcptape metrics grafana`: print the dashboard, for
// Grafana's Dashboards → New → Import.
func runMetrics(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		return groupHelp(stderr, "metrics", "grafana")
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("say what to print: mcptape metrics grafana")
	}
	if args[0] != "grafana" {
		return usagef("unknown metrics command %q; the one there is: grafana", args[0])
	}
	fs := newFlags("metrics grafana", stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: mcptape metrics grafana\n\n"+
			"Prints a Grafana dashboard (JSON) for the metrics that `mcptape record` serves (at /metrics on\n"+
			"its dashboard's listener, and on --metrics ADDR); import it in Grafana (Dashboards → New → Import)\nand pick your Prometheus data source.\n")
	}
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	b, err := grafanaFS.ReadFile(grafanaDashboard)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

// metricsAddr is where --metrics listens: a bare port ("9464" or ":9464")
// means loopback, so that metrics are not exposed by accident.
func metricsAddr(v string) (string, error) {
	v = strings.TrimSpace(v)
	port := strings.TrimPrefix(v, ":")
	if !strings.Contains(port, ":") {
		v = "127.0.0.1:" + port
	}
	host, port, err := net.SplitHostPort(v)
	if _, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil {
		return "", fmt.Errorf("%q is not a port or host:port like 9464 or 0.0.0.0:9464", v)
	}
	return net.JoinHostPort(host, port), nil
}

// newMetricsRegistry is the registry `record --metrics` serves: the
// proxy's and the recorder's metrics (registered by them), the Go runtime's
// and the process's, and mcptape_build_info.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcptape_build_info",
			Help:        "Always 1; the version label is mcptape's version.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	return reg
}

// registerer is reg as a prometheus.Registerer, nil (not a typed nil) when
// reg is nil, which the proxy and the recorder take as "no metrics".
func registerer(reg *prometheus.Registry) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return reg
}

// metricsServer serves /metrics on its own listener.
type metricsServer struct {
	srv *http.Server
	ln  net.Listener
}

func serveMetrics(addr string, reg *prometheus.Registry, ready readiness) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w (choose another address)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	healthHandlers(mux, ready)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "mcptape: metrics are at /metrics; /healthz says whether it runs, /readyz whether it records")
	})
	s := &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the metrics endpoint, with a wildcard host shown as loopback.
func (s *metricsServer) URL() string {
	host, port, _ := net.SplitHostPort(s.ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/metrics"
}

func (s *metricsServer) close(ctx context.Context) {
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
}
