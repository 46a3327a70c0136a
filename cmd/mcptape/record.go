package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/capture/traces"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/ca"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/memlimit"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/proxy"
)

type recordConfig struct {
	upstream     string
	routes       []string // NAME=URL
	routesOnly   bool     // --routes: a recorder of routes, maybe none yet
	forward      bool
	maxTunnels   int
	mitm         []string
	listen       string
	data         string
	redact       []string
	noRedact     bool
	upstreamCA   string
	allowAnyHost bool
	idleGap      time.Duration
	logLevel     string
	memoryLimit  string
	metrics      string
	otlp         string // --otlp: where spans go
	// dashboard is where the dashboard listens; "" or "off" means none.
	// dashboardFixed says the address was asked for (not the default).
	dashboard      string
	dashboardToken string
	dashboardFixed bool
	// Store bounds (sizes as flags give them, e.g. 256MiB).
	minFree, maxStoreSize, maxRecordBytes string
	maxAge                                age // 0: sessions kept whatever their age
	// The proxy's bounds (zero: the proxy's defaults).
	upstreamTimeout time.Duration
	maxRequestBody  int64
	shutdownTimeout time.Duration
	// Intercepting and answering for the client (intercept.go).
	intercept        []string
	interceptTimeout time.Duration
	answers          []string
}

// Defaults of the store's bounds (documented in docs/recording.md).
const (
	defaultMinFree        = "256MiB"
	defaultMaxRecordBytes = "16MiB"
)

// defaultShutdownTimeout is how long a stopping recorder waits for the
// calls in flight: long enough for a tool call that is nearly done, short
// enough that Ctrl-C feels like a stop.
const defaultShutdownTimeout = 10 * time.Second

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("record", stderr)
	var c recordConfig
	fs.StringVar(&c.upstream, "upstream", "", "the MCP server's URL, e.g. http://127.0.0.1:3001/mcp (or --route, or --forward)")
	fs.Var((*stringList)(&c.routes), "route", "record a server under /`NAME=URL`'s NAME/ on the proxy, e.g. github=https://api.example.com/mcp is reached at http://127.0.0.1:7411/github/mcp (repeatable; --upstream is the one-route form)")
	fs.BoolVar(&c.routesOnly, "routes", false, "serve routes, none yet or those --route names: mcptape attach CLIENT NAME adds a client's HTTP server as a route while this runs")
	fs.BoolVar(&c.forward, "forward", false, "also be an HTTP(S) proxy: set HTTPS_PROXY/HTTP_PROXY to the proxy's URL in a client and it records plain-HTTP requests; CONNECT tunnels pass unrecorded unless --mitm names their host")
	fs.IntVar(&c.maxTunnels, "max-tunnels-per-client", proxy.DefaultMaxTunnelsPerClient, "with --forward, the most CONNECT tunnels one client (by IP address) may hold open at a time; past it a CONNECT gets 429")
	fs.Var((*stringList)(&c.mitm), "mitm", "with --forward, intercept and record the HTTPS tunnels to hosts matching this `GLOB` (e.g. '*.example.com'; repeatable), with mcptape's own CA (`mcptape ca init`), which the client must trust")
	fs.StringVar(&c.listen, "listen", defaultListen, "address the proxy listens on")
	fs.StringVar(&c.data, "data", defaultDataDir(), "directory of the capture store")
	fs.Var((*stringList)(&c.redact), "redact-header", "also redact this header (repeatable)")
	fs.BoolVar(&c.noRedact, "no-redact", false, "store secrets unredacted (local debugging only)")
	fs.StringVar(&c.upstreamCA, "upstream-ca", "", "PEM file of CA certificates to trust for an https upstream")
	fs.BoolVar(&c.allowAnyHost, "allow-any-host", false, "accept any Host header on a loopback listener (turns off DNS-rebinding protection)")
	fs.DurationVar(&c.idleGap, "idle-gap", 5*time.Minute, "silence after which a 2026-07-28 client's next request starts a new session")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.memoryLimit, "memory-limit", defaultMemoryLimit, "soft limit of the Go heap, e.g. 100MiB, raised (up to four times) for as long as the heap's live data needs more; 0 turns it off (GOMEMLIMIT, when set, wins over the default)")
	fs.StringVar(&c.metrics, "metrics", "", "also serve Prometheus metrics at http://`ADDR`/metrics on their own listener, without a token (the dashboard's listener serves them at /metrics anyway); a bare port (9464) means 127.0.0.1; 'mcptape metrics grafana' prints a dashboard")
	otlpFlag(fs, &c.otlp)
	fs.StringVar(&c.dashboard, "dashboard", dashboard.DefaultAddr, "serve the web dashboard at `ADDR`; off turns it off")
	fs.StringVar(&c.dashboardToken, "dashboard-token", "", "the token the dashboard asks for, on loopback too (default: a random one, printed once in its URL)")
	fs.StringVar(&c.minFree, "min-free", defaultMinFree, "free disk space to keep: under it, recording pauses (traffic still flows) until there is room; 0 turns this off, and a full disk can then stop mcptape")
	fs.StringVar(&c.maxStoreSize, "max-store-size", "0", "bound the store's size on disk, e.g. 10GiB: past it, the oldest finished sessions are deleted; 0 means no bound")
	fs.Var(&c.maxAge, "max-age", "delete sessions whose latest traffic is older than this as recording runs, e.g. 30d (d is a day, w a week); open sessions are kept; unset keeps every session")
	fs.StringVar(&c.maxRecordBytes, "max-record-bytes", defaultMaxRecordBytes, "the largest message stored whole; a larger one is forwarded whole and stored cut, with a finding (headers: at most 1MiB)")
	fs.DurationVar(&c.upstreamTimeout, "upstream-timeout", proxy.DefaultUpstreamTimeout, "how long to wait for the upstream's response head before answering 504 (a stream, once begun, may stay idle); 0 waits forever")
	maxBody := fs.String("max-request-body", "64MiB", "the largest request body forwarded (larger: 413); 0 means no limit")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "on Ctrl-C or SIGTERM, how long calls in flight may take to finish before they are cut")
	fs.Var((*stringList)(&c.intercept), "intercept", "hold messages that match `RULE` in flight until you forward, edit, answer or fail them on the dashboard's Intercept page: METHOD[:NAME] for requests, e.g. 'tools/call:delete_*' or elicitation/create; response:METHOD[:NAME] for the server's answers; notification:METHOD (repeatable; globs; rules can also be set on the page)")
	fs.DurationVar(&c.interceptTimeout, "intercept-timeout", capture.DefaultInterceptTimeout, "how long a held message waits for you before it goes on unchanged (the record says so); 0 waits forever")
	fs.Var((*stringList)(&c.answers), "answer", "answer the server's KIND requests in place of the client: KIND=profile[:NAME] from a testing profile (the default one without NAME), or KIND=person on the dashboard's Intercept page; KIND is sampling, elicitation or roots; adds the capability when the client does not declare it (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	n, err := parseSize(*maxBody)
	if err != nil {
		return usagef("--max-request-body: %v", err)
	}
	if c.maxRequestBody = n; n == 0 {
		c.maxRequestBody = -1
	}
	if c.upstreamTimeout < 0 || c.shutdownTimeout < 0 {
		return usagef("--upstream-timeout and --shutdown-timeout take a duration like 30s or 5m")
	}
	if c.upstreamTimeout == 0 {
		c.upstreamTimeout = -1 // the proxy's "no limit"
	}
	if c.interceptTimeout < 0 {
		return usagef("--intercept-timeout takes a duration like 30s or 5m (0 waits forever)")
	}
	c.dashboardFixed = flagSet(fs, "dashboard")
	if err := applyMemoryLimit(c.memoryLimit, flagSet(fs, "memory-limit"), memlimit.Follow); err != nil {
		return usagef("--memory-limit: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case c.upstream == "" && len(c.routes) == 0 && !c.forward && !c.routesOnly:
		return usagef("say what to record: --upstream URL (one server, e.g. --upstream http://127.0.0.1:3001/mcp), --route NAME=URL (several), --routes (servers added by `mcptape attach`), or --forward (an HTTP(S) proxy)")
	case c.upstream != "" && (len(c.routes) > 0 || c.routesOnly):
		return usagef("--upstream and --route do not mix: --upstream is the one-route form; give each server as --route NAME=URL")
	case len(c.mitm) > 0 && !c.forward:
		return usagef("--mitm intercepts the tunnels of the forward proxy: add --forward")
	}
	logger, err := newLogger(stderr, c.logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	started := time.Now()
	rs, err := startRecording(ctx, &c, logger)
	if err != nil {
		return err
	}
	warnNoRoom(stderr, c.data, rs.store)
	if c.forward && !loopbackAddr(rs.srv.Addr()) {
		fmt.Fprintf(stderr, "mcptape: WARNING: --forward on %s, which is not a loopback address, is an open proxy: anyone who reaches it can use it, to this machine's own services too. Listen on 127.0.0.1 unless that is what you want.\n", rs.srv.Addr())
	}
	if c.noRedact {
		fmt.Fprintln(stderr, "mcptape: WARNING: --no-redact: Authorization headers, cookies, API keys and session ids are stored as they are. Do not share this store.")
	}
	rs.printHow(stdout, &c)
	if rs.traces != nil {
		fmt.Fprintf(stdout, "mcptape: exporting each call as a span to %s\n", rs.traces.Endpoint())
	}
	if rs.metrics != nil {
		fmt.Fprintf(stdout, "mcptape: Prometheus metrics at %s\n", rs.metrics.URL())
	}
	if rs.dash != nil {
		fmt.Fprintf(stdout, "mcptape: dashboard at %s\n", rs.dash.url())
		fmt.Fprintf(stdout, "mcptape: %s\n", rs.dash.metricsNote())
	}
	fmt.Fprintf(stdout, "mcptape: look with `mcptape ls --data %s` (works while recording); stop with Ctrl-C\n", c.data)
	errc := make(chan error, 1)
	go func() { errc <- rs.srv.Serve() }()
	select {
	case <-ctx.Done():
		if rs.proxy.InFlight() > 0 {
			fmt.Fprintf(stdout, "mcptape: stopping: calls in flight have up to %v to finish (--shutdown-timeout); streams without a call are cut now, new calls refused\n", rs.shutdown)
		}
	case err = <-errc:
	}
	stats, cerr := rs.close()
	saveLost(c.data, started, stats, "")
	fmt.Fprintf(stdout, "mcptape: stopped: %d exchanges, %d messages stored, %d lost\n", stats.Exchanges, stats.Stored, stats.Lost+stats.Dropped)
	return errors.Join(err, cerr)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// recording is a running recorder: store, pipeline, proxy, local API.
type recording struct {
	store    *badgerstore.Store
	rec      *capture.Recorder
	srv      *proxy.Server
	api      *http.Server
	unann    func()
	upstream string
	upURL    *url.URL // --upstream, nil with routes or the forward proxy alone
	metrics  *metricsServer
	traces   *traces.Exporter // nil without --otlp
	dash     *runningDashboard
	replays  *replayServers
	ingest   *ingesting
	// live is rec, for the dashboard's status, which may ask before rec
	// is set.
	live     atomic.Pointer[capture.Recorder]
	proxy    *proxy.Proxy
	routed   bool   // the proxy serves routes, which attach can add to
	data     string // the data directory
	log      *slog.Logger
	shutdown time.Duration // how long close waits for calls in flight
	// icpt holds intercepted messages (nil without rules and dashboard).
	icpt *capture.Interceptor
	// backend is the dashboard's (nil without one).
	backend *recordBackend
}

func startRecording(ctx context.Context, c *recordConfig, logger *slog.Logger) (_ *recording, err error) {
	var up *url.URL
	if c.upstream != "" {
		up, err = url.Parse(c.upstream)
		if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
			return nil, usagef("--upstream %q is not an http(s) URL like http://127.0.0.1:3001/mcp", c.upstream)
		}
	}
	routes, err := parseRoutes(c.routes)
	if err != nil {
		return nil, err
	}
	var fwd *proxy.ForwardOptions
	if c.forward {
		fwd = &proxy.ForwardOptions{MITM: c.mitm, MaxTunnelsPerClient: c.maxTunnels}
		if c.maxTunnels <= 0 {
			return nil, usagef("--max-tunnels-per-client %d: want 1 or more", c.maxTunnels)
		}
		if len(c.mitm) > 0 {
			auth, err := ca.Load(caDir(c.data))
			if errors.Is(err, ca.ErrNoCA) {
				return nil, fmt.Errorf("--mitm needs mcptape's own CA to intercept HTTPS, and %s has none: run `mcptape ca init --data %s`, then make your client trust the file `mcptape ca path` prints (see \"mcptape's own CA\" in docs/recording.md)", c.data, c.data)
			}
			if err != nil {
				return nil, fmt.Errorf("--mitm: loading mcptape's CA: %w", err)
			}
			fwd.Certificate = auth.Leaf
		}
	}
	var tlsConf *tls.Config
	if c.upstreamCA != "" {
		pem, err := os.ReadFile(c.upstreamCA)
		if err != nil {
			return nil, fmt.Errorf("--upstream-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--upstream-ca %s holds no PEM certificate", c.upstreamCA)
		}
		tlsConf = &tls.Config{RootCAs: pool}
	}
	// The metrics are collected whenever something serves them: the
	// dashboard's listener (/metrics beside the dashboard) or --metrics.
	dashOn := c.dashboard != "" && c.dashboard != dashboardOff
	var reg *prometheus.Registry
	var metricsAt string
	if c.metrics != "" {
		if metricsAt, err = metricsAddr(c.metrics); err != nil {
			return nil, usagef("--metrics: %v", err)
		}
	}
	if c.metrics != "" || dashOn {
		reg = newMetricsRegistry()
	}
	so, maxRecord, err := c.storeOptions()
	if err != nil {
		return nil, err
	}
	so.Logger, so.Registerer = logger, registerer(reg)
	store, err := openWrite(c.data, so)
	if err != nil {
		return nil, err
	}
	rs := &recording{store: store, shutdown: c.shutdownTimeout, routed: up == nil, data: c.data, log: logger}
	if rs.log == nil {
		rs.log = slog.New(slog.DiscardHandler)
	}
	if up != nil {
		rs.upstream = up.Redacted()
		rs.upURL = up
	}
	if rs.shutdown <= 0 {
		rs.shutdown = defaultShutdownTimeout
	}
	defer func() {
		if err != nil {
			rs.close()
		}
	}()
	ro := &capture.RecorderOptions{
		Logger: logger, IdleGap: c.idleGap, MaxMessageSize: maxRecord,
		Redact:     capture.RedactOptions{Disabled: c.noRedact, Headers: c.redact},
		Registerer: registerer(reg),
		// Drift: every tools/list is compared with its upstream's
		// baseline, read again whenever `baseline accept` changes it.
		Baselines: capture.OpenBaselines(c.data),
	}
	if up != nil {
		ro.Upstream = up.Scheme + "://" + up.Host
	}
	if c.data != "" {
		// Large SSE events arriving wait here rather than in memory.
		ro.SpillDir = filepath.Join(c.data, "spill")
	}
	if !c.noRedact {
		if ro.Redact.PseudonymKey, err = pseudonymKey(c.data); err != nil {
			return nil, err
		}
	}
	rules, err := parseRules(c.intercept)
	if err != nil {
		return nil, err
	}
	specs, err := parseAnswers(c.answers)
	if err != nil {
		return nil, err
	}
	if len(rules) > 0 && !dashOn {
		return nil, usagef("--intercept holds messages until you decide on the dashboard's Intercept page: drop --dashboard off")
	}
	if dashOn {
		// Always there with a dashboard, so that rules can be set on its
		// Intercept page at run time; without an enabled rule it costs a
		// nil check per exchange.
		timeout := c.interceptTimeout
		if timeout == 0 {
			timeout = -1
		}
		// Held messages name their session by its stored key.
		if rs.icpt, err = capture.NewInterceptor(rules, &capture.InterceptorOptions{Timeout: timeout, Pseudonym: ro.Redact.Pseudonym}); err != nil {
			return nil, usagef("--intercept: %v", err)
		}
	}
	answerer, err := newClientAnswerer(c.data, specs, rs.icpt, logger)
	if err != nil {
		return nil, err
	}
	if dashOn {
		rs.replays = &replayServers{store: store, data: c.data, logger: logger}
		rs.backend = &recordBackend{dashBackend: &dashBackend{data: c.data, replays: rs.replays}, rs: rs}
		if rs.dash, err = startDashboard(&dashboardConfig{store: store, data: c.data, addr: c.dashboard, flag: "--dashboard",
			fixed: c.dashboardFixed, token: c.dashboardToken, feed: dashboard.FeedPublish, metrics: metricsHandler(reg),
			backend: rs.backend, intercept: rs.icpt, logger: logger}); err != nil {
			return nil, err
		}
		ro.OnBatch = fanOut(ro.OnBatch, rs.dash.srv.Publish)
	}
	if rs.traces, err = startTraces(ctx, c.otlp, registerer(reg), logger, nil); err != nil {
		return nil, err
	}
	ro.OnBatch = fanOut(ro.OnBatch, rs.traces.BatchHook())
	rs.rec, err = capture.NewRecorder(ctx, store, ro)
	if err != nil {
		return nil, err
	}
	rs.live.Store(rs.rec)
	// The wraps' spools: this process owns the store now.
	rs.ingest = startIngest(c.data, rs.rec, store, logger, rs.traces)
	if c.routesOnly {
		// The routes attach added before, unless --route names them anew.
		saved, err := savedRoutes(c.data)
		if err != nil {
			return nil, err
		}
		for _, sr := range saved {
			if !slices.ContainsFunc(routes, func(r proxy.Route) bool { return r.Name == sr.Name }) {
				routes = append(routes, sr)
			}
		}
	}
	if up == nil && routes == nil {
		routes = []proxy.Route{} // a recorder of routes, none yet
	}
	p, err := proxy.New(&proxy.Options{Upstream: up, Routes: routes, Forward: fwd, Recorder: rs.rec, Logger: logger, TLSConfig: tlsConf, AllowAnyHost: c.allowAnyHost,
		Registerer: registerer(reg), UpstreamTimeout: c.upstreamTimeout, MaxRequestBody: c.maxRequestBody,
		Intercept: rs.icpt, Answer: answerer.proxyAnswers()})
	if err != nil {
		return nil, err
	}
	rs.proxy = p
	if rs.backend != nil {
		rs.backend.proxy.Store(p)
	}
	rs.srv, err = proxy.Listen(c.listen, p, &proxy.ServerOptions{Logger: logger})
	if err != nil {
		return nil, err
	}
	if rs.dash != nil {
		rs.dash.srv.SetProxyURL(rs.srv.URL())
	}
	if err := rs.serveAPI(c); err != nil {
		return nil, err
	}
	if c.metrics != "" {
		if rs.metrics, err = serveMetrics(metricsAt, reg, rs.readiness()); err != nil {
			return nil, err
		}
		p.AddOwnAddr(rs.metrics.ln.Addr().String())
	}
	// A tunnel into this process's other listeners is refused like one
	// into the proxy's own.
	if rs.dash != nil {
		if u, err := url.Parse(rs.dash.base); err == nil {
			p.AddOwnAddr(u.Host)
		}
	}
	return rs, nil
}

// storeOptions turns the store's flags into options, and returns the
// largest message recorded whole.
func (c *recordConfig) storeOptions() (*badgerstore.Options, int, error) {
	o := &badgerstore.Options{}
	minFree, err := parseSize(orDefault(c.minFree, defaultMinFree))
	if err != nil {
		return nil, 0, usagef("--min-free: %v", err)
	}
	if o.MinFree = minFree; minFree == 0 {
		o.MinFree = -1 // off
	}
	if o.MaxSize, err = parseSize(orDefault(c.maxStoreSize, "0")); err != nil {
		return nil, 0, usagef("--max-store-size: %v", err)
	}
	o.MaxAge = time.Duration(c.maxAge)
	maxRecord, err := parseSize(orDefault(c.maxRecordBytes, defaultMaxRecordBytes))
	if err != nil || maxRecord < 1<<10 || maxRecord > 1<<30 {
		return nil, 0, usagef("--max-record-bytes %q: want a size from 1KiB to 1GiB, like 16MiB", c.maxRecordBytes)
	}
	return o, int(maxRecord), nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// status is what the dashboard's banner reports: whether recording is
// paused for space, and what was lost.
func (rs *recording) status() dashboard.RecordingStatus {
	st := storeStatus(rs.store)
	st.Recording = true
	if rec := rs.live.Load(); rec != nil {
		s := rec.Stats()
		st.Stored, st.Lost = s.Stored, s.Lost+s.Dropped
	}
	return st
}

// storeStatus is what the dashboard's status reports of the store itself:
// room, size and retention.
func storeStatus(store *badgerstore.Store) dashboard.RecordingStatus {
	sp := store.Space()
	return dashboard.RecordingStatus{Paused: sp.Paused, Reason: sp.Reason, Since: sp.Since, Free: sp.Free, MinFree: sp.MinFree,
		Size: sp.Size, MaxSize: sp.MaxSize, MaxAge: int64(sp.MaxAge / time.Second), Pruned: sp.Deleted}
}

// serveAPI lets `ls` and `show` read the store while this process holds it.
func (rs *recording) serveAPI(c *recordConfig) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("starting the local API: %w", err)
	}
	token := remotestore.NewToken()
	started := time.Now()
	listen := rs.srv.URL()
	rs.api = &http.Server{Handler: remotestore.Handler(rs.store, token, &remotestore.HandlerOptions{
		Status: func() remotestore.Status {
			return remotestore.Status{PID: os.Getpid(), Listen: listen, Upstream: rs.upstream, Routes: rs.routeInfos(), Started: started, Stats: rs.rec.Stats(),
				Paused: pausedReason(rs.store)}
		},
		AddRoute: rs.addRoute(),
		// A read sees everything forwarded before it: `export` right
		// after a run must not find a session's record stale.
		Sync: rs.rec.Sync,
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rs.api.Serve(ln) }()
	rs.proxy.AddOwnAddr(ln.Addr().String())
	a := remotestore.Announcement{PID: os.Getpid(), API: "http://" + ln.Addr().String(), Token: token}
	if rs.dash != nil {
		a.Dashboard = rs.dash.url()
	}
	rs.unann, err = remotestore.WriteAnnouncement(c.data, a)
	if err != nil {
		return fmt.Errorf("announcing the local API in %s: %w", c.data, err)
	}
	return nil
}

// sync waits until the recorder has written what it was given, once it
// runs.
func (rs *recording) sync(ctx context.Context) error {
	rec := rs.live.Load()
	if rec == nil {
		return nil
	}
	return rec.Sync(ctx)
}

// close stops everything in order: the proxy drained (GET streams cut at
// once, calls in flight given rs.shutdown to finish, then cut, each cut
// recorded as such), the recorder flushed, the store closed, and
// recorder.json removed.
func (rs *recording) close() (capture.Stats, error) {
	var errs []error
	// Held messages go on unchanged first (the record says the recorder
	// stopped): holding never loses a message, and a held call must not
	// wait out the drain.
	rs.icpt.Close()
	if rs.srv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), rs.shutdown)
		_ = rs.srv.Shutdown(sctx)
		scancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if rs.dash != nil {
		_ = rs.dash.close()
	}
	if rs.replays != nil {
		rs.replays.close()
	}
	var stats capture.Stats
	rs.ingest.stop()
	if rs.rec != nil {
		if err := rs.rec.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		stats = rs.rec.Stats()
	}
	closeTraces(rs.traces, rs.log) // after the recorder: its last batches are in
	if rs.unann != nil {
		rs.unann()
	}
	if rs.api != nil {
		_ = rs.api.Close()
	}
	if rs.metrics != nil {
		rs.metrics.close(ctx) // after the recorder drained: scrapes until now see the final counts
	}
	if err := rs.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the store: %w", err))
	}
	return stats, errors.Join(errs...)
}

// defaultMemoryLimit keeps a recorder's RSS near 100 MB even while four
// 10 MiB results stream through it: without a limit the Go heap may grow to
// twice its live size before collecting.
const defaultMemoryLimit = "64MiB"

// applyMemoryLimit sets the Go heap's soft limit with set, unless the user
// set GOMEMLIMIT and not the flag. A recorder's limit follows the live
// heap when that needs more (memlimit.Follow): Badger's compactions under
// steady traffic hold more than 64 MiB at times, and a fixed limit below
// the live heap has the runtime collecting without pause. A batch job
// keeps its limit (memlimit.Set).
func applyMemoryLimit(v string, explicit bool, set func(int64)) error {
	if os.Getenv("GOMEMLIMIT") != "" && !explicit {
		return nil
	}
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	set(n) // 0: no limit
	return nil
}

// parseSize reads 100MiB, 1GiB, 512KiB or a number of bytes.
func parseSize(v string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size like 100MiB", v)
	}
	return n * mult, nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// loopbackAddr reports whether a listener's host:port is on loopback.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
