package traces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcptape/mcptape/capture"
)

// Options configures an Exporter. Nil means defaults; every field's zero
// value is documented.
type Options struct {
	// Endpoint is where spans go, over OTLP/HTTP with protobuf: a base URL
	// (http://127.0.0.1:4318), to which /v1/traces is added, or a URL with
	// a path, used as it is. "" means the standard environment variables:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as it is), else
	// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); see [FromEnv].
	Endpoint string
	// Headers are sent with every export (an API key a backend wants).
	// OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_TRACES_HEADERS
	// (k=v,k2=v2) are read too. Nil means none beyond those.
	Headers map[string]string
	// ServiceName is the resource's service.name. "" means
	// OTEL_SERVICE_NAME, else "mcptape". OTEL_RESOURCE_ATTRIBUTES adds
	// resource attributes.
	ServiceName string
	// ServiceVersion is the resource's service.version; "" leaves it out.
	ServiceVersion string
	// QueueSize bounds the messages waiting to become spans; past it,
	// messages are left out of the traces and counted. Zero means 16384.
	QueueSize int
	// MaxOpen bounds the requests waiting for their answer; past it, the
	// oldest is ended as unanswered. Zero means 10000.
	MaxOpen int
	// OpenTimeout ends a request that is still unanswered after this long
	// (error.type "unanswered"). Zero means 10 minutes.
	OpenTimeout time.Duration
	// ExportTimeout bounds one export to the collector, retries included.
	// Zero means 10s.
	ExportTimeout time.Duration
	// Registerer receives the exporter's metrics. Nil means none.
	Registerer prometheus.Registerer
	// Logger receives export failures (once per run of failures). Nil
	// discards them.
	Logger *slog.Logger
}

// FromEnv reports whether the standard environment asks for trace export:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set
// and OTEL_TRACES_EXPORTER is not "none" (nor OTEL_SDK_DISABLED "true").
func FromEnv() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if v := os.Getenv("OTEL_TRACES_EXPORTER"); v != "" && !strings.Contains(v, "otlp") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Stats are the exporter's counters, safe to read at any time.
type Stats struct {
	// Exported spans reached the collector; Failed spans did not (their
	// export failed after retries); Dropped messages were left out of the
	// traces because the queue was full.
	Exported, Failed, Dropped int64
	// Open is the requests waiting for their answer now.
	Open int
}

// Exporter turns recorded batches into spans. Create it with New, give
// its OnBatch to the recorder (capture.RecorderOptions.OnBatch), and Close
// it after the recorder.
type Exporter struct {
	opts     Options
	log      *slog.Logger
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	endpoint string

	queue chan item
	done  chan struct{}
	// closeMu is held for reading while OnBatch sends, so that Close does
	// not close the queue under it.
	closeMu sync.RWMutex
	closed  bool

	exported, failed, dropped atomic.Int64
	open                      atomic.Int64
	failing                   atomic.Bool

	metrics *metrics

	// skip holds the sessions whose calls are exported elsewhere (Skip),
	// at most maxSkip of them, the oldest first out.
	skipMu    sync.Mutex
	skip      map[string]struct{}
	skipOrder []string
}

// maxSkip bounds the sessions an Exporter remembers to leave out: a
// session's records come in within seconds of its traffic, and a wrap's
// session is one per run of its server.
const maxSkip = 4096

// Skip leaves sessionID out of the spans from now on: its calls are
// exported by another process (a wrap with --otlp, whose records this
// process takes in from its spool).
func (e *Exporter) Skip(sessionID string) {
	if e == nil || sessionID == "" {
		return
	}
	e.skipMu.Lock()
	defer e.skipMu.Unlock()
	if _, ok := e.skip[sessionID]; ok {
		return
	}
	if e.skip == nil {
		e.skip = map[string]struct{}{}
	}
	if len(e.skipOrder) >= maxSkip {
		delete(e.skip, e.skipOrder[0])
		e.skipOrder = e.skipOrder[1:]
	}
	e.skip[sessionID] = struct{}{}
	e.skipOrder = append(e.skipOrder, sessionID)
}

// skipped drops the items of the sessions left out (Skip).
func (e *Exporter) skipped(items []item) []item {
	e.skipMu.Lock()
	defer e.skipMu.Unlock()
	if len(e.skip) == 0 {
		return items
	}
	return slices.DeleteFunc(items, func(it item) bool {
		id := ""
		switch {
		case it.sess != nil:
			id = it.sess.id
		case it.msg != nil:
			id = it.msg.session
		}
		_, ok := e.skip[id]
		return ok
	})
}

// New starts an exporter. It does not connect: the first export does, and
// a collector that is down costs only the spans it misses.
func New(ctx context.Context, opts *Options) (*Exporter, error) {
	e := &Exporter{}
	if opts != nil {
		e.opts = *opts
	}
	o := &e.opts
	if o.QueueSize <= 0 {
		o.QueueSize = 16384
	}
	if o.MaxOpen <= 0 {
		o.MaxOpen = 10000
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = 10 * time.Minute
	}
	if o.ExportTimeout <= 0 {
		o.ExportTimeout = 10 * time.Second
	}
	e.log = o.Logger
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	// The SDK reports its own errors to a global handler, which prints to
	// stderr by default; the exporter counts and logs failures itself.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		slog.Default().Debug("traces: OpenTelemetry SDK", "err", err)
	}))
	httpOpts := []otlptracehttp.Option{
		otlptracehttp.WithTimeout(o.ExportTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
			Enabled: true, InitialInterval: 500 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: o.ExportTimeout,
		}),
	}
	if o.Endpoint != "" {
		u, err := EndpointURL(o.Endpoint)
		if err != nil {
			return nil, err
		}
		e.endpoint = u
		httpOpts = append(httpOpts, otlptracehttp.WithEndpointURL(u))
	} else {
		e.endpoint = envEndpoint()
		if e.endpoint == "" {
			return nil, errors.New("no OTLP endpoint: give one (e.g. http://127.0.0.1:4318) or set OTEL_EXPORTER_OTLP_ENDPOINT")
		}
	}
	if len(o.Headers) > 0 {
		httpOpts = append(httpOpts, otlptracehttp.WithHeaders(o.Headers))
	}
	client, err := otlptracehttp.New(ctx, httpOpts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	res, err := newResource(ctx, o)
	if err != nil {
		return nil, err
	}
	e.metrics = newMetrics(o.Registerer, e)
	e.provider = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		// Blocking: when the collector is slow, the builder goroutine waits
		// here, the queue in front of it fills, and OnBatch leaves messages
		// out (counted) instead of the SDK dropping spans uncounted.
		sdktrace.WithBatcher(&countingExporter{SpanExporter: client, e: e},
			sdktrace.WithBlocking(), sdktrace.WithMaxQueueSize(4096),
			sdktrace.WithBatchTimeout(time.Second), sdktrace.WithExportTimeout(o.ExportTimeout+time.Second)),
	)
	e.tracer = e.provider.Tracer("github.com/mcptape/mcptape/capture/traces")
	e.queue = make(chan item, o.QueueSize)
	e.done = make(chan struct{})
	b := newBuilder(e)
	go b.run()
	return e, nil
}

// Endpoint is the URL spans are sent to.
func (e *Exporter) Endpoint() string { return e.endpoint }

// EndpointURL turns what a user gives as an OTLP/HTTP endpoint into the
// traces URL: a base URL gets /v1/traces, a URL with a path is kept.
func EndpointURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL, e.g. http://127.0.0.1:4318", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

func envEndpoint() string {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return v
	}
	if v := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		return strings.TrimSuffix(v, "/") + "/v1/traces"
	}
	return ""
}

func newResource(ctx context.Context, o *Options) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", "mcptape")}
	if o.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", o.ServiceVersion))
	}
	opts := []resource.Option{resource.WithAttributes(attrs...), resource.WithFromEnv()}
	if o.ServiceName != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.name", o.ServiceName)))
	}
	// The schema URL is left out: the attributes above follow no single
	// semantic-conventions release (the MCP ones are in development).
	res, err := resource.New(ctx, opts...)
	if err != nil && res == nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	return res, nil
}

// BatchHook is e.OnBatch as a recorder's hook
// (capture.RecorderOptions.OnBatch), or nil when there is no exporter, so
// that a recorder without one calls nothing per batch.
func (e *Exporter) BatchHook() func(*capture.Batch) {
	if e == nil {
		return nil
	}
	return e.OnBatch
}

// OnBatch hands a stored batch to the exporter. It copies what the spans
// need and never blocks: with the queue full, the batch's messages are
// left out of the traces and counted. It is capture.RecorderOptions.OnBatch
// (chain it with others).
func (e *Exporter) OnBatch(b *capture.Batch) {
	if e == nil || b == nil {
		return
	}
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return
	}
	items := e.skipped(itemsOf(b))
	for i, it := range items {
		select {
		case e.queue <- it:
		default:
			n := 0
			for _, rest := range items[i:] {
				if rest.msg != nil {
					n++
				}
			}
			e.dropped.Add(int64(n))
			e.metrics.dropped(n)
			return
		}
	}
}

// Stats returns the exporter's counters.
func (e *Exporter) Stats() Stats {
	return Stats{Exported: e.exported.Load(), Failed: e.failed.Load(), Dropped: e.dropped.Load(), Open: int(e.open.Load())}
}

// Close ends the requests still waiting for an answer (as unanswered),
// exports what is left within ctx, and stops. Call it after the
// recorder's Close, so that the last batches are in.
func (e *Exporter) Close(ctx context.Context) error {
	if e == nil {
		return nil
	}
	e.closeMu.Lock()
	if e.closed {
		e.closeMu.Unlock()
		return nil
	}
	e.closed = true
	close(e.queue)
	e.closeMu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.provider.Shutdown(ctx)
}

// countingExporter counts what reaches the collector and what does not.
type countingExporter struct {
	sdktrace.SpanExporter
	e *Exporter
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	e := c.e
	if err != nil {
		e.failed.Add(int64(len(spans)))
		e.metrics.failed(len(spans))
		if e.failing.CompareAndSwap(false, true) {
			e.log.Warn("traces: export to the OTLP endpoint failed; spans are lost until it answers (traffic is not affected)",
				"endpoint", e.endpoint, "spans", len(spans), "err", err)
		}
		return err
	}
	e.exported.Add(int64(len(spans)))
	e.metrics.exported(len(spans))
	if e.failing.CompareAndSwap(true, false) {
		e.log.Info("traces: the OTLP endpoint answers again", "endpoint", e.endpoint)
	}
	return nil
}

// metrics are the exporter's Prometheus series; a nil *metrics counts
// nothing.
type metrics struct {
	exportedC, failedC, droppedC prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, e *Exporter) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		exportedC: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcptape_traces_spans_exported_total", Help: "Spans the OTLP endpoint accepted."}),
		failedC:   prometheus.NewCounter(prometheus.CounterOpts{Name: "mcptape_traces_spans_failed_total", Help: "Spans whose export to the OTLP endpoint failed (after retries)."}),
		droppedC:  prometheus.NewCounter(prometheus.CounterOpts{Name: "mcptape_traces_messages_dropped_total", Help: "Recorded messages left out of the traces because the exporter's queue was full."}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcptape_traces_calls_open", Help: "Requests waiting for their answer before their span ends."},
		func() float64 { return float64(e.open.Load()) })
	for _, c := range []prometheus.Collector{m.exportedC, m.failedC, m.droppedC, open} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				e.log.Warn("traces: metric not registered", "err", err)
			}
		}
	}
	return m
}

func (m *metrics) exported(n int) {
	if m != nil {
		m.exportedC.Add(float64(n))
	}
}

func (m *metrics) failed(n int) {
	if m != nil {
		m.failedC.Add(float64(n))
	}
}

func (m *metrics) dropped(n int) {
	if m != nil {
		m.droppedC.Add(float64(n))
	}
}
