package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/protocol"
)

// Stores of any size: export, import, `ls` and the dashboard's first page
// on large stores. By default each runs on a small store, so that CI's one
// pass over every benchmark stays short; MCPTAPE_SCALE=1 runs the sizes
// the targets name (100,000 and 1,000,000 sessions; a 530 MB tape), which
// take minutes to generate. MCPTAPE_SCALE_DIR keeps the generated stores
// and tapes there between runs; MCPTAPE_SCALE_PROFILE=DIR writes each
// command's CPU profile there.
//
//	MCPTAPE_SCALE=1 go test -run '^$' -bench 'Scale' -benchtime 1x -timeout 2h ./cmd/mcptape
//
// Times are CPU times (user and system) of the process doing the work,
// which a busy machine does not inflate; wall-clock times are reported
// beside them.

// scaleSessions are the session counts of the export, ls and dashboard
// benchmarks.
func scaleSessions() []int {
	if os.Getenv("MCPTAPE_SCALE") != "" {
		return []int{100_000, 1_000_000}
	}
	return []int{10_000}
}

// scaleDir is where generated stores and tapes go: MCPTAPE_SCALE_DIR,
// kept, or a temporary directory.
func scaleDir(b *testing.B) string {
	if d := os.Getenv("MCPTAPE_SCALE_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		return d
	}
	return b.TempDir()
}

// scaleStore is a Badger store of n sessions, each a 2026-07-28 echo call
// (one exchange, a request and its one-event SSE result), made once per
// directory: the shape of a store a busy agent fills over months.
func scaleStore(b *testing.B, dir string, n int) string {
	data := filepath.Join(dir, fmt.Sprintf("sessions-%d", n))
	if _, err := os.Stat(filepath.Join(data, "complete")); err == nil {
		return data
	}
	os.RemoveAll(data)
	start := time.Now()
	st, err := badgerstore.Open(data, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const per = 1000
	for first := 0; first < n; first += per {
		batch := &capture.Batch{}
		for i := first; i < min(first+per, n); i++ {
			at := t0.Add(time.Duration(i) * time.Second)
			id := fmt.Sprintf("%s-%06x", at.Format("20060102-150405"), i)
			seq, xid := uint64(2*i+1), uint64(i+1)
			req := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"call %d"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"agent","version":"1"}}}}`, i, i)
			res := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"call %d"}]}}`, i, i)
			batch.Sessions = append(batch.Sessions, &capture.Session{ID: id, Upstream: "http://127.0.0.1:8080", Path: "/mcp",
				Opening: "request", Start: at, End: at.Add(2 * time.Millisecond), Era: protocol.EraModern, Version: "2026-07-28",
				Client: protocol.Implementation{Name: "agent", Version: "1"}, Calls: 1, Messages: 2, Exchanges: 1, Status: capture.StatusClosed})
			batch.Exchanges = append(batch.Exchanges, &capture.Exchange{ID: xid, SessionID: id, Method: "POST", URL: "/mcp", Start: at,
				FirstByte: at.Add(time.Millisecond), End: at.Add(2 * time.Millisecond), Status: 200, RequestBody: capture.BodyJSON,
				ResponseBody: capture.BodySSE, RequestBytes: int64(len(req)), ResponseBytes: int64(len(res) + 23), Events: 1,
				RequestHeader:  map[string][]string{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}},
				ResponseHeader: map[string][]string{"Content-Type": {"text/event-stream"}}})
			batch.Messages = append(batch.Messages,
				&capture.Message{Seq: seq, SessionID: id, ExchangeID: xid, Direction: protocol.ClientToServer, Time: at,
					Kind: protocol.KindRequest, Method: "tools/call", Name: "echo", ID: json.RawMessage(strconv.Itoa(i)), Batch: -1, Raw: req, Size: len(req)},
				&capture.Message{Seq: seq + 1, SessionID: id, ExchangeID: xid, Direction: protocol.ServerToClient, Time: at.Add(time.Millisecond),
					Kind: protocol.KindResult, Method: "tools/call", Name: "echo", ID: json.RawMessage(strconv.Itoa(i)), Batch: -1, Raw: res, Size: len(res),
					Links: capture.Links{Request: seq}, SSE: &capture.SSEInfo{Type: "message", Prefix: []byte("event: message\ndata: "), Suffix: []byte("\n\n")}})
		}
		if err := st.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote a store of %d sessions in %v", n, time.Since(start).Round(time.Second))
	return data
}

const scaleChildEnv = "MCPTAPE_SCALE_CHILD_ARGS"

// TestScaleChild is not a test of its own: it is how the scale
// benchmarks' child processes run mcptape. (Unlike the bench's children it
// returns when the command succeeds, so that a CPU profile is written.)
func TestScaleChild(t *testing.T) {
	raw := os.Getenv(scaleChildEnv)
	if raw == "" {
		t.Skip("runs only as a child process of the scale benchmarks")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), args, os.Stdout, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

// child runs mcptape with args in a child process (this test binary, as
// the bench's children run), and returns its CPU time, its peak RSS and
// the wall-clock time it took.
func child(b *testing.B, args ...string) (cpu time.Duration, peakRSS int64, wall time.Duration) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(args)
	flags := []string{"-test.run=^TestScaleChild$"}
	if d := os.Getenv("MCPTAPE_SCALE_PROFILE"); d != "" {
		// The child's CPU profile, for pprof: MCPTAPE_SCALE_PROFILE/<command>.cpu.
		flags = append(flags, "-test.cpuprofile="+filepath.Join(d, args[0]+".cpu"))
	}
	cmd := exec.Command(exe, flags...)
	cmd.Env = append(os.Environ(), scaleChildEnv+"="+string(raw))
	out, errOut := &limitedBuffer{max: 4 << 10}, &limitedBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("mcptape %v: %v\n%s%s", args, err, out.b, errOut.b)
	}
	wall = time.Since(start)
	ps := cmd.ProcessState
	cpu = ps.UserTime() + ps.SystemTime()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		peakRSS = int64(ru.Maxrss) << 10 // kB on Linux
	}
	return cpu, peakRSS, wall
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

var _ io.Writer = (*limitedBuffer)(nil)

// BenchmarkScaleExport exports every session of a store to a tape with
// `mcptape export` (a child process, its progress on stderr), on stores
// of 100,000 and 1,000,000 sessions with MCPTAPE_SCALE=1 (10,000
// otherwise). The target: linear, 50 µs of CPU per session (100k in under
// 5 s, 1M in under 60 s).
func BenchmarkScaleExport(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads the child's rusage")
	}
	dir := scaleDir(b)
	for _, n := range scaleSessions() {
		b.Run(fmt.Sprintf("sessions-%d", n), func(b *testing.B) {
			data := scaleStore(b, dir, n)
			tape := filepath.Join(b.TempDir(), "all.tape.json")
			var cpus, walls []time.Duration
			var peak int64
			for b.Loop() {
				cpu, rss, wall := child(b, "export", "--data", data, "-o", tape)
				cpus, walls, peak = append(cpus, cpu), append(walls, wall), max(peak, rss)
			}
			fi, err := os.Stat(tape)
			if err != nil {
				b.Fatal(err)
			}
			cpu, wall := slices.Min(cpus), slices.Min(walls)
			b.ReportMetric(cpu.Seconds(), "cpu-s")
			b.ReportMetric(wall.Seconds(), "wall-s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/session")
			b.ReportMetric(float64(fi.Size())/1e6, "tape-MB")
			b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
			if limit := time.Duration(n) * exportPerSession; cpu > limit {
				b.Errorf("exporting %d sessions took %v of CPU; the target is under %v (50 µs a session)", n, cpu.Round(time.Millisecond), limit)
			}
		})
	}
}

// exportPerSession is the export's CPU budget per session: 5 s for
// 100,000 sessions.
const exportPerSession = 50 * time.Microsecond
