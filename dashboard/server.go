package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"

	"github.com/mcptape/mcptape/capture"
)

// DefaultAddr is where `mcptape record` serves the dashboard unless told
// otherwise: loopback, next to the proxy (7411) and the replay server (7412).
const DefaultAddr = "127.0.0.1:7413"

// ErrNeedToken is returned by [Listen] when no token guards the
// dashboard: every dashboard needs one, on loopback too, since other users
// of the machine reach loopback as well.
var ErrNeedToken = errors.New("a dashboard needs a token")

// Feed says where the live tail's new records come from.
type Feed uint8

const (
	// FeedPoll asks the store for new messages every PollInterval: for a
	// dashboard over a store that nothing records into, or that another
	// process writes.
	FeedPoll Feed = iota
	// FeedPublish takes them from [Server.Publish], which the recorder
	// calls after every batch it writes (RecorderOptions.OnBatch).
	FeedPublish
)

func (f Feed) String() string {
	if f == FeedPublish {
		return "publish"
	}
	return "poll"
}

// Options configures a Server. A nil *Options means the defaults; every
// zero field is documented.
type Options struct {
	// Logger receives the dashboard's own events. Nil discards them.
	Logger *slog.Logger
	// Token must accompany every request, on loopback too (other users of
	// the machine reach loopback as well): as `?token=` once (the dashboard
	// then sets an HttpOnly, SameSite=Strict cookie and redirects to the
	// address without it), as that cookie, or as `Authorization: Bearer`
	// (Prometheus scraping /metrics). "" means a random one, which
	// [Server.Token] returns.
	Token string
	// Version is shown in the page footer and /api/v1/info. "" shows "dev".
	Version string
	// DataDir is the store's directory, for the commands the dashboard
	// shows (export, replay). "" leaves --data out of them.
	DataDir string
	// Feed is where the live tail's records come from; the zero value
	// polls the store.
	Feed Feed
	// PollInterval is how often FeedPoll asks the store for new messages.
	// Zero means one second.
	PollInterval time.Duration
	// Backend does what the dashboard cannot do itself: tapes, profiles'
	// format, replay servers, and with a recorder (a [Recording]) its
	// status and sending through it. Nil hides tape export and import,
	// starting replay servers, Auto-respond and sending; profiles are then
	// checked only for being JSON objects.
	Backend Backend
	// MaxImportBytes bounds an imported tape. Zero means 512 MiB.
	MaxImportBytes int64
	// Profiles is the directory of testing profiles (docs/testing-profiles.md),
	// one NAME.json each. "" hides the profiles page.
	Profiles string
	// ProxyURL is the recording proxy's address as clients use it
	// (http://127.0.0.1:7411), for "Copy as curl" to send a message again
	// through the recorder. "" sends it to the session's upstream.
	ProxyURL string
	// Metrics, if set, is served at /metrics (the Prometheus registry's
	// handler). Nil serves no /metrics.
	Metrics http.Handler
	// Pending holds the requests a replay client waits on a person to
	// answer (the manual sampling provider): the /pending page lists them
	// and takes the answers, and the live tail announces changes. Nil
	// means no replay client waits here: the page says how to start one.
	// The server does not close it.
	Pending *Pending
	// Intercept is a running recorder's queue of held messages: the
	// /intercept page lists them, takes what a person decides, and sets
	// the rules. Nil means nothing records here: the page says how to
	// start a recorder. The server does not close it.
	Intercept *capture.Interceptor
}

// Server is the dashboard: an http.Handler serving the single-page app, its
// JSON API under /api/v1 (see the package documentation) and, with
// Options.Metrics, /metrics. Create it with [New]; Close stops its live
// tail.
type Server struct {
	store  capture.Store
	editor capture.Editor // nil when the store keeps no edits
	opts   Options
	log    *slog.Logger
	router *mux.Router
	static fs.FS
	pages  []Page // static/js/pages.json

	index *summaryIndex
	live  *liveTail

	proxyURL atomic.Pointer[string] // SetProxyURL's, over Options.ProxyURL

	replayMu sync.Mutex
	replays  map[string][]string // session id → URLs of the replay servers started for it

	heldMu       sync.Mutex
	heldSessions map[string]string // held message id → its session's id

	httpMu sync.Mutex
	http   *http.Server

	closeOnce sync.Once
	ctx       context.Context // ends on Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

//go:embed static
var staticFS embed.FS

// New returns a dashboard over store. It starts the live tail (polling the
// store with FeedPoll) and warms the index the session filters use; Close
// stops both.
func New(store capture.Store, opts *Options) (*Server, error) {
	if store == nil {
		return nil, errors.New("dashboard: no store")
	}
	s := &Server{store: store}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Version == "" {
		s.opts.Version = "dev"
	}
	if s.opts.PollInterval <= 0 {
		s.opts.PollInterval = time.Second
	}
	if s.opts.MaxImportBytes <= 0 {
		s.opts.MaxImportBytes = 512 << 20
	}
	if s.opts.Token == "" {
		s.opts.Token = NewToken()
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.editor, _ = store.(capture.Editor)
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	s.static = sub
	if s.pages, err = readPages(sub); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.index = newSummaryIndex(store)
	if s.live, err = newLiveTail(s); err != nil {
		return nil, err
	}
	s.router = s.routes()
	s.wg.Go(func() { s.index.warm(s.ctx) })
	if s.opts.Pending != nil {
		s.wg.Go(s.watchPending)
	}
	if s.opts.Intercept != nil {
		s.wg.Go(s.watchIntercept)
	}
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.guard(s.router).ServeHTTP(w, r)
}

// Publish feeds the live tail with a batch the recorder has just written.
// It copies what it needs and never blocks (use it as, or from,
// capture.RecorderOptions.OnBatch); a tail that falls behind tells its
// pages to reload.
func (s *Server) Publish(b *capture.Batch) { s.live.publish(b) }

// SetProxyURL tells the dashboard the recording proxy's address once it
// listens (see Options.ProxyURL).
func (s *Server) SetProxyURL(url string) { s.proxyURL.Store(&url) }

func (s *Server) proxyBase() string {
	if p := s.proxyURL.Load(); p != nil {
		return *p
	}
	return s.opts.ProxyURL
}

// Token is the token every request must carry (Options.Token, or the
// random one New made).
func (s *Server) Token() string { return s.opts.Token }

// Listen listens on addr for a dashboard guarded by token (ErrNeedToken
// when it is "").
func Listen(addr, token string) (net.Listener, error) {
	if token == "" {
		return nil, fmt.Errorf("dashboard: %s: %w (give --dashboard-token, or let mcptape generate one)", addr, ErrNeedToken)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return ln, nil
}

// IsLoopback reports whether addr (host:port) names a loopback host only:
// 127.0.0.0/8, ::1 or localhost. An empty host (all interfaces) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Serve serves the dashboard on ln until Shutdown or Close.
func (s *Server) Serve(ln net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	srv.RegisterOnShutdown(s.live.shutdown)
	s.httpMu.Lock()
	s.http = srv
	s.httpMu.Unlock()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// URL is the address a browser opens for a listener at addr, with the
// token when there is one.
func URL(addr, token string) string {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	u := "http://" + addr + "/"
	if token != "" {
		u += "?token=" + token
	}
	return u
}

// Shutdown stops serving gracefully (live tails end at once), then closes
// the server.
func (s *Server) Shutdown(ctx context.Context) error {
	s.httpMu.Lock()
	srv := s.http
	s.httpMu.Unlock()
	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
	}
	return errors.Join(err, s.Close())
}

// Close stops the live tail and the index warm-up and waits for them. It
// does not close the store.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.live.shutdown()
		s.wg.Wait()
	})
	return nil
}

// routes is the router: the API, the static assets, the app's pages.
func (s *Server) routes() *mux.Router {
	r := mux.NewRouter()
	// Session ids are arbitrary text: match them escaped, unescape in vars.
	r.UseEncodedPath()
	api := r.PathPrefix("/api/v1").Subrouter()
	api.Use(jsonErrors)
	get, post, put, del := http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	api.HandleFunc("/info", s.apiInfo).Methods(get)
	api.HandleFunc("/status", s.apiStatus).Methods(get)
	api.HandleFunc("/sessions", s.apiSessions).Methods(get)
	api.HandleFunc("/sessions/{id}", s.apiSession).Methods(get)
	api.HandleFunc("/sessions/{id}", s.apiDeleteSession).Methods(del)
	api.HandleFunc("/sessions/{id}/tree", s.apiTree).Methods(get)
	api.HandleFunc("/sessions/{id}/search", s.apiSessionSearch).Methods(get)
	api.HandleFunc("/search", s.apiSearch).Methods(get)
	api.HandleFunc("/sessions/{id}/messages", s.apiMessages).Methods(get)
	api.HandleFunc("/sessions/{id}/exchanges", s.apiExchanges).Methods(get)
	api.HandleFunc("/sessions/{id}/labels", s.apiSetLabels).Methods(put)
	api.HandleFunc("/sessions/{id}/tape", s.apiExportTape).Methods(get)
	api.HandleFunc("/sessions/{id}/har", s.apiExportHAR).Methods(get)
	api.HandleFunc("/sessions/{id}/replay", s.apiReplayInfo).Methods(get)
	api.HandleFunc("/sessions/{id}/replay", s.apiStartReplay).Methods(post)
	api.HandleFunc("/sessions/{id}/replay", s.apiStopReplay).Methods(del)
	api.HandleFunc("/messages/{seq:[0-9]+}", s.apiMessage).Methods(get)
	api.HandleFunc("/messages/{seq:[0-9]+}/edits", s.apiEdits).Methods(get)
	api.HandleFunc("/messages/{seq:[0-9]+}/edits", s.apiEdit).Methods(post)
	api.HandleFunc("/messages/{seq:[0-9]+}/inputs/{key}", s.apiInput).Methods(get)
	api.HandleFunc("/exchanges/{id:[0-9]+}", s.apiExchange).Methods(get)
	api.HandleFunc("/tapes", s.apiImportTape).Methods(post)
	api.HandleFunc("/live", s.live.serve).Methods(get)
	api.HandleFunc("/live/recent", s.live.serveRecent).Methods(get)
	api.HandleFunc("/latency", s.apiLatency).Methods(get)
	api.HandleFunc("/profiles", s.apiProfiles).Methods(get)
	api.HandleFunc("/profiles/{name}", s.apiProfile).Methods(get)
	api.HandleFunc("/profiles/{name}", s.apiPutProfile).Methods(put)
	api.HandleFunc("/profiles/{name}", s.apiDeleteProfile).Methods(del)
	api.HandleFunc("/default-profile", s.apiSetDefaultProfile).Methods(put)
	api.HandleFunc("/pending", s.apiPending).Methods(get)
	api.HandleFunc("/pending/{id}", s.apiAnswerPending).Methods(post)
	api.HandleFunc("/intercept", s.apiIntercept).Methods(get)
	api.HandleFunc("/intercept/rules", s.apiSetRules).Methods(put)
	api.HandleFunc("/intercept/{id:[0-9]+}", s.apiDecide).Methods(post)
	api.HandleFunc("/intercept/{id:[0-9]+}/suggest", s.apiSuggest).Methods(get)
	api.HandleFunc("/send", s.apiSend).Methods(post)
	api.HandleFunc("/tools", s.apiTools).Methods(get)
	api.HandleFunc("/tools/history", s.apiToolHistory).Methods(get)
	api.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API endpoint: see the dashboard package documentation", "not_found")
	})
	api.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed here", "method")
	})

	if s.opts.Metrics != nil {
		r.Handle("/metrics", s.opts.Metrics).Methods(get)
	}
	r.PathPrefix("/static/").Handler(http.StripPrefix("/static/", s.staticHandler())).Methods(get)
	// The app's pages: every one is a deep link that opens directly.
	for _, p := range s.pages {
		r.HandleFunc(p.Path, s.page).Methods(get)
	}
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound)
	})
	return r
}

// page serves index.html for the app's paths; the app routes on the client.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(s.static, "index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func (s *Server) staticHandler() http.Handler {
	files := http.FileServerFS(s.static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "index.html" {
			http.NotFound(w, r)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, ".js"):
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		case strings.HasSuffix(r.URL.Path, ".css"):
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
		case strings.HasSuffix(r.URL.Path, ".json"):
			w.Header().Set("Content-Type", "application/json")
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// RecordingStatus is what /api/v1/status reports about the recording in
// progress ([StatusReporter.Status]).
type RecordingStatus struct {
	// Recording is set while a recorder writes into the store.
	Recording bool `json:"recording"`
	// Paused is set while the recorder stores nothing for want of space
	// (traffic still flows), Reason says why, since Since.
	Paused bool      `json:"paused"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Stored and Lost count the messages stored and not stored since the
	// recorder started; the sessions that lost some are incomplete.
	Stored int64 `json:"stored"`
	Lost   int64 `json:"lost"`
	// Free is the free space on the store's disk (-1 when unknown),
	// MinFree what the store keeps free, Size the store's size on disk,
	// MaxSize its bound (0: none).
	Free    int64 `json:"free"`
	MinFree int64 `json:"minFree"`
	Size    int64 `json:"size"`
	MaxSize int64 `json:"maxSize,omitempty"`
	// MaxAge is the age in seconds past which sessions are deleted (0:
	// none); Pruned counts the sessions deleted for MaxSize and MaxAge
	// since the store was opened.
	MaxAge int64 `json:"maxAgeSeconds,omitempty"`
	Pruned int64 `json:"pruned,omitempty"`
}

func (s *Server) apiStatus(w http.ResponseWriter, r *http.Request) {
	st := RecordingStatus{Free: -1}
	if sr, ok := s.opts.Backend.(StatusReporter); ok {
		st = sr.Status()
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, st)
}
