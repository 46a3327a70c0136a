package dashboard_test

import (
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/dashboard"
)

// hostileReason is a pause reason that quotes a directory a user named:
// anything at all.
const hostileReason = `recording paused: 3 MiB free on the disk of /data/<img src=x onerror="window.__pwned=1">, under the 256 MiB kept free (--min-free)`

// switchable is a Recording.Status whose answer the test changes.
type switchable struct {
	mu sync.Mutex
	st dashboard.RecordingStatus
}

func (s *switchable) set(st dashboard.RecordingStatus) { s.mu.Lock(); s.st = st; s.mu.Unlock() }
func (s *switchable) get() dashboard.RecordingStatus   { s.mu.Lock(); defer s.mu.Unlock(); return s.st }

// TestStatusAPI: /api/v1/status reports what Recording.Status says, and
// that nothing records without it.
func TestStatusAPI(t *testing.T) {
	st := &switchable{}
	st.set(dashboard.RecordingStatus{Recording: true, Paused: true, Reason: hostileReason, Lost: 42, Stored: 7, Free: 3 << 20, MinFree: 256 << 20})
	_, base := newDash(t, smallStore(t), &dashboard.Options{Backend: &testRecording{testBackend: &testBackend{}, status: st.get}})
	var got dashboard.RecordingStatus
	newAPIClient(t, base).get("/api/v1/status", &got)
	if !got.Recording || !got.Paused || got.Reason != hostileReason || got.Lost != 42 || got.Free != 3<<20 {
		t.Errorf("status: %+v", got)
	}
	_, base = newDash(t, smallStore(t), nil)
	got = dashboard.RecordingStatus{}
	newAPIClient(t, base).get("/api/v1/status", &got)
	if got.Recording || got.Paused || got.Free != -1 {
		t.Errorf("status without a recorder: %+v", got)
	}
}

// TestBrowserStatusBanner: while recording is paused for space, every page
// shows a banner with the reason, as text; when it resumes with messages
// lost, the banner says so; with nothing lost there is none.
func TestBrowserStatusBanner(t *testing.T) {
	st := &switchable{}
	st.set(dashboard.RecordingStatus{Recording: true, Free: 10 << 30})
	_, base := newDash(t, smallStore(t), &dashboard.Options{Backend: &testRecording{testBackend: &testBackend{}, status: st.get}})
	b := newBrowser(t)

	b.open(base + "/sessions")
	b.waitFor("the sessions table", `document.querySelector('table.sessions[data-ready]') !== null`, 10*time.Second)
	b.waitFor("the first status poll", `document.getElementById('banner').dataset.state === 'ok'`, 10*time.Second)
	if eval[bool](b, `!document.getElementById('banner').hidden`) {
		t.Error("a banner shows while recording is fine")
	}

	st.set(dashboard.RecordingStatus{Recording: true, Paused: true, Reason: hostileReason, Lost: 42, Free: 3 << 20, MinFree: 256 << 20})
	b.open(base + "/live")
	b.waitFor("the paused banner", `document.getElementById('banner').dataset.state === 'paused' && !document.getElementById('banner').hidden`, 10*time.Second)
	text := eval[string](b, `document.getElementById('banner').textContent`)
	for _, want := range []string{"R" + hostileReason[1:] + ". 42 message(s) not recorded so far", "3.0 MiB free"} {
		if !contains([]byte(text), want) {
			t.Errorf("the banner reads %q, lacking %q", text, want)
		}
	}
	if eval[bool](b, `document.querySelector('#banner img') !== null || window.__pwned === 1`) {
		t.Error("the reason became markup")
	}
	b.screenshot("status-banner-paused")

	st.set(dashboard.RecordingStatus{Recording: true, Lost: 42, Free: 10 << 30})
	b.waitFor("the lost banner", `document.getElementById('banner').dataset.state === 'lost'`, 10*time.Second)
	if text := eval[string](b, `document.getElementById('banner').textContent`); !contains([]byte(text), "42 message(s) were not recorded") {
		t.Errorf("after resuming, the banner reads %q", text)
	}
	b.checkClean()
}
