package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/protocol"
)

// Stores of any size: export, import, `ls` and the dashboard's first page
// on large stores. By default each runs on a small store, so that CI's one
// pass over every benchmark stays short; MCPTAPE_SCALE=1 runs the sizes
// the targets name (100,000 and 1,000,000 sessions; a 530 MB tape), which
// take minutes to generate. MCPTAPE_SCALE_DIR keeps the generated stores
// and tapes there between runs; MCPTAPE_SCALE_PROFILE=DIR writes each
// command's CPU and memory profiles there.
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
	return generatedStore(b, filepath.Join(dir, fmt.Sprintf("sessions-%d", n)), func(write func(*capture.Batch)) {
		fillSessions(n, write)
	})
}

// generatedStore is the store in data that fill writes, made once: one
// whose making finished is marked so, and kept for the next run.
func generatedStore(b *testing.B, data string, fill func(write func(*capture.Batch))) string {
	if _, err := os.Stat(filepath.Join(data, "complete")); err == nil {
		return data
	}
	os.RemoveAll(data)
	start := time.Now()
	st, err := badgerstore.Open(data, nil)
	if err != nil {
		b.Fatal(err)
	}
	fill(func(batch *capture.Batch) {
		if err := st.Write(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	})
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s in %v", data, time.Since(start).Round(time.Second))
	return data
}

// fillSessions writes n sessions of one echo call each.
func fillSessions(n int, write func(*capture.Batch)) {
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
		write(batch)
	}
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
	// Its own peak: the rusage its parent gets counts the parent's memory
	// as well (the child shares it until exec).
	fmt.Fprintf(os.Stderr, "%s%d\n", peakRSSLine, statusKB(os.Getpid(), "VmHWM"))
}

// peakRSSLine starts the line a scale child ends with: its peak RSS in kB.
const peakRSSLine = "mcptape-scale-child-peak-rss-kB: "

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
		flags = append(flags, "-test.cpuprofile="+filepath.Join(d, args[0]+".cpu"), "-test.memprofile="+filepath.Join(d, args[0]+".mem"))
	}
	cmd := exec.Command(exe, flags...)
	cmd.Env = append(os.Environ(), scaleChildEnv+"="+string(raw))
	out, errOut := &limitedBuffer{max: 4 << 10}, &tailBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("mcptape %v: %v\n%s%s", args, err, out.b, errOut.b)
	}
	wall = time.Since(start)
	ps := cmd.ProcessState
	cpu = ps.UserTime() + ps.SystemTime()
	if _, rest, ok := strings.Cut(string(errOut.b), peakRSSLine); ok {
		kb, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		peakRSS = kb << 10
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

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

var _, _ io.Writer = (*limitedBuffer)(nil), (*tailBuffer)(nil)

// BenchmarkScaleExport exports every session of a store to a tape with
// `mcptape export` (a child process, its progress on stderr), on stores
// of 100,000 and 1,000,000 sessions with MCPTAPE_SCALE=1 (10,000
// otherwise). The target: linear, 50 µs of CPU per session (100k in under
// 5 s, 1M in under 60 s).
func BenchmarkScaleExport(b *testing.B) {
	dir := scaleDir(b)
	for _, n := range scaleSessions() {
		b.Run(fmt.Sprintf("sessions-%d", n), func(b *testing.B) {
			data := scaleStore(b, dir, n)
			tape := filepath.Join(b.TempDir(), "all.tape.json")
			var cpus, walls []time.Duration
			var peak int64
			// A small store's export lasts a fraction of a second, one
			// sample of which a busy machine (CI runs other jobs beside
			// the benchmarks) can push past the target: it is taken three
			// times, and judged by the least, as every size is by its
			// iterations'.
			tries := 1
			if n < 100_000 {
				tries = 3
			}
			for b.Loop() {
				for range tries {
					cpu, rss, wall := child(b, "export", "--data", data, "-o", tape)
					cpus, walls, peak = append(cpus, cpu), append(walls, wall), max(peak, rss)
				}
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

// BenchmarkScaleList lists the newest sessions of a large store (1,000,000
// with MCPTAPE_SCALE=1, 10,000 otherwise) as a user does: `mcptape ls
// --limit 20` (a child process: opening the store included), and the
// dashboard's first page of sessions (GET /api/v1/sessions, on a store
// the dashboard has open). The target for each: under 100 ms, judged by
// the CPU time of the median run.
func BenchmarkScaleList(b *testing.B) {
	dir := scaleDir(b)
	sizes := scaleSessions()
	n := sizes[len(sizes)-1]
	data := scaleStore(b, dir, n)
	b.Run(fmt.Sprintf("ls/sessions-%d", n), func(b *testing.B) {
		var cpus, walls []time.Duration
		for range max(b.N, 9) {
			cpu, _, wall := child(b, "ls", "--data", data, "--limit", "20")
			cpus, walls = append(cpus, cpu), append(walls, wall)
		}
		reportMedians(b, "ls --limit 20", cpus, walls)
	})
	b.Run(fmt.Sprintf("dashboard-first-page/sessions-%d", n), func(b *testing.B) {
		st, err := badgerstore.Open(data, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		d, err := dashboard.New(st, &dashboard.Options{Token: "scale-bench-token"})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		get := func() {
			req := httptest.NewRequest("GET", "http://127.0.0.1/api/v1/sessions", nil)
			req.Header.Set("Authorization", "Bearer scale-bench-token")
			rec := httptest.NewRecorder()
			d.ServeHTTP(rec, req)
			var page struct {
				Sessions []json.RawMessage `json:"sessions"`
				Total    int               `json:"total"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &page); rec.Code != 200 || err != nil || len(page.Sessions) != 50 || page.Total != n {
				b.Fatalf("GET /api/v1/sessions: %d, %d sessions of %d (%v)\n%.300s", rec.Code, len(page.Sessions), page.Total, err, rec.Body)
			}
		}
		get()                  // the first, which opens what the store reads through
		runtime.LockOSThread() // threadCPU measures this goroutine's thread
		defer runtime.UnlockOSThread()
		var cpus, walls []time.Duration
		for range max(b.N, 9) {
			cpu0, start := threadCPU(), time.Now()
			get()
			cpus, walls = append(cpus, threadCPU()-cpu0), append(walls, time.Since(start))
		}
		reportMedians(b, "the dashboard's first page", cpus, walls)
	})
}

// threadCPU is the CPU time of the calling thread so far: a request is
// served on one goroutine, which the caller locks to its thread.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	// CLOCK_THREAD_CPUTIME_ID
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// listTarget is what listing the newest sessions may take.
const listTarget = 100 * time.Millisecond

// reportMedians reports the median CPU and wall-clock times of runs of
// what, and a miss of listTarget by the CPU time.
func reportMedians(b *testing.B, what string, cpus, walls []time.Duration) {
	slices.Sort(cpus)
	slices.Sort(walls)
	cpu, wall := cpus[len(cpus)/2], walls[len(walls)/2]
	b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms")
	b.ReportMetric(float64(wall.Microseconds())/1000, "wall-ms")
	if cpu > listTarget {
		b.Errorf("%s took %v of CPU (median); the target is under %v", what, cpu.Round(time.Millisecond), listTarget)
	}
}

// tapeStore is a store shaped like a long recording, whose tape is about
// mb megabytes (its messages are nine tenths of it): four 2026-07-28 sessions of tools/call calls answered on an
// SSE stream with a result of about 4 kB (every 500th, 1 MiB), every tenth
// with a progress notification first.
func tapeStore(b *testing.B, dir string, mb int) string {
	return generatedStore(b, filepath.Join(dir, fmt.Sprintf("tape-store-%dMB", mb)), func(write func(*capture.Batch)) {
		fillRecording(mb, write)
	})
}

// fillRecording writes a long recording whose tape is about mb megabytes.
func fillRecording(mb int, write func(*capture.Batch)) {
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	seq, xid, written := uint64(0), uint64(0), 0
	words := []string{"alpha ", "bravo ", "charlie ", "delta ", "echo ", "foxtrot ", "golf ", "hotel ", "india ", "juliet "}
	text := func(call, n int) string {
		buf := make([]byte, 0, n+16)
		for i := call; len(buf) < n; i = i*31 + 7 {
			buf = append(buf, words[uint(i)%uint(len(words))]...)
		}
		return string(buf[:n])
	}
	const sessions = 4
	for call := 0; written < mb*1e6*9/10; call++ {
		batch := &capture.Batch{}
		for k := range sessions {
			id := fmt.Sprintf("20250601-000000-tape%02d", k)
			at := t0.Add(time.Duration(call) * time.Second)
			if call == 0 {
				batch.Sessions = append(batch.Sessions, &capture.Session{ID: id, Start: t0, End: t0, Era: protocol.EraModern,
					Version: "2026-07-28", Client: protocol.Implementation{Name: fmt.Sprintf("agent-%d", k), Version: "1"}, Status: capture.StatusClosed})
			}
			xid++
			batch.Exchanges = append(batch.Exchanges, &capture.Exchange{ID: xid, SessionID: id, Method: "POST", URL: "/mcp", Start: at,
				End: at.Add(3 * time.Millisecond), Status: 200, RequestBody: capture.BodyJSON, ResponseBody: capture.BodySSE})
			add := func(dir protocol.Direction, kind protocol.Kind, raw []byte, link uint64) uint64 {
				seq++
				m := &capture.Message{Seq: seq, SessionID: id, ExchangeID: xid, Direction: dir, Time: at, Kind: kind, Method: "tools/call",
					Name: "fetch", Batch: -1, Raw: raw, Size: len(raw), Links: capture.Links{Request: link}}
				if dir == protocol.ServerToClient {
					m.SSE = &capture.SSEInfo{Type: "message", Prefix: []byte("event: message\ndata: "), Suffix: []byte("\n\n")}
				}
				batch.Messages = append(batch.Messages, m)
				written += len(raw)
				return seq
			}
			req := add(protocol.ClientToServer, protocol.KindRequest, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fetch","arguments":{"page":"p%d"},"_meta":{"progressToken":%d}}}`, call, call, call), 0)
			if call%10 == 0 {
				add(protocol.ServerToClient, protocol.KindNotification, fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%d,"progress":1}}`, call), req)
			}
			size := 4000
			if call%500 == 499 {
				size = 1 << 20
			}
			add(protocol.ServerToClient, protocol.KindResult, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`, call, text(call+k, size)), req)
		}
		write(batch)
	}
}

// scaleTapeMB is the size of BenchmarkScaleImport's tape.
func scaleTapeMB() int {
	if os.Getenv("MCPTAPE_SCALE") != "" {
		return 530
	}
	return 40
}

// BenchmarkScaleImport imports a tape of a long recording (530 MB, four
// sessions, with MCPTAPE_SCALE=1; 40 MB otherwise) into a new store with
// `mcptape import` (a child process): its peak RSS must stay under 300 MB
// (before: about 1 GB here, 1.7 GB on another machine), its CPU time is
// reported.
func BenchmarkScaleImport(b *testing.B) {
	dir := scaleDir(b)
	mb := scaleTapeMB()
	tape := filepath.Join(dir, fmt.Sprintf("long-%dMB.tape.json", mb))
	if _, err := os.Stat(tape); err != nil {
		data := tapeStore(b, dir, mb)
		child(b, "export", "--data", data, "-o", tape, "-q")
	}
	fi, err := os.Stat(tape)
	if err != nil {
		b.Fatal(err)
	}
	var cpus, walls []time.Duration
	var peak int64
	for b.Loop() {
		data := filepath.Join(b.TempDir(), "imported")
		cpu, rss, wall := child(b, "import", "--data", data, tape)
		cpus, walls, peak = append(cpus, cpu), append(walls, wall), max(peak, rss)
	}
	b.ReportMetric(float64(fi.Size())/1e6, "tape-MB")
	b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
	b.ReportMetric(slices.Min(cpus).Seconds(), "cpu-s")
	b.ReportMetric(slices.Min(walls).Seconds(), "wall-s")
	if peak > importRSSTarget {
		b.Errorf("importing the %.0f MB tape peaked at %.0f MB of RSS; the target is under %.0f MB", float64(fi.Size())/1e6, float64(peak)/1e6, importRSSTarget/1e6)
	}
}

// importRSSTarget is the most RSS an import may take at its peak.
const importRSSTarget = 300e6
