package replay_test

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures/interop"
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
	up, _ := url.Parse(ev.URL())
	var first *interop.ClientReport
	tape := recordTape(t, ev.URL(), func(px string) {
		if first, err = interop.RunClient(ctx, px+up.Path, nil); err != nil {
			t.Fatalf("recording: %v", err)
		}
	})
	ev.Close()
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
