package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/bench"
)

// benchChildEnv carries a child's command line (JSON) when the bench runs
// under `go test`: the test binary is not mcptape, so the bench re-executes
// it with only TestBenchChild selected, and that runs the command.
const benchChildEnv = "MCPTAPE_BENCH_CHILD_ARGS"

// childArgsAfterDashes as benchChildEnv's value says the command line is
// the test binary's arguments after "--" (see versusScript).
const childArgsAfterDashes = "argv"

// TestBenchChild is not a test of its own: it is how the bench's child
// processes (fixture server, plain proxy, mcptape record) run when the
// bench runs inside a test.
func TestBenchChild(t *testing.T) {
	raw := os.Getenv(benchChildEnv)
	if raw == "" {
		t.Skip("runs only as a child process of the bench")
	}
	var args []string
	if raw == childArgsAfterDashes {
		args = flag.Args()
	} else if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", benchChildEnv, err)
		os.Exit(exitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// childrenFromTestBinary makes the bench start its children from this test
// binary until the test ends.
func childrenFromTestBinary(tb testing.TB) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	old := bench.Command
	bench.Command = func(args ...string) (*exec.Cmd, error) {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(exe, "-test.run=^TestBenchChild$")
		cmd.Env = append(os.Environ(), benchChildEnv+"="+string(b))
		return cmd, nil
	}
	tb.Cleanup(func() { bench.Command = old })
}

// TestBench runs the whole bench with a few calls per scenario, against
// every target that can run here (nginx only when installed), and checks
// that the report is complete and that mcptape recorded exactly what the
// load generator exchanged through it.
func TestBench(t *testing.T) {
	if !bench.Supported {
		t.Skip("mcptape bench runs on Linux only")
	}
	childrenFromTestBinary(t)
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	start := time.Now()
	code, out, errOut := mcptape(t, "bench", "--rounds", "1", "--calls", "3", "--warmup", "0",
		"--concurrency", "4", "--big-bytes", "65536", "--sse-duration", "4ms", "--sse-steps", "2",
		"--huge-bytes", "1048576", "--huge-calls", "2", "--huge-concurrency", "2", "--replay-calls", "5", "--steady-rounds", "3", "--json", jsonPath)
	t.Logf("bench took %s", time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("bench exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"# mcptape bench", "- machine: ", "| scenario | metric | direct | plain |",
		"| echo c=1 | p50 latency (µs) |", "|  | added p50 over direct (µs) |", "| echo c=4 | calls/s |",
		"| 64 KiB results | calls/s |", "|  | MiB/s |", "|  | proxy CPU per MiB (ms) |",
		"| SSE first event | first event delivery p50 (µs) |", "|  | first event added p50 over direct (µs) |",
		"| sampling 2025-11-25 |", "| MRTR 2026-07-28 |", "| 1 MiB results | calls/s |",
		"|  | peak RSS during the scenario (MB) |", "| whole run | peak RSS (MB) |",
		"## mcptape's recorder: client counts = stored counts",
		"| replay vs live | calls/s |", "|  | calls/s ÷ live (direct) |",
		"| steady c=4 | calls/s |", "|  | proxy CPU per call, last third (µs) |", "(the steady scenario: 3 batches in a row to mcptape alone)",
		"## targets", "### mcptape against the plain Go proxy",
		"### the replay server against the live server",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "round 1/1:") {
		t.Errorf("no progress on stderr:\n%s", errOut)
	}
	rep := readReport(t, jsonPath)
	if len(rep.Scenarios) != len(bench.AllScenarios) {
		t.Fatalf("%d scenarios in the JSON, want %d", len(rep.Scenarios), len(bench.AllScenarios))
	}
	for _, s := range rep.Scenarios {
		want := 3 // --calls
		if s.ID == "huge" {
			want = 2 // --huge-calls
		}
		for name, f := range s.Targets {
			if name == "plain" {
				continue // the stock proxy cuts streams now and then (a request-body race in httputil.ReverseProxy)
			}
			if f.Failed > 0 || f.Calls < want {
				t.Errorf("%s, %s: %d calls, %d failed: %v", s.ID, name, f.Calls, f.Failed, f.ErrorExamples)
			}
		}
		if f := s.Targets["mcptape"]; s.ID == "steady" && (len(s.Targets) != 1 || f == nil || len(f.RoundRates) != 3 || len(f.RoundCPU) != 3) {
			t.Errorf("steady: targets %v, want mcptape alone with 3 rounds", slices.Collect(maps.Keys(s.Targets)))
		}
		if s.ID == "replay" {
			if _, ok := s.Targets["replay"]; !ok || len(s.Targets) != 2 {
				t.Errorf("replay: targets %v, want direct and replay", slices.Collect(maps.Keys(s.Targets)))
			}
			continue // mcptape record is not measured there
		}
		if _, ok := s.Targets["replay"]; ok {
			t.Errorf("%s measured the replay server", s.ID)
		}
		if s.Recorder == nil || !s.Recorder.Match || s.Recorder.Client() == 0 {
			t.Errorf("%s: recorder check %+v", s.ID, s.Recorder)
		}
	}
	if f := rep.Fig("echo1", "mcptape"); f == nil || f.AddedP50 == nil || f.CPUPerCall == nil {
		t.Errorf("echo1 mcptape figures incomplete: %+v", f)
	}
	if f := rep.Fig("huge", "mcptape"); f == nil || f.PeakRSS == nil || *f.PeakRSS <= 0 {
		t.Errorf("huge mcptape has no peak RSS: %+v", f)
	}
	lost := false
	for _, v := range rep.Verdicts {
		if strings.HasPrefix(v.Name, "nothing lost") {
			lost = !v.Pass
		}
	}
	if lost {
		t.Errorf("the nothing-lost target failed:\n%s", out)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--scenarios", "echo1,nope"},
		{"bench", "--targets", "haproxy"},
		{"bench", "--rounds", "0"},
		{"bench", "--interleave", "calls"},
		{"bench", "--burst", "0"},
		{"bench", "--steady-rounds", "0"},
		{"bench", "extra"},
		{"bench", "--versus", filepath.Join(t.TempDir(), "no-such-mcptape")},
		{"bench", "--versus", "no-such-mcptape-on-path"},
	} {
		code, _, errOut := mcptape(t, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %s", args, code, exitUsage, errOut)
		}
	}
}

func TestBenchParseList(t *testing.T) {
	got, err := parseList("--scenarios", "huge, echo1,huge", bench.AllScenarios)
	if err != nil || strings.Join(got, ",") != "echo1,huge" {
		t.Errorf("parseList = %v, %v; want [echo1 huge]", got, err)
	}
}

// versusScript writes a program that runs this test binary as mcptape with
// the arguments it is given: another "mcptape binary" for --versus.
func versusScript(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcptape-other")
	script := fmt.Sprintf("#!/bin/sh\nexec env %s=%s '%s' '-test.run=^TestBenchChild$' -- \"$@\"\n", benchChildEnv, childArgsAfterDashes, exe)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchVersus measures a second mcptape binary beside this one: it has
// its own column and a ratio column, its calls all succeed, and the JSON
// names it.
func TestBenchVersus(t *testing.T) {
	if !bench.Supported {
		t.Skip("mcptape bench runs on Linux only")
	}
	childrenFromTestBinary(t)
	other := versusScript(t)
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	code, out, errOut := mcptape(t, "bench", "--scenarios", "echo1,echo32", "--targets", "direct,mcptape", "--versus", other,
		"--rounds", "1", "--calls", "3", "--warmup", "0", "--concurrency", "2", "--json", jsonPath)
	if code != 0 {
		t.Fatalf("bench exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"| scenario | metric | direct | mcptape | versus | mcptape ÷ versus |",
		"versus = `" + other + " record`, another mcptape binary",
		"the two trading places every other round",
		"bench: versus at http://127.0.0.1:",
	} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("the output lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
	rep := readReport(t, jsonPath)
	if v, _ := rep.Config["versus"].(string); v != other {
		t.Errorf("config versus = %q, want %q", v, other)
	}
	for _, sc := range []string{"echo1", "echo32"} {
		f := rep.Fig(sc, "versus")
		if f == nil || f.Calls < 3 || f.Failed > 0 || f.CPUPerCall == nil {
			t.Errorf("%s: versus figures %+v, want 3 or more calls, none failed, with CPU per call", sc, f)
		}
	}
}

// readReport reads the report `bench --json` wrote to path.
func readReport(t *testing.T, path string) *bench.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("--json: %v", err)
	}
	return &rep
}
