package replay_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// recordRoutes is recordTape for a recorder with routes (name → upstream
// URL), as `record --route` runs one.
func recordRoutes(t *testing.T, routes map[string]string, drive func(proxyURL string)) *replay.Tape {
	t.Helper()
	store := recordStoreWith(t, func(rec *capture.Recorder) *proxy.Options {
		o := &proxy.Options{Recorder: rec}
		for name, u := range routes {
			up, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			o.Routes = append(o.Routes, proxy.Route{Name: name, Upstream: up})
		}
		return o
	}, drive)
	return exportTape(t, store)
}

// Each client of a tape recorded with `record --route a=… --route b=…`
// is answered from its own route's recording, under its prefix, as
// through the recorder (the two servers answer the same path, and differ
// in their tools): one route's client after the other's, in the other
// order than recorded, and both at once.
func TestRoutesServedUnderTheirPrefix(t *testing.T) {
	a := liveServer(t, fixtures.Handler(&fixtures.ServerOptions{Showcase: true}))
	b := liveServer(t, nil)
	opts := &fixtures.ClientOptions{Only: []string{"list_tools", fixtures.ToolEcho, fixtures.ToolSample}}
	run := func(ctx context.Context, base, route string) *fixtures.Report {
		rep, err := fixtures.RunClient(ctx, base+"/"+route+fixtures.PathStateful, opts)
		if err != nil {
			t.Errorf("route %s: %v", route, err)
			return nil
		}
		rep.URL = ""
		return rep
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recorded := map[string]*fixtures.Report{}
	tape := recordRoutes(t, map[string]string{"a": a.URL, "b": b.URL}, func(px string) {
		for _, route := range []string{"a", "b"} {
			recorded[route] = run(ctx, px, route)
		}
	})
	if cmp.Equal(recorded["a"], recorded["b"]) {
		t.Fatal("the two routes' servers answered alike: the test could not tell them apart")
	}
	check := func(t *testing.T, s *replay.Server, replayed map[string]*fixtures.Report) {
		if d := cmp.Diff(recorded, replayed); d != "" {
			t.Errorf("the clients saw otherwise from the replay (-recorded +replayed):\n%s", d)
		}
		if r := s.Report(); !r.OK() {
			t.Errorf("strict replay: %q", r.Failures)
		}
	}
	t.Run("one after the other", func(t *testing.T) {
		s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
		replayed := map[string]*fixtures.Report{}
		for _, route := range []string{"b", "a"} {
			replayed[route] = run(ctx, hs.URL, route)
		}
		check(t, s, replayed)
	})
	t.Run("at once", func(t *testing.T) {
		s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
		var mu sync.Mutex
		var wg sync.WaitGroup
		replayed := map[string]*fixtures.Report{}
		for _, route := range []string{"a", "b"} {
			wg.Go(func() {
				rep := run(ctx, hs.URL, route)
				mu.Lock()
				replayed[route] = rep
				mu.Unlock()
			})
		}
		wg.Wait()
		check(t, s, replayed)
	})
}
