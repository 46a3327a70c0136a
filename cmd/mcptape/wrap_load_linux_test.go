package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/spool"
	"github.com/mcptape/mcptape/protocol"
)

// loadServerEnv makes this test binary a stdio server that writes a load
// (TestLoadServerChild): "line N out" one JSON-RPC result line of N bytes
// on stdout (or "err": on stderr), "burst N" N notification lines at once.
const loadServerEnv = "MCPTAPE_TEST_LOAD_SERVER"

// TestLoadServerChild is not a test of its own: it is the server that
// loadServer's commands run.
func TestLoadServerChild(t *testing.T) {
	spec := os.Getenv(loadServerEnv)
	if spec == "" {
		t.Skip("runs only as a child process: a stdio server that writes a load")
	}
	f := strings.Fields(spec)
	n, _ := strconv.Atoi(f[1])
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	switch f[0] {
	case "line":
		if len(f) > 2 && f[2] == "err" {
			w = bufio.NewWriterSize(os.Stderr, 64<<10)
		}
		head := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`
		tail := `"}]}}` + "\n"
		w.WriteString(head)
		chunk := bytes.Repeat([]byte("abcdefgh"), 8<<10)
		for left := n - len(head) - len(tail) + 1; left > 0; left -= len(chunk) {
			w.Write(chunk[:min(left, len(chunk))])
		}
		w.WriteString(tail)
	case "burst":
		for i := range n {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"line %d"}}`+"\n", i)
		}
	}
	w.Flush()
	os.Exit(0)
}

// loadServer is the command line of TestLoadServerChild, and the
// environment that selects spec.
func loadServer(t testing.TB, spec string) (argv []string, env string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, "-test.run=^TestLoadServerChild$"}, loadServerEnv + "=" + spec
}

// vmHWM is the peak resident set of a running process, in bytes, from
// /proc (rusage's figure for a child includes its parent's memory at the
// fork: useless when the parent is a test that holds a 64 MiB message).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// runWrapLoad runs `mcptape wrap` around the load server and copies what
// reaches the client to out; it returns the wrap's peak RSS (sampled from
// /proc every 20 ms while it runs) and CPU time.
func runWrapLoad(t testing.TB, data, name, spec string, out, errOut io.Writer) (rss int64, cpu time.Duration) {
	t.Helper()
	argv, env := loadServer(t, spec)
	cmd := mcptapeCmd(t, append([]string{"wrap", "--data", data, "--name", name, "--"}, argv...)...)
	cmd.Env = append(cmd.Env, env)
	cmd.Stdout, cmd.Stderr = out, errOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(3 * time.Minute)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("wrap: %v", err)
			}
			cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			t.Logf("%s: the wrap ran %s (wall clock, on a shared machine), %s of CPU with its server", spec, time.Since(start).Round(time.Millisecond), cpu.Round(time.Millisecond))
			return rss, cpu
		case <-tick.C:
			rss = max(rss, vmHWM(cmd.Process.Pid))
		case <-limit:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the wrap did not end within 3 minutes")
		}
	}
}

// lineCounter counts the bytes and lines written to it.
type lineCounter struct{ bytes, lines int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.bytes += int64(len(p))
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// A 200 MB line on stdout, and one on stderr: relayed whole, recorded (cut
// at the recorder's 64 MiB, marked) from a file, not memory: the wrap's
// peak RSS stays far below the line (on main it was over 270 MB for a
// 50 MB line). A line under the limit (50 MB) is recorded whole, as the
// result of its call.
func TestWrapLongLines(t *testing.T) {
	const line = 200_000_000
	for _, which := range []string{"out", "err"} {
		t.Run(which, func(t *testing.T) {
			data := t.TempDir()
			var out, errOut lineCounter
			rss, _ := runWrapLoad(t, data, "long-"+which, fmt.Sprintf("line %d %s", line, which), &out, &errOut)
			t.Logf("a %d-byte std%s line: the wrap's peak RSS %.1f MB", line, which, float64(rss)/1e6)
			if got := map[string]int64{"out": out.bytes, "err": errOut.bytes}[which]; got < line {
				t.Errorf("the client got %d bytes of the %d-byte line", got, line)
			}
			// Far above noise (the race detector's own memory included);
			// BenchmarkWrapLongLine measures it without.
			if rss > 150e6 {
				t.Errorf("the wrap's peak RSS was %.0f MB for a %d MB line; want it not to follow the line", float64(rss)/1e6, line/1_000_000)
			}
			s, ms := routeSession(t, data, "long-"+which)
			if len(ms) != 1 || ms[0].Size != 64<<20 || len(ms[0].Findings) == 0 || ms[0].Findings[0].Kind != capture.FindingOversize {
				t.Fatalf("the recorded line: %d messages %+v", len(ms), ms)
			}
			if s.Status != capture.StatusClosed {
				t.Errorf("session status %s", s.Status)
			}
		})
	}
	t.Run("50 MB result", func(t *testing.T) {
		data := t.TempDir()
		var out lineCounter
		rss, _ := runWrapLoad(t, data, "result", "line 50000000 out", &out, io.Discard)
		t.Logf("a 50 MB result line: the wrap's peak RSS %.1f MB", float64(rss)/1e6)
		_, ms := routeSession(t, data, "result")
		if len(ms) != 1 || ms[0].Kind != protocol.KindResult || string(ms[0].ID) != "1" || ms[0].Size != 50_000_000 || int64(len(ms[0].Raw)) != 50_000_000 {
			t.Fatalf("the 50 MB result: %d messages; first kind %s id %s size %d", len(ms), ms[0].Kind, ms[0].ID, ms[0].Size)
		}
		if !bytes.HasSuffix(ms[0].Raw, []byte(`"}]}}`)) {
			t.Errorf("the stored result does not end as sent: %q", ms[0].Raw[len(ms[0].Raw)-20:])
		}
	})
}

// burstRecorded counts the notification lines the spools in data hold,
// and the latest record of their session, reading the spools directly
// (loading a million messages into a store to count them costs more than
// the burst).
func burstRecorded(t testing.TB, data string) (stored int, sess *capture.Session) {
	t.Helper()
	files, err := spool.Files(data)
	if err != nil || len(files) != 1 {
		t.Fatalf("spools %q (%v); want one", files, err)
	}
	for r, err := range spool.Read(files[0], 0) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Damage != nil {
			t.Errorf("the spool is damaged: %v", r.Damage)
		}
		for _, m := range r.Batch.Messages {
			if m.Method == "notifications/message" {
				stored++
			}
		}
		for _, s := range r.Batch.Sessions {
			sess = s
		}
	}
	if sess == nil {
		t.Fatal("no session recorded")
	}
	return stored, sess
}

// burst runs a burst of n lines through a wrap and checks that every line
// reached the client and that each is either stored or counted lost.
func burst(t testing.TB, n int) (stored int, rss int64, cpu time.Duration) {
	data := t.TempDir()
	var out lineCounter
	var errOut syncBuffer
	rss, cpu = runWrapLoad(t, data, "burst", fmt.Sprintf("burst %d", n), &out, &errOut)
	if out.lines != int64(n) {
		t.Fatalf("the client got %d lines of %d", out.lines, n)
	}
	stored, sess := burstRecorded(t, data)
	t.Logf("stored %d of %d lines (%.2f%%); the session says %d messages, %d lost; the wrap's peak RSS %.1f MB",
		stored, n, 100*float64(stored)/float64(n), sess.Messages, sess.Lost, float64(rss)/1e6)
	if stored+sess.Lost != n || sess.Messages != stored {
		t.Errorf("counting: %d stored + %d lost != %d lines, or the session counts %d messages", stored, sess.Lost, n, sess.Messages)
	}
	if sess.Lost > 0 && !strings.Contains(errOut.String(), "could not be recorded") {
		t.Errorf("%d lines lost and the wrap said nothing:\n%s", sess.Lost, errOut.String())
	}
	return stored, rss, cpu
}

// A burst that a pipe carries in a second: every line reaches the client,
// and the record holds at least 99% of them, each line counted stored or
// lost (on main, 100,000 lines kept 7,854). A million lines take a race
// build minutes: BenchmarkWrapBurst bursts those.
func TestWrapBurst(t *testing.T) {
	n := 1_000_000
	if raceEnabled {
		n = 100_000
	}
	if stored, _, _ := burst(t, n); stored < n*99/100 {
		t.Errorf("stored %d of %d lines of a burst; want at least 99%%", stored, n)
	}
}

// BenchmarkWrapBurst bursts 1,000,000 notification lines (95 bytes each)
// through a wrap as fast as a pipe takes them, and reports the share
// stored (target: at least 99%), the wrap's peak RSS and its CPU per line
// (its server's included).
func BenchmarkWrapBurst(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		stored, rss, cpu := burst(b, n)
		b.ReportMetric(100*float64(stored)/n, "%stored")
		b.ReportMetric(float64(rss)/1e6, "peak-RSS-MB")
		b.ReportMetric(float64(cpu.Nanoseconds())/n, "CPU-ns/line")
		if stored < n*99/100 {
			b.Errorf("stored %d of %d lines of a burst; target at least 99%%", stored, n)
		}
	}
}

// BenchmarkWrapLongLine writes one 200 MB line on stdout through a wrap and
// reports the wrap's peak RSS (target: under 64 MB).
func BenchmarkWrapLongLine(b *testing.B) {
	const line = 200_000_000
	for range b.N {
		var out lineCounter
		rss, cpu := runWrapLoad(b, b.TempDir(), "long", fmt.Sprintf("line %d out", line), &out, io.Discard)
		b.ReportMetric(float64(rss)/1e6, "peak-RSS-MB")
		b.ReportMetric(float64(cpu.Milliseconds()), "CPU-ms")
		if rss > 64e6 {
			b.Errorf("the wrap's peak RSS was %.1f MB for a %d MB line; target under 64 MB", float64(rss)/1e6, line/1_000_000)
		}
	}
}
