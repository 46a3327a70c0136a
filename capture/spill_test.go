package capture_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/capture/storetest"
)

// TestLargeEventsSpill: four 6 MiB SSE results arriving at once, in 32 KiB
// pieces, are recorded whole with a spill directory; while they arrive
// their lines wait in spill files (on Linux, seen as the recorder's open
// files), not in memory, and once they end no spill file is left open or
// on disk. A spill directory that cannot be created leaves the recorder
// working, in memory.
func TestLargeEventsSpill(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "spill")
		if bad {
			// A file where the directory should be.
			if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "spill"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		store := memstore.New()
		rec, err := capture.NewRecorder(ctx, store, &capture.RecorderOptions{SpillDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		const n, size = 4, 6 << 20
		bodies := make([][]byte, n)
		taps := make([]*capture.Tap, n)
		for i := range n {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big"}}`, i)
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7411/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			taps[i] = rec.Begin(capture.RequestFrom(req, []byte(body), true))
			taps[i].Response(http.StatusOK, http.Header{"Content-Type": {"text/event-stream"}}, false)
			text := strings.Repeat(string(rune('a'+i)), size)
			bodies[i] = []byte(fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", i, text))
		}
		for off := 0; off < len(bodies[0]); off += 32 << 10 {
			for i := range n {
				taps[i].ResponseBody(bodies[i][off:min(off+32<<10, len(bodies[i]))])
			}
			if off == 4<<20 {
				if err := rec.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				if got := openSpills(t, dir); runtime.GOOS == "linux" && !bad && got != n {
					t.Errorf("%d spill files open with four 6 MiB events 4 MiB in, want %d", got, n)
				}
			}
		}
		for i := range n {
			taps[i].End("", false)
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := rec.Close(sctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if got := openSpills(t, dir); got != 0 {
			t.Errorf("bad dir %v: %d spill files still open after the events ended", bad, got)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Errorf("bad dir %v: spill files left on disk: %v", bad, left)
		}
		got := 0
		for _, m := range storetest.Messages(t, store) {
			if len(m.Raw) > size {
				var id int
				fmt.Sscanf(string(m.ID), "%d", &id)
				if want := strings.TrimSuffix(strings.TrimPrefix(string(bodies[id]), "data: "), "\n\n"); string(m.Raw) != want || len(m.Findings) != 0 {
					t.Errorf("bad dir %v: result %d stored as %d bytes with findings %v, want its %d bytes", bad, id, len(m.Raw), m.Findings, len(want))
				}
				got++
			}
		}
		if got != n {
			t.Errorf("bad dir %v: %d large results stored, want %d", bad, got, n)
		}
	}
}

// openSpills counts this process's open files in dir (Linux; 0 elsewhere).
func openSpills(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}
