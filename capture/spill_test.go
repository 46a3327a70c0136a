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
	"github.com/mcptape/mcptape/protocol"
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

// plainWriter hides its Writer's other methods: the recorder sees no
// capture.RawCopier.
type plainWriter struct{ capture.Writer }

// TestLargeResultBuffersReused: large SSE results recorded one after
// another into a store that copies Raw (as the Badger store does) are read
// back from their spill files into the memory of the one before, which
// spares a result's size in fresh memory each time; each is stored as it
// came, and what the recorder learned from an earlier one (a tools/list's
// output schema) still holds when a later one overwrites its memory.
func TestLargeResultBuffersReused(t *testing.T) {
	const size = 3 << 20
	result := func(id int, fill byte, extra string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"%s"}]%s}}`, id, strings.Repeat(string(fill), size), extra)
	}
	type call struct {
		id          int
		method      string
		result      string
		wantFinding string // "" for none
	}
	calls := []call{
		{2, "tools/list", fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"t","description":"%s","inputSchema":{"type":"object"},`+
			`"outputSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}]}}`, strings.Repeat("a", size)), ""},
		{3, "tools/call", result(3, 'b', `,"structuredContent":{"ok":false}`), ""},
		{4, "tools/call", result(4, 'c', `,"structuredContent":{"ok":"no"}`), "does not validate against its outputSchema"},
		{5, "tools/call", result(5, 'd', `,"structuredContent":{"ok":true}`), ""},
		{6, "tools/call", result(6, 'e', ""), "declares an outputSchema but its result has no structuredContent"},
	}
	run := func(wrap func(*memstore.Store) capture.Writer) (allocated uint64) {
		d := newDriverWith(t, &capture.RecorderOptions{SpillDir: filepath.Join(t.TempDir(), "spill")}, wrap)
		d.exchange(initialize("2025-06-18"))
		session := map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "sess-2025-06-18", "Mcp-Protocol-Version": "2025-06-18"}
		bodies := make([][][]byte, len(calls)) // in 32 KiB pieces, made before measuring
		for i, c := range calls {
			body := []byte("data: " + c.result + "\n\n")
			for off := 0; off < len(body); off += 32 << 10 {
				bodies[i] = append(bodies[i], body[off:min(off+32<<10, len(body))])
			}
		}
		var ms runtime.MemStats
		for i, c := range calls {
			if i == 1 {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				allocated = ms.TotalAlloc
			}
			name := ""
			if c.method == "tools/call" {
				name = `,"params":{"name":"t"}`
			}
			tap := d.begin(ex{method: "POST", path: "/mcp", reqHeader: session,
				body: fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q%s}`, c.id, c.method, name)})
			tap.Response(http.StatusOK, http.Header{"Content-Type": {"text/event-stream"}}, false)
			for _, b := range bodies[i] {
				tap.ResponseBody(b)
			}
			tap.End("", false)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := d.rec.Sync(ctx); err != nil { // written: its buffer is free for the next
				t.Fatal(err)
			}
			cancel()
		}
		runtime.ReadMemStats(&ms)
		allocated = ms.TotalAlloc - allocated
		got := map[int]*capture.Message{}
		for _, m := range d.messages("s01") {
			if m.Direction == protocol.ServerToClient && len(m.Raw) > size {
				var id int
				fmt.Sscanf(string(m.ID), "%d", &id)
				got[id] = m
			}
		}
		for _, c := range calls {
			m := got[c.id]
			switch {
			case m == nil:
				t.Fatalf("result %d not stored", c.id)
			case string(m.Raw) != c.result:
				t.Errorf("result %d stored as %.40q… (%d bytes), want %.40q… (%d bytes)", c.id, m.Raw, len(m.Raw), c.result, len(c.result))
			case c.wantFinding == "" && len(m.Findings) != 0, c.wantFinding != "" && !strings.Contains(fmt.Sprint(m.Findings), c.wantFinding):
				t.Errorf("result %d: findings %v, want %q", c.id, m.Findings, c.wantFinding)
			}
		}
		return allocated
	}
	fresh := run(func(s *memstore.Store) capture.Writer { return plainWriter{s} })
	reused := run(nil)
	t.Logf("allocated while recording %d results of 3 MiB: %.1f MiB with fresh buffers, %.1f MiB reusing them",
		len(calls)-1, float64(fresh)/(1<<20), float64(reused)/(1<<20))
	// Of the 3 MiB each result took, reuse spares most.
	if saved := int64(fresh) - int64(reused); saved < int64(len(calls)-1)*size*3/4 {
		t.Errorf("reusing buffers saved %.1f MiB of allocations over %d results of 3 MiB, want at least %.1f MiB",
			float64(saved)/(1<<20), len(calls)-1, float64((len(calls)-1)*size*3/4)/(1<<20))
	}
}
