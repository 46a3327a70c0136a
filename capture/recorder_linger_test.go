package capture_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
)

// TestWriterGathersAndSyncIsImmediate: sequential calls are written
// together, within the recorder's linger of being reported (never much
// later), and Sync does not wait for the writer's linger.
func TestWriterGathersAndSyncIsImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var writes []time.Time
		var msgs []int
		store := memstore.New()
		rec, err := capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{
			OnBatch: func(b *capture.Batch) {
				mu.Lock()
				defer mu.Unlock()
				writes = append(writes, time.Now())
				msgs = append(msgs, len(b.Messages))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Close(context.Background())
		req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", strings.NewReader(""))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		h := http.Header{"Content-Type": {"text/event-stream"}}
		call := func(i int) {
			tap := rec.Begin(capture.RequestFrom(req, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i), true))
			time.Sleep(200 * time.Microsecond)
			tap.Response(200, h, false)
			tap.ResponseBody(fmt.Appendf(nil, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{}}\n\n", i))
			tap.End("", false)
			time.Sleep(300 * time.Microsecond)
		}

		start := time.Now()
		for i := range 20 { // 10 ms of calls, one at a time
			call(i)
		}
		time.Sleep(3 * capture.WriteLinger)
		synctest.Wait()
		mu.Lock()
		n, total := len(writes), 0
		if n == 0 {
			mu.Unlock()
			t.Fatalf("nothing written %v after the last call", 3*capture.WriteLinger)
		}
		for _, m := range msgs {
			total += m
		}
		last := writes[n-1].Sub(start)
		mu.Unlock()
		t.Logf("%d writes, last at %v", n, last)
		if total != 40 {
			t.Fatalf("%d messages written, want 40", total)
		}
		// Gathered: 20 calls in 10 ms take a handful of writes, not 20+.
		if n > 6 {
			t.Errorf("%d writes for 20 calls in 10 ms, want a handful", n)
		}
		// Prompt: the first call started the linger, and the last one was
		// reported at 10 ms, within it.
		if last > capture.WriteLinger+8*time.Millisecond {
			t.Errorf("last write at %v, want within about the linger (%v) of the first call", last, capture.WriteLinger)
		}

		// Sync writes at once, without waiting for the linger.
		call(100)
		before := time.Now()
		if err := rec.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(before); d != 0 {
			t.Errorf("Sync took %v of (fake) time, want 0", d)
		}
		if got := rec.Stats(); got.Stored != 42 || got.Lost != 0 {
			t.Errorf("stats %+v, want 42 stored, none lost", got)
		}
	})
}
