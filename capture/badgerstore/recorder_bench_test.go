package badgerstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
)

// BenchmarkRecorderPaced is the recording side of sequential echo calls
// (the bench's echo scenario at concurrency 1): a 2026-07-28 tools/call and
// its one-event SSE result, fed through the Tap API the proxy uses, with
// 500 µs between the request and its answer, into a store on disk. Between calls the recorder's
// goroutines go idle, so what it reports — the process's CPU time per call,
// the proxy-side Tap calls included — holds the wakeups, commits and
// scheduling that a benchmark at full speed batches away.
func BenchmarkRecorderPaced(b *testing.B) {
	s, err := badgerstore.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cs := &countingStore{Store: s}
	rec, err := capture.NewRecorder(ctx, cs, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}}
	req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", strings.NewReader(""))
	req.RemoteAddr = "127.0.0.1:50000"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	call := func(i int) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`, i)
		t := rec.Begin(capture.RequestFrom(req, []byte(body), true))
		time.Sleep(500 * time.Microsecond) // the upstream's answer
		t.Response(200, h, false)
		t.ResponseBody([]byte(fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}}\n\n", i)))
		t.End("", false)
	}
	for i := range 200 {
		call(-i)
	}
	if err := rec.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	cpu0, w0 := cpuTime(), cs.writes.Load()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		call(i)
	}
	if err := rec.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
	b.ReportMetric(float64(cs.writes.Load()-w0)/float64(b.N), "writes/call")
	if err := rec.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if st := rec.Stats(); st.Lost != 0 || st.Stored != st.Messages {
		b.Fatalf("stats: %+v", st)
	}
}

// countingStore counts the recorder's store writes.
type countingStore struct {
	capture.Store
	writes atomic.Int64
}

func (c *countingStore) Write(ctx context.Context, b *capture.Batch) error {
	c.writes.Add(1)
	return c.Store.Write(ctx, b)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
