package replay_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// calls makes n distinct echo calls to u, one after another, and returns
// how long they took.
func calls(b *testing.B, u string, n int) time.Duration {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	start := time.Now()
	for i := 1; i <= n; i++ {
		req, _ := http.NewRequest("POST", u, strings.NewReader(modernCall(i, "echo", fmt.Sprintf(`{"text":"call %d"}`, i))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		res, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !bytes.Contains(body, []byte(fmt.Sprintf(`"text":"call %d"`, i))) {
			b.Fatalf("call %d: %s", i, body)
		}
	}
	return time.Since(start)
}

// BenchmarkReplayServer10k records 10,000 echo calls to the live fixture
// server, then replays them: the replay server must answer at least as
// fast as the live server did (issue 4), else the benchmark fails.
// Figures: live and replay calls/s, and their ratio.
func BenchmarkReplayServer10k(b *testing.B) {
	const n = 10000
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	live := calls(b, up.URL+fixtures.PathStateless, n)

	tape := recordTape(b, up.URL, func(px string) { calls(b, px+fixtures.PathStateless, n) })
	s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingFast})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		total += calls(b, hs.URL+fixtures.PathStateless, n)
	}
	b.StopTimer()
	if r := s.Report(); r.Served < n || len(r.Misses) > 0 {
		b.Fatalf("replay served %d, missed %d", r.Served, len(r.Misses))
	}
	replayed := total / time.Duration(b.N)
	ratio := live.Seconds() / replayed.Seconds()
	b.ReportMetric(float64(n)/live.Seconds(), "live-calls/s")
	b.ReportMetric(float64(n)/replayed.Seconds(), "replay-calls/s")
	b.ReportMetric(ratio, "replay/live")
	if ratio < 1 {
		b.Errorf("the replay server answered %.0f calls/s, slower than the live fixture server's %.0f (replay/live %.2f; the target is at least 1)",
			float64(n)/replayed.Seconds(), float64(n)/live.Seconds(), ratio)
	}
}

// heapBytes is the heap in use now: the bytes of heap spans in use, as
// runtime/metrics counts them without stopping the world.
func heapBytes(samples []metrics.Sample) uint64 {
	metrics.Read(samples)
	var n uint64
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += s.Value.Uint64()
		}
	}
	return n
}

// BenchmarkLoadTape100k loads a tape of 100,000 messages: the target is
// under 2 s and under 300 MB.
func BenchmarkLoadTape100k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.tape.json")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	ts := &replay.TapeSession{Session: &capture.Session{ID: "big", Era: protocol.EraModern, Version: protocol.V20260728, Path: "/mcp",
		Start: time.Unix(1_800_000_000, 0).UTC()}}
	t0 := ts.Session.Start
	for i := 1; i <= 50000; i++ {
		x := &capture.Exchange{ID: uint64(i), SessionID: "big", Method: "POST", URL: "/mcp", Status: 200,
			RequestHeader:  http.Header{"Content-Type": {"application/json"}, "Mcp-Method": {"tools/call"}},
			ResponseHeader: http.Header{"Content-Type": {"text/event-stream"}},
			Start:          t0, End: t0, RequestBody: capture.BodyJSON, ResponseBody: capture.BodySSE}
		ts.Exchanges = append(ts.Exchanges, x)
		req := []byte(modernCall(i, "echo", fmt.Sprintf(`{"text":"call %d"}`, i)))
		res := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"resultType":"complete","content":[{"type":"text","text":"call %d"}]}}`, i, i))
		ts.Messages = append(ts.Messages,
			&capture.Message{Seq: uint64(2*i - 1), SessionID: "big", ExchangeID: x.ID, Direction: protocol.ClientToServer, Time: t0,
				Kind: protocol.KindRequest, Method: "tools/call", Name: "echo", Batch: -1, Raw: req, Size: len(req)},
			&capture.Message{Seq: uint64(2 * i), SessionID: "big", ExchangeID: x.ID, Direction: protocol.ServerToClient, Time: t0,
				Kind: protocol.KindResult, Method: "tools/call", Name: "echo", Batch: -1, Raw: res, Size: len(res),
				SSE:   &capture.SSEInfo{Type: "message", Prefix: []byte("event: message\ndata: "), Suffix: []byte("\n\n")},
				Links: capture.Links{Request: uint64(2*i - 1)}})
	}
	if err := replay.WriteTape(w, &replay.Tape{Sessions: []*replay.TapeSession{ts}}); err != nil {
		b.Fatal(err)
	}
	w.Flush()
	f.Close()
	ts = nil
	runtime.GC()
	st, _ := os.Stat(path)
	b.ResetTimer()
	var peak atomic.Uint64
	raise := func(v uint64) {
		for {
			old := peak.Load()
			if v <= old || peak.CompareAndSwap(old, v) {
				return
			}
		}
	}
	var slowest time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
		base := heapBytes(samples)
		var baseStats runtime.MemStats
		runtime.ReadMemStats(&baseStats)
		done, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			own := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				if h := heapBytes(own); h > base {
					raise(h - base)
				}
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		}()
		b.StartTimer()
		start := time.Now()
		tape, err := replay.LoadTape(path)
		took := time.Since(start)
		b.StopTimer()
		// The tape is still alive and nothing has collected since: what
		// is in use now bounds the peak from below, whatever the sampler
		// missed between its ticks.
		if h := heapBytes(samples); h > base {
			raise(h - base)
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if after.HeapInuse > baseStats.HeapInuse {
			raise(after.HeapInuse - baseStats.HeapInuse)
		}
		close(done)
		<-stopped
		if err != nil || len(tape.Sessions[0].Messages) != 100000 {
			b.Fatalf("load: %v", err)
		}
		runtime.KeepAlive(tape)
		slowest = max(slowest, took)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/load")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(st.Size())/(1<<20), "tape-MB")
	if slowest > 2*time.Second {
		b.Errorf("loading the 100k-message tape took %v; the target is under 2 s", slowest.Round(time.Millisecond))
	}
	if mb := float64(peak.Load()) / (1 << 20); mb > 300 {
		b.Errorf("loading the 100k-message tape took %.0f MB of heap at its peak; the target is under 300 MB", mb)
	}
}
