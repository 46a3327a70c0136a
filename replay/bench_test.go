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
	"slices"
	"strings"
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
	var peak uint64
	var slowest time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var tape *replay.Tape
		var err error
		// peakHeap samples the heap while the load runs, and once more
		// while the tape is still alive.
		p, took := peakHeap(func() any {
			b.StartTimer()
			tape, err = replay.LoadTape(path)
			b.StopTimer()
			return tape
		})
		peak = max(peak, p)
		if err != nil || len(tape.Sessions[0].Messages) != 100000 {
			b.Fatalf("load: %v", err)
		}
		slowest = max(slowest, took)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/load")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(st.Size())/(1<<20), "tape-MB")
	if slowest > 2*time.Second {
		b.Errorf("loading the 100k-message tape took %v; the target is under 2 s", slowest.Round(time.Millisecond))
	}
	if mb := float64(peak) / (1 << 20); mb > 300 {
		b.Errorf("loading the 100k-message tape took %.0f MB of heap at its peak; the target is under 300 MB", mb)
	}
}

// notificationTape is a legacy session of n tools/call requests every
// spacing, each setting off a log notification on the standalone GET
// stream gap(i) after it.
func notificationTape(n int, spacing time.Duration, gap func(i int) time.Duration) *replay.Tape {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := &replay.TapeSession{Session: &capture.Session{ID: "notes", Era: protocol.EraLegacy, Version: "2025-11-25", Path: "/mcp",
		Opening: "initialize", Start: t0}}
	seq, xid := uint64(0), uint64(0)
	x := func(method string, status int, body capture.BodyKind, at time.Time) uint64 {
		xid++
		ts.Exchanges = append(ts.Exchanges, &capture.Exchange{ID: xid, SessionID: "notes", Method: method, URL: "/mcp", Status: status,
			Start: at, End: at, RequestHeader: http.Header{}, ResponseHeader: http.Header{}, ResponseBody: body})
		return xid
	}
	msg := func(x uint64, dir protocol.Direction, at time.Time, raw string, req uint64) uint64 {
		seq++
		d := protocol.Decode([]byte(raw))
		ts.Messages = append(ts.Messages, &capture.Message{Seq: seq, SessionID: "notes", ExchangeID: x, Direction: dir, Time: at,
			Kind: d.Kind, Method: d.Method, ID: d.ID, Raw: []byte(raw), Size: len(raw), Batch: -1, Links: capture.Links{Request: req}})
		return seq
	}
	c2s, s2c := protocol.ClientToServer, protocol.ServerToClient
	ix := x("POST", 200, capture.BodyJSON, t0)
	init := msg(ix, c2s, t0, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, 0)
	msg(ix, s2c, t0, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"logging":{}},"serverInfo":{"name":"s","version":"1"}}}`, init)
	get := x("GET", 200, capture.BodySSE, t0)
	type note struct {
		at  time.Time
		raw string
	}
	var pending []note
	flush := func(before time.Time) {
		for len(pending) > 0 && pending[0].at.Before(before) {
			msg(get, s2c, pending[0].at, pending[0].raw, 0)
			pending = pending[1:]
		}
	}
	for i := 0; i < n; i++ {
		at := t0.Add(time.Duration(i+1) * spacing)
		flush(at)
		cx := x("POST", 200, capture.BodyJSON, at)
		req := msg(cx, c2s, at, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"work","arguments":{"i":%d}}}`, i+1, i), 0)
		msg(cx, s2c, at, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"done %d"}]}}`, i+1, i), req)
		pending = append(pending, note{at.Add(gap(i)), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"n%d"}}`, i)})
	}
	flush(t0.Add(time.Duration(n+2) * spacing))
	return &replay.Tape{Sessions: []*replay.TapeSession{ts}}
}

// BenchmarkGetStreamPacing replays a 1,000-call tape whose calls each set
// off a notification on the standalone GET stream, at recorded timing, to
// a client that calls at the recorded pace: the added delay of each
// notification is how much later it came after its call than it did in
// the recording. Target: p99 under 5 ms. Figures: p50, p99 and max added
// delay.
func BenchmarkGetStreamPacing(b *testing.B) {
	const n, spacing = 1000, 3 * time.Millisecond
	gap := func(i int) time.Duration { return time.Duration(200+(i*137)%1800) * time.Microsecond } // 0.2 to 2 ms
	tape := notificationTape(n, spacing, gap)
	var added []time.Duration
	for range b.N {
		s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingRecorded, Strict: true})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(s)
		added = append(added, replayNotes(b, hs.URL+"/mcp", n, spacing, gap)...)
		if r := s.Report(); !r.OK() || r.Served != n+1 {
			b.Fatalf("strict replay: served %d, failures %q", r.Served, r.Failures)
		}
		s.Close()
		hs.CloseClientConnections()
		hs.Close()
	}
	slices.Sort(added)
	pct := func(p float64) time.Duration { return added[min(len(added)-1, int(p*float64(len(added))))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-added-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-added-ms")
	b.ReportMetric(float64(added[len(added)-1].Microseconds())/1000, "max-added-ms")
	if p99 := pct(0.99); p99 >= 5*time.Millisecond {
		b.Errorf("p99 added delay of a GET-stream notification is %v; the target is under 5 ms", p99)
	}
}

// replayNotes plays the bench client against a replay of notificationTape:
// initialize, the GET stream, then the n calls at their recorded offsets.
// It returns each notification's added delay.
func replayNotes(b *testing.B, u string, n int, spacing time.Duration, gap func(int) time.Duration) []time.Duration {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	do := func(method, sid, body string) *http.Response {
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		res, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	res := do("POST", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	sid := res.Header.Get("Mcp-Session-Id")
	stream := do("GET", sid, "")
	arrived := make([]time.Time, n)
	got := make(chan int, n)
	go func() {
		defer close(got)
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, `"data":"n`); i >= 0 {
				var k int
				fmt.Sscanf(line[i+len(`"data":"n`):], "%d", &k)
				if k >= 0 && k < n && arrived[k].IsZero() {
					arrived[k] = time.Now()
					got <- k
				}
			}
		}
	}()
	sent := make([]time.Time, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i+1) * spacing))) // the benchmark paces its calls in real time
		sent[i] = time.Now()
		res := do("POST", sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"work","arguments":{"i":%d}}}`, i+1, i))
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	deadline := time.After(10 * time.Second)
	for c := 0; c < n; c++ {
		select {
		case _, ok := <-got:
			if !ok {
				b.Fatalf("the GET stream ended after %d of %d notifications", c, n)
			}
		case <-deadline:
			b.Fatalf("%d of %d notifications came", c, n)
		}
	}
	stream.Body.Close()
	added := make([]time.Duration, n)
	for i := range n {
		added[i] = arrived[i].Sub(sent[i]) - gap(i)
	}
	return added
}
