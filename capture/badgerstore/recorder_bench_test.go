package badgerstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
)

// BenchmarkRecorderLargeResults is the recording side of the bench's large
// results: four 2025-11-25 tools/call results of 1 MiB, or of 10 MiB, (one
// SSE event each) arriving at once, fed through the Tap API in 128 KiB
// reads (the proxy's copy buffer), into a store on disk with a spill
// directory, as `mcptape record` runs it. It reports the process's CPU time
// per MiB recorded (the Tap calls, the pipeline, the writer and Badger's
// goroutines) and the bytes allocated per MiB.
func BenchmarkRecorderLargeResults(b *testing.B) {
	b.Run("1MiB", func(b *testing.B) { benchLargeResults(b, 1<<20) })
	b.Run("10MiB", func(b *testing.B) { benchLargeResults(b, 10<<20) })
}

func benchLargeResults(b *testing.B, size int) {
	dir := b.TempDir()
	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rec, err := capture.NewRecorder(ctx, s, &capture.RecorderOptions{SpillDir: dir + "/spill"})
	if err != nil {
		b.Fatal(err)
	}
	const n, read = 4, 128 << 10
	bodies := make([][]byte, n)
	for i := range n {
		bodies[i] = []byte(fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n",
			i, strings.Repeat("mcptape-fixture-big-0123456789abcdefghij ", size/40)))
	}
	h := http.Header{"Content-Type": {"text/event-stream"}}
	round := func(r int) {
		taps := make([]*capture.Tap, n)
		for i := range n {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{}}}`, i)
			req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", strings.NewReader(body))
			req.RemoteAddr = fmt.Sprintf("127.0.0.1:%d", 50000+r%1000*4+i)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Mcp-Session-Id", fmt.Sprintf("s-%d-%d", r, i))
			taps[i] = rec.Begin(capture.RequestFrom(req, []byte(body), true))
			taps[i].Response(200, h, false)
		}
		for off := 0; off < len(bodies[0]); off += read {
			for i := range n {
				taps[i].ResponseBody(bodies[i][off:min(off+read, len(bodies[i]))])
			}
		}
		for i := range n {
			taps[i].End("", false)
		}
	}
	round(-1)
	if err := rec.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for r := 0; b.Loop(); r++ {
		round(r)
	}
	if err := rec.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	mib := float64(b.N*n*len(bodies[0])) / (1 << 20)
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/mib, "cpu-ms/MiB")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20)/mib, "alloc-MiB/MiB")
	if err := rec.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if st := rec.Stats(); st.Lost != 0 || st.Stored != st.Messages {
		b.Fatalf("stats: %+v", st)
	}
}
