package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptape/mcptape/capture/traces"
)

// otlpUsage is the --otlp flag's help, the same on every command that
// records.
const otlpUsage = "export each recorded call as an OpenTelemetry span over OTLP/HTTP to `URL` (e.g. http://127.0.0.1:4318, to which /v1/traces is added); the OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT and OTEL_SERVICE_NAME variables work too"

func otlpFlag(fs *flag.FlagSet, dst *string) { fs.StringVar(dst, "otlp", "", otlpUsage) }

// startTraces starts exporting spans when --otlp names an endpoint or the
// standard variables do; nil (and no error) otherwise. Export failures
// never touch traffic: they are logged once and counted.
func startTraces(ctx context.Context, endpoint string, reg prometheus.Registerer, logger *slog.Logger, stdout io.Writer) (*traces.Exporter, error) {
	if endpoint == "" && !traces.FromEnv() {
		return nil, nil
	}
	if endpoint != "" {
		if _, err := traces.EndpointURL(endpoint); err != nil {
			return nil, usagef("--otlp: %v", err)
		}
	}
	opts := &traces.Options{Endpoint: endpoint, ServiceVersion: buildVersion(), Registerer: reg, Logger: logger}
	// The standard variables bound an export (milliseconds), retries
	// included.
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"} {
		if ms, err := strconv.Atoi(os.Getenv(v)); err == nil && ms > 0 {
			opts.ExportTimeout = time.Duration(ms) * time.Millisecond
			break
		}
	}
	e, err := traces.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("--otlp: %w", err)
	}
	if stdout != nil {
		fmt.Fprintf(stdout, "mcptape: exporting each call as a span to %s\n", e.Endpoint())
	}
	return e, nil
}

// closeTraces exports what is left, bounded: a collector that is down
// must not hold mcptape up when it stops.
func closeTraces(e *traces.Exporter, logger *slog.Logger) {
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil && logger != nil {
		logger.Warn("traces: not every span was exported before stopping", "err", err)
	}
}
