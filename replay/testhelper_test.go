package replay_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// The go-vcr way: the first run records through the proxy to the live
// server, later runs replay the tape with the server gone.
func TestNewServerRecordIfMissing(t *testing.T) {
	tape := filepath.Join(t.TempDir(), "testdata", "fixture.tape.json")
	up := httptest.NewServer(fixtures.Handler(nil))
	var recorded, replayed *fixtures.Report
	t.Run("record", func(t *testing.T) {
		ts := replay.NewServer(t, tape, replay.RecordIfMissing(up.URL+fixtures.PathStateless, proxy.NewHandler))
		if !ts.Recording {
			t.Fatal("the tape is missing, but the helper did not record")
		}
		recorded = runClient(t, ts.Endpoint(), nil)
		// Nothing is replayed while recording: the report is empty, and
		// asking for it is safe.
		if r := ts.Report(); r.Served != 0 || !r.OK() || ts.Server != nil {
			t.Errorf("report while recording: %+v", r)
		}
	})
	up.CloseClientConnections()
	up.Close()
	if _, err := os.Stat(tape); err != nil {
		t.Fatalf("no tape written: %v", err)
	}
	t.Run("replay", func(t *testing.T) {
		ts := replay.NewServer(t, tape, replay.RecordIfMissing(up.URL+fixtures.PathStateless, proxy.NewHandler))
		if ts.Recording {
			t.Fatal("the tape exists, but the helper recorded again")
		}
		replayed = runClient(t, ts.Endpoint(), nil)
	})
	recorded.URL, replayed.URL = "", ""
	if d := cmp.Diff(recorded, replayed); d != "" {
		t.Errorf("replay differs from the recording (-recorded +replayed):\n%s", d)
	}
}

// The client-side helper: a recorded client against the server under test.
func TestReplayClientHelper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "client.tape.json")
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	t.Run("record", func(t *testing.T) {
		ts := replay.NewServer(t, path, replay.RecordIfMissing(up.URL+fixtures.PathStateless, proxy.NewHandler))
		runClient(t, ts.Endpoint(), &fixtures.ClientOptions{Only: []string{"echo", "add", "sample"}})
	})
	rep := replay.ReplayClient(t, path, up.URL, nil)
	if !rep.OK() {
		t.Fatal("the recorded client found differences against the server it was recorded from")
	}
}
