package badgerstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
)

// The recording side of small calls: the recorder's share of the bench's
// echo (c=1 and c=32) and sampling scenarios, fed through the Tap API as
// the proxy feeds it, into a store on disk. Each reports, per message
// recorded:
//
//   - cpu-µs/msg: the process's CPU time (user and system, every
//     goroutine: the Tap calls, the pipeline, the writer and Badger's own)
//     less what the same calls cost with no recorder (the driver's sleeps
//     and body building), per message;
//   - allocs/msg: heap allocations, the store's included.
//
// The target is at most recordCPUTarget of CPU per small message (a miss
// fails the benchmark). The calls are paced as the bench's upstream paces
// them (upstreamDelay between a request and its answer), so that the
// recorder's goroutines go idle between calls and the wakeups, commits and
// scheduling a recorder at full speed batches away are counted. CPU time,
// not wall-clock time: the figures hold on a busy machine.
//
// A single caller's scenarios run on one P, as `mcptape record` and `wrap`
// run at that load (they keep one P until the process uses most of a
// core); the busy one on every P, as they run then. On two Ps the same
// c=1 calls cost 40-47 µs a message instead of 25-30 on this project's
// benchmark machine: the wakeups of a second thread that finds no work,
// which the product does not pay.
//
//	go test -run '^$' -bench 'RecorderCalls' -benchtime 2000x ./capture/badgerstore
func BenchmarkRecorderCalls(b *testing.B) {
	for _, bc := range []struct {
		name  string
		conc  int
		call  func(*caller)
		msgs  int // messages recorded per call
		setup func(*caller)
	}{
		{"echo-c1", 1, (*caller).echo, 2, nil},
		{"echo-c32", 32, (*caller).echo, 2, nil},
		{"sampling-c1", 1, (*caller).sampling, 4, (*caller).initialize},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.conc == 1 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			}
			s, err := badgerstore.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			rec, err := capture.NewRecorder(ctx, s, nil)
			if err != nil {
				b.Fatal(err)
			}
			calls := max(b.N, minMeasuredCalls)
			run := func(rec *capture.Recorder, n int) (cpu time.Duration, allocs uint64) {
				callers := make([]*caller, bc.conc)
				for i := range callers {
					callers[i] = newCaller(rec, i)
					if bc.setup != nil {
						bc.setup(callers[i])
					}
				}
				if rec != nil {
					if err := rec.Sync(ctx); err != nil {
						b.Fatal(err)
					}
				}
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				cpu0 := cpuTime()
				var wg sync.WaitGroup
				var left atomic.Int64
				left.Store(int64(n))
				for _, c := range callers {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							bc.call(c)
						}
					})
				}
				wg.Wait()
				if rec != nil {
					if err := rec.Sync(ctx); err != nil {
						b.Fatal(err)
					}
				}
				cpu = cpuTime() - cpu0
				runtime.ReadMemStats(&m1)
				return cpu, m1.Mallocs - m0.Mallocs
			}
			run(rec, calls/4+20) // warm: the session, Badger's first memtable
			// Rounds with and without the recorder alternate, so that
			// the machine's other load weighs on both alike.
			var base, cpu time.Duration
			var baseAllocs, allocs uint64
			b.ResetTimer()
			for r := range measureRounds {
				n := calls/measureRounds + min(1, calls%measureRounds/(r+1))
				c, a := run(nil, n)
				base, baseAllocs = base+c, baseAllocs+a
				c, a = run(rec, n)
				cpu, allocs = cpu+c, allocs+a
			}
			b.StopTimer()
			msgs := float64(calls * bc.msgs)
			perMsg := float64((cpu - base).Microseconds()) / msgs
			b.ReportMetric(perMsg, "cpu-µs/msg")
			b.ReportMetric(float64(allocs-min(allocs, baseAllocs))/msgs, "allocs/msg")
			b.ReportMetric(float64(cpu.Microseconds())/float64(calls), "cpu-µs/call")
			b.ReportMetric(float64(base.Microseconds())/float64(calls), "driver-cpu-µs/call")
			if err := rec.Close(ctx); err != nil {
				b.Fatal(err)
			}
			if st := rec.Stats(); st.Lost != 0 || st.Stored != st.Messages || st.Dropped != 0 {
				b.Fatalf("stats: %+v", st)
			}
			if perMsg > recordCPUTarget {
				b.Errorf("recording a small message took %.1f µs of CPU; the target is at most %d µs", perMsg, recordCPUTarget)
			}
		})
	}
}

// recordCPUTarget is the most CPU time, in µs, recording one small message
// may take (the Tap calls, decoding, linking, writing to Badger).
const recordCPUTarget = 40

// measureRounds is how many rounds with the recorder and without it a
// measurement alternates.
const measureRounds = 8

// minMeasuredCalls is the fewest calls a measurement makes, whatever b.N
// (CI runs every benchmark once): fewer would measure noise.
const minMeasuredCalls = 300

// upstreamDelay is how long the upstream takes to answer a call.
const upstreamDelay = 500 * time.Microsecond

// caller makes calls through a recorder as the proxy reports them: its
// bodies are built into reused buffers, so that what it allocates is the
// recorder's (and the Request each call needs, as the proxy's).
type caller struct {
	rec     *capture.Recorder // nil: the calls cost only the driver's work
	who     int
	id      []byte
	req     *http.Request
	sse     http.Header
	json    http.Header
	reqBody []byte
	resp    []byte
	sess    string
}

var callIDs atomic.Int64

func newCaller(rec *capture.Recorder, who int) *caller {
	req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", strings.NewReader(""))
	req.RemoteAddr = "127.0.0.1:" + strconv.Itoa(50000+who)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return &caller{rec: rec, who: who, req: req,
		sse:  http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}},
		json: http.Header{"Content-Type": {"application/json"}}}
}

// begin reports a POST with body, as the proxy does once it has read it.
func (c *caller) begin(body []byte) *capture.Tap {
	if c.rec == nil {
		return nil
	}
	return c.rec.Begin(capture.RequestFrom(c.req, body, true))
}

// echo is a 2026-07-28 tools/call of the echo tool with its one-event SSE
// result, as the bench's echo scenario makes it.
func (c *caller) echo() {
	if c.req.Header.Get("Mcp-Method") == "" {
		c.req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		c.req.Header.Set("Mcp-Method", "tools/call")
		c.req.Header.Set("Mcp-Name", "echo")
	}
	c.id = strconv.AppendInt(c.id[:0], callIDs.Add(1), 10)
	id := c.id
	c.reqBody = append(append(append(c.reqBody[:0], `{"jsonrpc":"2.0","id":`...), id...),
		`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"mcptape-bench-echo"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcptape-bench","version":"1"}}}}`...)
	t := c.begin(c.reqBody)
	time.Sleep(upstreamDelay) // the benchmark measures calls at a real upstream's pace
	t.Response(200, c.sse, false)
	c.resp = append(append(append(c.resp[:0], "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"...), id...),
		`,"result":{"content":[{"type":"text","text":"mcptape-bench-echo"}]}}`+"\n\n"...)
	t.ResponseBody(c.resp)
	t.End("", false)
}

// initialize opens the caller's 2025-11-25 session (sampling).
func (c *caller) initialize() {
	c.sess = "bench-session-" + strconv.Itoa(c.who)
	body := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"mcptape-bench","version":"1"}}}`)
	t := c.begin(body)
	h := c.json.Clone()
	h.Set("Mcp-Session-Id", c.sess)
	t.Response(200, h, false)
	t.ResponseBody([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fixture","version":"1"}}}`))
	t.End("", false)
	c.req.Header.Set("Mcp-Session-Id", c.sess)
	c.req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	t = c.begin([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	t.Response(http.StatusAccepted, nil, false)
	t.End("", false)
}

// sampling is a 2025-11-25 sampling round trip, as the bench's sampling
// scenario makes it: tools/call, the server's sampling/createMessage on
// the call's stream, the client's answer POSTed back (202), then the
// result on the stream.
func (c *caller) sampling() {
	c.id = strconv.AppendInt(c.id[:0], callIDs.Add(1), 10)
	id := c.id
	c.reqBody = append(append(append(c.reqBody[:0], `{"jsonrpc":"2.0","id":`...), id...),
		`,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"mcptape bench"}}}`...)
	t := c.begin(c.reqBody)
	time.Sleep(upstreamDelay / 2) // the upstream's pace, as above
	t.Response(200, c.sse, false)
	c.resp = append(append(append(c.resp[:0], "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"s-"...), id...),
		`","method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"mcptape bench"}}],"maxTokens":100}}`+"\n\n"...)
	t.ResponseBody(c.resp)
	c.reqBody = append(append(append(c.reqBody[:0], `{"jsonrpc":"2.0","id":"s-`...), id...),
		`","result":{"role":"assistant","content":{"type":"text","text":"bench answer"},"model":"mcptape-bench","stopReason":"endTurn"}}`...)
	a := c.begin(c.reqBody)
	a.Response(http.StatusAccepted, nil, false)
	a.End("", false)
	time.Sleep(upstreamDelay / 2) // the upstream's pace, as above
	c.resp = append(append(append(c.resp[:0], "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"...), id...),
		`,"result":{"content":[{"type":"text","text":"bench answer"}]}}`+"\n\n"...)
	t.ResponseBody(c.resp)
	t.End("", false)
}
