package replay_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// record runs the fixture client through a recording proxy in front of the
// fixture server, and returns the tape and what the client saw.
func record(t *testing.T, path string, opts *fixtures.ClientOptions) (*replay.Tape, *fixtures.Report) {
	t.Helper()
	tape, reps := recordRuns(t, path, opts)
	return tape, reps[0]
}

// recordRuns records one run of the fixture client per options, one after
// another, into one tape.
func recordRuns(t *testing.T, path string, runs ...*fixtures.ClientOptions) (*replay.Tape, []*fixtures.Report) {
	t.Helper()
	var reps []*fixtures.Report
	tape := recordTape(t, liveServer(t, nil).URL, func(px string) {
		for _, opts := range runs {
			reps = append(reps, runClient(t, px+path, opts))
		}
	})
	return tape, reps
}

// recordStore runs drive against a recording proxy in front of upstream,
// given the proxy's URL, and returns what was recorded once the proxy and
// the recorder are closed.
func recordStore(tb testing.TB, upstream string, drive func(proxyURL string)) *memstore.Store {
	tb.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	return recordStoreWith(tb, func(rec *capture.Recorder) *proxy.Options { return &proxy.Options{Upstream: u, Recorder: rec} }, drive)
}

// recordStoreWith is recordStore with the proxy options opts gives.
func recordStoreWith(tb testing.TB, opts func(*capture.Recorder) *proxy.Options, drive func(proxyURL string)) *memstore.Store {
	tb.Helper()
	store := memstore.New()
	ctx := context.Background()
	rec, err := capture.NewRecorder(ctx, store, nil)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := proxy.New(opts(rec))
	if err != nil {
		tb.Fatal(err)
	}
	px := httptest.NewServer(p)
	drive(px.URL)
	px.CloseClientConnections()
	px.Close()
	if err := rec.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	return store
}

// recordTape is recordStore's recording exported as a tape and read back.
func recordTape(tb testing.TB, upstream string, drive func(proxyURL string)) *replay.Tape {
	tb.Helper()
	return exportTape(tb, recordStore(tb, upstream, drive))
}

// exportTape is a store's recording exported as a tape and read back.
func exportTape(tb testing.TB, store *memstore.Store) *replay.Tape {
	tb.Helper()
	var buf bytes.Buffer
	if err := replay.Export(context.Background(), store, nil, &buf, "test"); err != nil {
		tb.Fatal(err)
	}
	tape, err := replay.ReadTape(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	return tape
}

func runClient(t *testing.T, u string, opts *fixtures.ClientOptions) *fixtures.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if opts == nil {
		opts = &fixtures.ClientOptions{}
	}
	c := *opts
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	c.HTTPClient = &http.Client{Transport: tr}
	rep, err := fixtures.RunClient(ctx, u, &c)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func serve(t *testing.T, tape *replay.Tape, opts *replay.ServerOptions) (*replay.Server, *httptest.Server) {
	t.Helper()
	if opts == nil {
		opts = &replay.ServerOptions{Timing: replay.TimingFast}
	}
	s, err := replay.NewServerHandler(tape, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); hs.CloseClientConnections(); hs.Close() })
	return s, hs
}

// The fixture client gets the recorded results from the replay server, and
// its sampling, elicitation and roots handlers are called as they were.
func TestReplayServerFixtureClient(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape, recorded := record(t, era.path, nil)
			s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
			replayed := runClient(t, hs.URL+era.path, nil)
			recorded.URL, replayed.URL = "", ""
			if d := cmp.Diff(recorded, replayed); d != "" {
				t.Errorf("the client saw something else from the replay (-recorded +replayed):\n%s", d)
			}
			if r := s.Report(); !r.OK() || r.Served < 20 {
				t.Errorf("strict replay: served %d, failures %q", r.Served, r.Failures)
			}
		})
	}
}
