package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// dashboardOff is the --dashboard value that turns the dashboard off.
const dashboardOff = "off"

// runDashboard is `mcptape dashboard`: browse a store that nothing records
// into.
func runDashboard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dashboard", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store")
	listen := fs.String("listen", dashboard.DefaultAddr, "address the dashboard listens on (loopback unless told otherwise)")
	token := fs.String("token", "", "the token the dashboard asks for, on loopback too (default: a random one, printed once in its URL)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var maxAge age
	fs.Var(&maxAge, "max-age", "delete sessions whose latest traffic is older than this while the dashboard runs, e.g. 30d (d is a day, w a week); open sessions are kept")
	maxStoreSize := fs.String("max-store-size", "0", "bound the store's size on disk, e.g. 10GiB: past it, the oldest finished sessions are deleted; 0 means no bound")
	otlp := fs.String("otlp", "", otlpUsage+" (what this process records from wraps)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	maxSize, err := parseSize(*maxStoreSize)
	if err != nil {
		return usagef("--max-store-size: %v", err)
	}
	store, err := openDashboardStore(ctx, *data, &badgerstore.Options{Logger: logger, MaxSize: maxSize, MaxAge: time.Duration(maxAge)})
	if err != nil {
		return err
	}
	defer store.Close()
	warnNoRoom(stderr, *data, store) // it records what wraps hand over
	replays := &replayServers{store: store, data: *data, logger: logger}
	defer replays.close()
	// Nothing records here: /metrics has the build, Go and process metrics.
	reg := newMetricsRegistry()
	d, err := startDashboard(&dashboardConfig{store: store, data: *data, addr: *listen, flag: "--listen", token: *token, fixed: true,
		feed: dashboard.FeedPoll, metrics: metricsHandler(reg), backend: &storeBackend{dashBackend: &dashBackend{data: *data, replays: replays}, store: store},
		logger: logger})
	if err != nil {
		return err
	}
	tr, err := startTraces(ctx, *otlp, registerer(reg), logger, stdout)
	if err != nil {
		return errors.Join(err, d.close())
	}
	ro := &capture.RecorderOptions{Logger: logger, OnBatch: tr.BatchHook()}
	// What `mcptape wrap` records reaches the store through this process
	// while it holds the store (the live page polls the store).
	// (Each wrap compares its server's tools/list with the baselines
	// itself: what is ingested comes with its drift findings.)
	rec, err := capture.NewRecorder(ctx, store, ro)
	if err != nil {
		closeTraces(tr, logger)
		return errors.Join(err, d.close())
	}
	ing := startIngest(*data, rec, store, logger, tr)
	defer func() {
		ing.stop()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = rec.Close(cctx)
		cancel()
		closeTraces(tr, logger)
	}()
	// Like a recorder, announce a read API, so that `ls` and `show` work
	// while the dashboard holds the store, and point others at it.
	unannounce, err := announce(store, *data, d.url(), func() string { return pausedReason(store) })
	if err != nil {
		return errors.Join(err, d.close())
	}
	defer unannounce()
	fmt.Fprintf(stdout, "mcptape: dashboard of %s at %s\n", *data, d.url())
	fmt.Fprintf(stdout, "mcptape: %s\n", d.metricsNote())
	fmt.Fprintln(stdout, "mcptape: stop with Ctrl-C")
	select {
	case <-ctx.Done():
	case err = <-d.errc:
	}
	return errors.Join(err, d.close())
}

// openDashboardStore opens a store for `mcptape dashboard`, which edits, so
// it must hold the store itself: a running recorder's own dashboard is the
// way to look while it records.
//
// It creates no store where there is none, with one exception: an empty
// directory, which the dashboard then owns for the wraps that will record
// into it (`mcptape wrap --data DIR`, started by a client after it). A
// missing directory (a mistyped --data) or one that holds other files is
// refused.
func openDashboardStore(ctx context.Context, dir string, opts *badgerstore.Options) (*badgerstore.Store, error) {
	if err := noStore(dir); err != nil {
		if ents, rerr := os.ReadDir(dir); rerr != nil || len(ents) > 0 {
			return nil, err
		}
	}
	if _, st, err := remotestore.Discover(ctx, dir); err == nil {
		return nil, recorderHolds(dir, st.PID)
	}
	store, err := badgerstore.Open(dir, opts)
	if errors.Is(err, badgerstore.ErrLocked) {
		if a, aerr := remotestore.ReadAnnouncement(dir); aerr == nil {
			return nil, recorderHolds(dir, a.PID)
		}
		return nil, fmt.Errorf("%s is locked by another process that offers no dashboard (an older mcptape?); stop it, then try again", dir)
	}
	if err != nil {
		return nil, err
	}
	if err := repairStale(dir, store); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

func recorderHolds(dir string, pid int) error {
	a, err := remotestore.ReadAnnouncement(dir)
	if err == nil && a.Dashboard != "" {
		return fmt.Errorf("%s is open in another mcptape (pid %d, recording or a dashboard): its dashboard is at %s", dir, pid, a.Dashboard)
	}
	return fmt.Errorf("mcptape record (pid %d) is recording into %s with its dashboard off; restart it without --dashboard off, or stop it and run `mcptape dashboard` again", pid, dir)
}

// announce serves the read API of remotestore on a loopback port and
// announces it, with the dashboard's URL, in the data directory.
func announce(store capture.Store, data, dashURL string, paused func() string) (func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the local API: %w", err)
	}
	token := remotestore.NewToken()
	started := time.Now()
	api := &http.Server{Handler: remotestore.Handler(store, token, &remotestore.HandlerOptions{Status: func() remotestore.Status {
		return remotestore.Status{PID: os.Getpid(), Started: started, Paused: paused()}
	}}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = api.Serve(ln) }()
	remove, err := remotestore.WriteAnnouncement(data, remotestore.Announcement{PID: os.Getpid(), API: "http://" + ln.Addr().String(), Token: token, Dashboard: dashURL})
	if err != nil {
		api.Close()
		return nil, fmt.Errorf("announcing the local API in %s: %w", data, err)
	}
	return func() { remove(); _ = api.Close() }, nil
}

// runningDashboard is a dashboard serving on its listener.
type runningDashboard struct {
	srv  *dashboard.Server
	base string // http://host:port/, without the token
	// token guards the dashboard, /metrics included, on loopback too.
	token string
	errc  chan error
}

// url is the dashboard's address to open in a browser, with the token.
func (d *runningDashboard) url() string { return d.pageURL("/") }

// pageURL is the address of one of the dashboard's pages, with the token
// (the page trades it for a cookie and takes it out of the address).
func (d *runningDashboard) pageURL(path string) string {
	return strings.TrimSuffix(d.base, "/") + path + "?token=" + d.token
}

// metricsNote says where the dashboard's listener serves /metrics and how
// a scraper gets past the token: Prometheus sends it as a bearer token
// (authorization: {credentials: TOKEN} in its scrape config).
func (d *runningDashboard) metricsNote() string {
	return "Prometheus metrics at " + d.base + "metrics (send the token of the dashboard's URL as a bearer token: Authorization: Bearer TOKEN)"
}

// dashboardConfig is how to start a dashboard.
type dashboardConfig struct {
	store capture.Store
	// data is the store's directory, for the commands the dashboard
	// shows and its testing profiles ("" for a store in memory).
	data string
	// addr is where it listens, and flag the command-line flag that set
	// it (--dashboard, --listen), for the error when addr is taken. fixed
	// says addr was asked for: when the default address is taken
	// (another recorder), a free loopback port is used instead.
	addr, flag string
	fixed      bool
	// token guards it ("" for a random one).
	token string
	feed  dashboard.Feed
	// metrics is served at /metrics (nil: none).
	metrics http.Handler
	// backend does tapes, profiles and replay servers, and in front of a
	// recorder sends through it (a recordBackend).
	backend dashboard.Backend
	// intercept is a recorder's queue of held messages; pending a replay
	// client's questions for a person.
	intercept *capture.Interceptor
	pending   *dashboard.Pending
	logger    *slog.Logger
}

// startDashboard serves a dashboard as c says, with c.token or a random
// token: every dashboard has one, on loopback too.
func startDashboard(c *dashboardConfig) (*runningDashboard, error) {
	logger := c.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := &dashboard.Options{Logger: logger, Version: version, DataDir: c.data, Token: c.token, Feed: c.feed,
		Metrics: c.metrics, Backend: c.backend, Intercept: c.intercept, Pending: c.pending}
	if c.data != "" {
		opts.Profiles = profilesDir(c.data)
	}
	srv, err := dashboard.New(c.store, opts)
	if err != nil {
		return nil, err
	}
	token := srv.Token()
	ln, err := dashboard.Listen(c.addr, token)
	if err != nil && !c.fixed && errors.Is(err, syscall.EADDRINUSE) {
		logger.Info("the dashboard's default address is taken; using a free port", "addr", c.addr)
		ln, err = dashboard.Listen("127.0.0.1:0", token)
	}
	if err != nil {
		srv.Close()
		hint := "choose another address with " + c.flag + " 127.0.0.1:PORT"
		if c.flag == "--dashboard" {
			hint += ", or turn the dashboard off with --dashboard off"
		}
		return nil, fmt.Errorf("%s %s: %w (%s)", c.flag, c.addr, err, hint)
	}
	d := &runningDashboard{srv: srv, base: dashboard.URL(ln.Addr().String(), ""), token: token, errc: make(chan error, 1)}
	go func() { d.errc <- srv.Serve(ln) }()
	return d, nil
}

func (d *runningDashboard) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return d.srv.Shutdown(ctx)
}

// dashBackend is the dashboard.Backend of every dashboard mcptape
// starts: tapes and testing profiles in replay's formats, replay servers.
type dashBackend struct {
	data    string
	replays *replayServers
}

var _ dashboard.Backend = (*dashBackend)(nil)

func (b *dashBackend) ExportTape(ctx context.Context, store capture.Store, ids []string, w io.Writer) error {
	return exportTape(ctx, store, ids, w)
}

func (b *dashBackend) ImportTape(ctx context.Context, store capture.Store, r io.Reader) ([]string, error) {
	tape, err := replay.ReadTape(r)
	if err != nil {
		return nil, err
	}
	return replay.Import(ctx, store, tape, &replay.ImportOptions{Rename: true})
}

func (b *dashBackend) CheckProfile(p []byte) error {
	_, err := replay.ReadProfile(bytes.NewReader(p))
	return err
}

func (b *dashBackend) AnswerFromProfile(ctx context.Context, profile, method string, params json.RawMessage) (json.RawMessage, error) {
	p, _, err := loadNamedProfile(b.data, profile)
	if err != nil {
		return nil, err
	}
	return answerFromProfile(p, method, params)
}

func (b *dashBackend) StartReplay(ctx context.Context, id string) (string, error) {
	return b.replays.start(ctx, id)
}

func (b *dashBackend) StopReplay(ctx context.Context, url string) error {
	return b.replays.stop(ctx, url)
}

// storeBackend is the dashboard.Backend of `mcptape dashboard`: a
// dashBackend that reports its store's state (size, bound, age limit,
// sessions pruned) for the banner and the footer.
type storeBackend struct {
	*dashBackend
	store *badgerstore.Store
}

var _ dashboard.StatusReporter = (*storeBackend)(nil)

func (b *storeBackend) Status() dashboard.RecordingStatus { return storeStatus(b.store) }

// recordBackend is a recorder's dashboard.Backend: a dashBackend, and the
// recording's status, its routes, and sending through it.
type recordBackend struct {
	*dashBackend
	rs *recording
	// proxy is the recording proxy once it runs (the dashboard starts
	// first).
	proxy atomic.Pointer[proxy.Proxy]
}

var _ dashboard.Recording = (*recordBackend)(nil)

func (b *recordBackend) Status() dashboard.RecordingStatus { return b.rs.status() }

func (b *recordBackend) Sync(ctx context.Context) error { return b.rs.sync(ctx) }

func (b *recordBackend) Routes() []dashboard.Route {
	p := b.proxy.Load()
	if p == nil {
		return nil
	}
	var out []dashboard.Route
	if up := p.Upstream(); up != nil {
		out = append(out, dashboard.Route{Upstream: up.Redacted()})
	}
	for _, r := range p.Routes() {
		out = append(out, dashboard.Route{Name: r.Name, Upstream: r.Upstream.Redacted()})
	}
	return out
}

// Send is replay.Send as the dashboard's own client, the server's
// sampling, elicitation and roots requests answered from the default
// testing profile (or its built-in defaults).
func (b *recordBackend) Send(ctx context.Context, r dashboard.SendRequest) (any, error) {
	p, _, err := loadNamedProfile(b.data, "")
	if err != nil {
		return nil, fmt.Errorf("the default testing profile: %w", err)
	}
	if p == nil {
		p = &replay.Profile{Name: "built-in defaults"}
	}
	return replay.Send(ctx, &replay.SendOptions{URL: r.URL, Method: r.Method, Params: r.Params, Body: r.Body, Header: r.Header,
		Version: r.Version, Client: protocol.Implementation{Name: dashboard.ClientName, Version: version}, Profile: p})
}

// exportTape writes the sessions as a tape in replay's format.
func exportTape(ctx context.Context, store capture.Store, ids []string, w io.Writer) error {
	return replay.Export(ctx, store, ids, w, "mcptape "+version)
}

// replayServers are the replay servers the dashboard's button started;
// they run until the process stops.
type replayServers struct {
	store  capture.Store
	data   string
	logger *slog.Logger

	mu      sync.Mutex
	servers []*proxy.Server
	tapes   []*replay.Server
}

// start exports the session to a tape in memory and serves it on a free
// loopback port, with the default testing profile's faults if one is set.
func (r *replayServers) start(ctx context.Context, id string) (string, error) {
	var buf bytes.Buffer
	if err := replay.Export(ctx, r.store, []string{id}, &buf, "mcptape "+version); err != nil {
		return "", err
	}
	tape, err := replay.ReadTape(&buf)
	if err != nil {
		return "", err
	}
	opts := &replay.ServerOptions{Logger: r.logger}
	if p, err := r.defaultProfile(); err != nil {
		r.logger.Warn("the default testing profile does not load; replaying without it", "err", err)
	} else {
		opts.Profile = p
	}
	h, err := replay.NewServerHandler(tape, opts)
	if err != nil {
		return "", err
	}
	srv, err := proxy.Listen("127.0.0.1:0", h, &proxy.ServerOptions{Logger: r.logger})
	if err != nil {
		h.Close()
		return "", err
	}
	r.mu.Lock()
	r.servers = append(r.servers, srv)
	r.tapes = append(r.tapes, h)
	r.mu.Unlock()
	go func() { _ = srv.Serve() }()
	path := ""
	if len(tape.Sessions) > 0 {
		path = tape.Sessions[0].Session.Path
	}
	return srv.URL() + path, nil
}

// stop shuts down the replay server start returned url for.
func (r *replayServers) stop(ctx context.Context, url string) error {
	r.mu.Lock()
	i := slices.IndexFunc(r.servers, func(s *proxy.Server) bool { return url == s.URL() || strings.HasPrefix(url, s.URL()+"/") })
	if i < 0 {
		r.mu.Unlock()
		return fmt.Errorf("no replay server runs at %s", url)
	}
	srv, tape := r.servers[i], r.tapes[i]
	r.servers = slices.Delete(r.servers, i, i+1)
	r.tapes = slices.Delete(r.tapes, i, i+1)
	r.mu.Unlock()
	tape.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

func (r *replayServers) defaultProfile() (*replay.Profile, error) {
	if r.data == "" {
		return nil, nil // a store in memory has no profiles
	}
	dir := profilesDir(r.data)
	b, err := os.ReadFile(filepath.Join(dir, dashboard.DefaultProfileFile))
	if err != nil {
		return nil, nil
	}
	name := strings.TrimSpace(string(b))
	if name == "" || strings.ContainsAny(name, `/\`) {
		return nil, nil
	}
	return replay.LoadProfile(filepath.Join(dir, name+".json"))
}

func (r *replayServers) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i, s := range r.servers {
		r.tapes[i].Close()
		_ = s.Shutdown(ctx)
	}
	r.servers, r.tapes = nil, nil
}

// fanOut calls each non-nil f with every batch the recorder writes.
func fanOut(fs ...func(*capture.Batch)) func(*capture.Batch) {
	var live []func(*capture.Batch)
	for _, f := range fs {
		if f != nil {
			live = append(live, f)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return func(b *capture.Batch) {
		for _, f := range live {
			f(b)
		}
	}
}

// metricsHandler serves reg's metrics, or is nil without a registry.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	if reg == nil {
		return nil
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
