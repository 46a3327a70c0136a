package capture_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
)

// BenchmarkRecorderEcho is the recorder's share of one 2026-07-28 echo call
// (request, SSE response with one event), fed through the Tap API the
// proxy uses as fast as the recorder takes them, into a store that keeps
// nothing: what recording costs outside the batch writer. It reports the
// allocations per message recorded (the target: at most allocTarget);
// capture/badgerstore's BenchmarkRecorderCalls measures the CPU time of
// paced calls into Badger.
func BenchmarkRecorderEcho(b *testing.B) {
	rec, err := capture.NewRecorder(context.Background(), discard{}, nil)
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
	var body, resp, id []byte
	call := func(i int) {
		id = strconv.AppendInt(id[:0], int64(i), 10)
		body = append(append(append(body[:0], `{"jsonrpc":"2.0","id":`...), id...),
			`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`...)
		t := rec.Begin(capture.RequestFrom(req, body, true))
		t.Response(200, h, false)
		resp = append(append(append(resp[:0], "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"...), id...),
			`,"result":{"content":[{"type":"text","text":"x"}]}}`+"\n\n"...)
		t.ResponseBody(resp)
		t.End("", false)
	}
	measureAllocs(b, rec, call, 2)
}

// BenchmarkRecorderSampling is BenchmarkRecorderEcho for a 2025-11-25
// sampling round trip (4 messages in 2 exchanges): the tools/call, the
// server's sampling/createMessage on its stream, the client's answer
// POSTed back (202), the result.
func BenchmarkRecorderSampling(b *testing.B) {
	rec, err := capture.NewRecorder(context.Background(), discard{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", strings.NewReader(""))
	req.RemoteAddr = "127.0.0.1:50000"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	t := rec.Begin(capture.RequestFrom(req, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"bench","version":"1"}}}`), true))
	t.Response(200, http.Header{"Content-Type": {"application/json"}, "Mcp-Session-Id": {"bench-session"}}, false)
	t.ResponseBody([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fixture","version":"1"}}}`))
	t.End("", false)
	req.Header.Set("Mcp-Session-Id", "bench-session")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	var body, resp, id []byte
	call := func(i int) {
		id = strconv.AppendInt(id[:0], int64(i), 10)
		body = append(append(append(body[:0], `{"jsonrpc":"2.0","id":`...), id...), `,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"bench"}}}`...)
		t := rec.Begin(capture.RequestFrom(req, body, true))
		t.Response(200, sse, false)
		resp = append(append(append(resp[:0], "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"s-"...), id...),
			`","method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"bench"}}],"maxTokens":100}}`+"\n\n"...)
		t.ResponseBody(resp)
		body = append(append(append(body[:0], `{"jsonrpc":"2.0","id":"s-`...), id...),
			`","result":{"role":"assistant","content":{"type":"text","text":"bench answer"},"model":"bench","stopReason":"endTurn"}}`...)
		a := rec.Begin(capture.RequestFrom(req, body, true))
		a.Response(http.StatusAccepted, nil, false)
		a.End("", false)
		resp = append(append(append(resp[:0], "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"...), id...),
			`,"result":{"content":[{"type":"text","text":"bench answer"}]}}`+"\n\n"...)
		t.ResponseBody(resp)
		t.End("", false)
	}
	measureAllocs(b, rec, call, 4)
}

// measureAllocs makes b.N calls after a thousand to warm up, and reports
// the allocations per message, each call recording msgs messages.
func measureAllocs(b *testing.B, rec *capture.Recorder, call func(i int), msgs int) {
	for i := range 1000 { // warm: the session, the pools
		call(-i - 1)
	}
	if err := rec.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; b.Loop(); i++ {
		call(i)
	}
	if err := rec.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	n := float64(msgs * b.N)
	allocs := float64(m1.Mallocs-m0.Mallocs) / n
	b.ReportMetric(allocs, "allocs/msg")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n, "B/msg")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/n, "µs/msg")
	if err := rec.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	if st := rec.Stats(); st.Lost != 0 || st.Stored != st.Messages {
		b.Fatalf("stats: %+v", st)
	}
	if b.N >= 100 && allocs > allocTarget {
		b.Errorf("recording a small message took %.1f allocations outside the batch writer; the target is at most %d", allocs, allocTarget)
	}
}

// allocTarget is the most heap allocations recording one small message may
// take outside the batch writer (the Tap calls, decoding, linking,
// batching).
const allocTarget = 5

// discard is a store that keeps nothing.
type discard struct{}

func (discard) Write(context.Context, *capture.Batch) error { return nil }
func (discard) LastIDs(context.Context) (uint64, uint64, error) {
	return 0, 0, nil
}
func (discard) CopiesRaw() {}
