package replay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
)

// UpdateEnv, set to 1, makes NewServer re-record tapes that exist, when the
// test gave it RecordIfMissing.
const UpdateEnv = "MCPTAPE_UPDATE"

// TestServer is a replay server (or, while recording, a recording proxy)
// running for one test.
type TestServer struct {
	// URL is the server's base URL: add the recorded endpoint's path (or
	// use Endpoint).
	URL string
	// Recording reports whether the server records (the tape was missing or
	// an update was asked for) rather than replays.
	Recording bool
	// Server is the replay server; nil while recording, when Report is
	// empty.
	*Server
	endpoint string
}

// Endpoint is URL plus the path the tape's first session was recorded on
// (e.g. http://127.0.0.1:41234/mcp).
func (ts *TestServer) Endpoint() string { return ts.URL + ts.endpoint }

// Option configures NewServer.
type Option func(*testConfig)

type testConfig struct {
	opts     ServerOptions
	lenient  bool
	upstream string
	via      ProxyFunc
	match    []MatchOption
}

// ProxyFunc makes the recording proxy of RecordIfMissing; proxy.NewHandler
// is one. (The replay package does not import the proxy: the test joins
// the two.)
type ProxyFunc func(upstream *url.URL, rec *capture.Recorder) (http.Handler, error)

// WithTiming sets the pacing (the helper's default is TimingFast).
func WithTiming(t Timing) Option { return func(c *testConfig) { c.opts.Timing = t } }

// Lenient reports differences from the recording as log lines instead of
// failing the test (the helper is strict by default).
func Lenient() Option { return func(c *testConfig) { c.lenient = true } }

// WithMatch adds matcher options (IgnorePaths, IgnorePathsFor, WithMatcherFunc).
func WithMatch(opts ...MatchOption) Option {
	return func(c *testConfig) { c.match = append(c.match, opts...) }
}

// WithFault injects a fault (see Annotation).
func WithFault(a Annotation) Option {
	return func(c *testConfig) { c.opts.Faults = append(c.opts.Faults, a) }
}

// WithProfile uses a testing profile's faults.
func WithProfile(p *Profile) Option { return func(c *testConfig) { c.opts.Profile = p } }

// RecordIfMissing records a new tape through a recording proxy to the live
// upstream when the tape file does not exist, or when MCPTAPE_UPDATE=1: the
// test then runs against the real server and the tape is written when it
// ends. via makes the proxy; pass proxy.NewHandler.
func RecordIfMissing(upstream string, via ProxyFunc) Option {
	return func(c *testConfig) { c.upstream, c.via = upstream, via }
}

// NewServer serves the tape at path to the test's client until the test
// ends, strictly by default: any difference from the recording fails the
// test, with the replay server's report. See RecordIfMissing for recording
// a missing tape.
func NewServer(t testing.TB, path string, options ...Option) *TestServer {
	t.Helper()
	c := &testConfig{opts: ServerOptions{Timing: TimingFast, Strict: true}}
	for _, o := range options {
		o(c)
	}
	c.opts.Strict = !c.lenient
	c.opts.Matcher = NewMatcher(c.match...)
	_, statErr := os.Stat(path)
	if c.via != nil && (os.IsNotExist(statErr) || os.Getenv(UpdateEnv) == "1") {
		return recordTape(t, path, c)
	}
	tape, err := OpenTape(path)
	if err != nil {
		if os.IsNotExist(statErr) {
			t.Fatalf("replay: tape %s does not exist; record it (mcptape export, or NewServer with RecordIfMissing)", path)
		}
		t.Fatalf("replay: %v", err)
	}
	s, err := NewServerHandler(tape, &c.opts)
	if err != nil {
		tape.Close()
		t.Fatalf("replay: %s: %v", path, err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		hs.CloseClientConnections()
		hs.Close()
		tape.Close()
		r := s.Report()
		for _, f := range r.Failures {
			if c.lenient {
				t.Logf("replay %s: %s", path, f)
			} else {
				t.Errorf("replay %s: %s", path, f)
			}
		}
	})
	return &TestServer{URL: hs.URL, Server: s, endpoint: tape.Sessions[0].Session.Path}
}

// StdioServer is a replay server serving one stdio client for a test.
type StdioServer struct {
	// Conn is the client's end of the server's stdin and stdout: write
	// newline-delimited JSON-RPC to it, read the server's lines from it.
	// A go-sdk client connects with &mcp.IOTransport{Reader: Conn, Writer:
	// Conn}. Closing it ends the connection.
	Conn io.ReadWriteCloser
	// Server is the replay server.
	*Server
}

// NewStdioServer serves the tape at path to one stdio client, over an
// in-memory connection, until the test ends — a recorded server in place
// of one a client would spawn (Server.ServeStdio; `mcptape replay server
// --stdio` is the same as a command). Options are NewServer's (the helper
// is strict by default); it replays only: RecordIfMissing records through
// the HTTP proxy, so record the tape first. A dropAfterEvents fault closes
// the connection as a crashing server's process would: the client reads
// EOF, and that alone does not fail the test.
func NewStdioServer(t testing.TB, path string, options ...Option) *StdioServer {
	t.Helper()
	c := &testConfig{opts: ServerOptions{Timing: TimingFast, Strict: true}}
	for _, o := range options {
		o(c)
	}
	c.opts.Strict = !c.lenient
	c.opts.Matcher = NewMatcher(c.match...)
	tape, err := OpenTape(path)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	s, err := NewServerHandler(tape, &c.opts)
	if err != nil {
		tape.Close()
		t.Fatalf("replay: %s: %v", path, err)
	}
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() {
		err := s.ServeStdio(context.Background(), server, server)
		// The server's end closes as a process's stdout does when it
		// exits: after a dropAfterEvents fault the client reads EOF.
		server.Close()
		done <- err
	}()
	t.Cleanup(func() {
		client.Close()
		server.Close()
		s.Close()
		// A connection a dropAfterEvents fault ended is what the test asked for.
		if err := <-done; err != nil && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, ErrFaultCut) {
			t.Errorf("replay %s over stdio: %v", path, err)
		}
		tape.Close()
		for _, f := range s.Report().Failures {
			if c.lenient {
				t.Logf("replay %s: %s", path, f)
			} else {
				t.Errorf("replay %s: %s", path, f)
			}
		}
	})
	return &StdioServer{Conn: client, Server: s}
}

func recordTape(t testing.TB, path string, c *testConfig) *TestServer {
	t.Helper()
	up, err := url.Parse(c.upstream)
	if err != nil || up.Host == "" {
		t.Fatalf("replay: RecordIfMissing upstream %q is not a URL", c.upstream)
	}
	store := memstore.New()
	rec, err := capture.NewRecorder(context.Background(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.via(up, rec)
	if err != nil {
		t.Fatalf("replay: the recording proxy: %v", err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rec.Close(ctx); err != nil {
			t.Errorf("replay: recording %s: %v", path, err)
			return
		}
		if st := rec.Stats(); st.Lost+st.Dropped > 0 {
			t.Errorf("replay: recording %s lost %d records; not writing the tape", path, st.Lost+st.Dropped)
			return
		}
		var buf bytes.Buffer
		if err := Export(ctx, store, nil, &buf, "mcptape replay.NewServer"); err != nil {
			t.Errorf("replay: recording %s: %v", path, err)
			return
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Error(err)
			return
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Error(err)
			return
		}
		t.Logf("replay: recorded %s", path)
	})
	return &TestServer{URL: hs.URL, Recording: true, endpoint: up.Path}
}

// ReplayClient replays the tape at path against the server under test at
// target (a base URL: each session goes to its recorded path, or a full
// endpoint URL) and fails the test for every call whose live response
// differs from the recorded one, naming the path and both values.
func ReplayClient(t testing.TB, path, target string, opts *ClientOptions) *ClientReport {
	t.Helper()
	tape, err := OpenTape(path)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	defer tape.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := RunClient(ctx, tape, target, opts)
	if err != nil {
		t.Fatalf("replay client: %v", err)
	}
	if !rep.OK() {
		var b bytes.Buffer
		rep.WriteText(&b, false)
		t.Errorf("replay client: %d difference(s) from %s:\n%s", rep.Problems(), path, b.String())
	}
	return rep
}
