package dashboard_test

import (
	"testing"
	"time"

	"github.com/mcptape/mcptape/dashboard"
)

// TestBrowserStoreSize: under the footer, every page says how much disk
// the store takes, its size bound, how long sessions are kept and how many
// old ones were deleted, from the status the recorder (or the dashboard
// holding the store) reports; nothing when the size is not known.
func TestBrowserStoreSize(t *testing.T) {
	st := &switchable{}
	st.set(dashboard.RecordingStatus{Recording: true, Free: 10 << 30, Size: 12 << 20, MaxSize: 2 << 30, MaxAge: 30 * 24 * 3600, Pruned: 3})
	_, base := newDash(t, smallStore(t), &dashboard.Options{Backend: &testRecording{testBackend: &testBackend{}, status: st.get}})
	var got dashboard.RecordingStatus
	newAPIClient(t, base).get("/api/v1/status", &got)
	if got.MaxAge != 30*24*3600 || got.Pruned != 3 || got.Size != 12<<20 {
		t.Errorf("status: %+v", got)
	}
	b := newBrowser(t)
	b.open(base + "/sessions")
	b.waitFor("the store's size", `!document.getElementById('store-size').hidden`, 10*time.Second)
	want := "Store: 12.0 MiB on disk of at most 2.0 GiB · sessions kept 30 days after their last traffic · 3 old session(s) deleted since start"
	if text := eval[string](b, `document.getElementById('store-size').textContent`); text != want {
		t.Errorf("under the footer: %q\nwant %q", text, want)
	}
	b.screenshot("store-size")
	st.set(dashboard.RecordingStatus{Free: -1})
	b.open(base + "/live")
	b.waitFor("the first status poll", `document.getElementById('banner').dataset.state === 'ok'`, 10*time.Second)
	if eval[bool](b, `!document.getElementById('store-size').hidden`) {
		t.Error("a store size shows when none is known")
	}
}
