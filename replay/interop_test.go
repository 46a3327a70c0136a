package replay_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// Record the official TypeScript client against server-everything, stop
// server-everything, and run the same client against the replay server:
// every step passes, sampling and elicitation included.
func TestReplayServerEverything(t *testing.T) {
	if err := interop.Available(); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	rec, _ := capture.NewRecorder(ctx, store, nil)
	up, _ := url.Parse(ev.URL())
	p, _ := proxy.New(&proxy.Options{Upstream: up, Recorder: rec})
	px := httptest.NewServer(p)
	first, err := interop.RunClient(ctx, px.URL+up.Path, nil)
	if err != nil {
		t.Fatalf("recording: %v", err)
	}
	px.CloseClientConnections()
	px.Close()
	ev.Close()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := replay.Export(ctx, store, nil, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	tape, err := replay.ReadTape(&buf)
	if err != nil {
		t.Fatal(err)
	}
	s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	again, err := interop.RunClient(ctx, hs.URL+up.Path, nil)
	if err != nil {
		t.Fatalf("the TypeScript client against the replay: %v\n%+v", err, s.Report())
	}
	for _, st := range again.Steps {
		if !st.OK {
			t.Errorf("step %s failed against the replay: %s", st.Name, st.Detail)
		}
	}
	if again.Counts != first.Counts {
		t.Errorf("handler counts against the replay %+v, recorded %+v", again.Counts, first.Counts)
	}
	if r := s.Report(); !r.OK() {
		t.Errorf("strict replay failures: %q", r.Failures)
	}
}
