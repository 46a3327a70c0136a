package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkRecordLargeResponse streams a 200 MiB response through a real
// `mcptape record` process (a child, recording into Badger on disk, with
// its defaults) and reports the child's peak RSS (VmHWM): it must stay
// under 150 MB, as JSON, as one 200 MiB SSE event, and as 200 events of
// 1 MiB. The proxy buffers none of it; the recorder keeps the first
// 16 MiB of one message (--max-record-bytes's default) and forwards the
// rest unrecorded, marked oversize.
func BenchmarkRecordLargeResponse(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc")
	}
	const size = 200 << 20
	chunk := []byte(strings.Repeat("mcptape-large-0123456789abcdefghijklmnopqrstuvwxyz ", 64<<10/51))
	for _, c := range []struct {
		name string
		ct   string
		head string
		body func(w io.Writer) // writes size bytes
		tail string
	}{
		{"json", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`, nil, `"}]}}`},
		{"sse-one-event", "text/event-stream", "event: message\ndata: " + `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`, nil, `"}]}}` + "\n\n"},
		{"sse-200-events", "text/event-stream", "", func(w io.Writer) {
			ev := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"" +
				strings.Repeat("m", 1<<20-120) + "\"}}\n\n")
			for n := 0; n < size; n += len(ev) {
				w.Write(ev)
			}
		}, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", c.ct)
				io.WriteString(w, c.head)
				if c.body != nil {
					c.body(w)
				} else {
					for n := 0; n < size; n += len(chunk) {
						w.Write(chunk)
					}
				}
				io.WriteString(w, c.tail)
			}))
			defer up.Close()
			cmd, base, _ := childRecord(b, b.TempDir(), "--upstream", up.URL+"/mcp")
			pid := cmd.Process.Pid
			before := statusKB(pid, "VmRSS")
			hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
			var total int64
			start := time.Now()
			for b.Loop() {
				res, err := hc.Post(base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`))
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err != nil || n < size {
					b.Fatalf("got %d bytes, %v", n, err)
				}
				total += n
			}
			elapsed := time.Since(start)
			peak := statusKB(pid, "VmHWM")
			b.ReportMetric(float64(peak)/1000, "peak-RSS-MB")
			b.ReportMetric(float64(before)/1000, "start-RSS-MB")
			b.ReportMetric(float64(total)/(1<<20)/elapsed.Seconds(), "MiB/s")
			if peak >= 150_000 {
				b.Errorf("peak RSS %.1f MB streaming a 200 MiB %s response: want under 150 MB", float64(peak)/1000, c.name)
			}
		})
	}
}

// statusKB reads a "Key:  N kB" line of /proc/PID/status.
func statusKB(pid int, key string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
