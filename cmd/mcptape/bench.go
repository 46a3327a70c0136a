package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/bench"
)

// `mcptape bench`: the flags; the harness is cmd/mcptape/internal/bench.

const benchUsage = `[--scenarios LIST] [--targets LIST] [--versus BINARY] [--rounds N] [--batch DUR] [--json FILE] [--check]`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "plain-proxy" {
		return runBenchPlainProxy(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("bench", stderr)
	c := bench.Config{Version: version}
	scenarios := fs.String("scenarios", "all", "comma-separated scenarios to run: "+strings.Join(bench.AllScenarios, ",")+
		" (echo at c=1, echo at c=--concurrency, --big-bytes results, SSE first event, 2025-11-25 sampling, 2026-07-28 MRTR, "+
		"the replay server against the live server, --huge-bytes results with peak RSS, "+
		"steady recording: echo at c=--concurrency to mcptape alone for --steady-rounds batches in a row)")
	targets := fs.String("targets", "all", "comma-separated targets: "+strings.Join(bench.AllTargets, ",")+" (direct always runs: it is the baseline; --versus adds the target versus)")
	fs.IntVar(&c.Rounds, "rounds", 5, "rounds per scenario; in each, every target gets one batch, in rotating order (a single caller's scenario: its bursts, see --interleave)")
	fs.DurationVar(&c.Batch, "batch", time.Second, "how long one target's batch lasts")
	fs.StringVar(&c.Interleave, "interleave", bench.InterleaveBursts, "how a round interleaves the targets of a single caller's scenario (echo1, sampling, mrtr, replay): "+
		"bursts (--burst calls to each target in turn, over and over, so that the machine's drift falls on every target alike) or batches (one --batch per target in turn, "+
		"as scenarios with several callers always do)")
	fs.IntVar(&c.Burst, "burst", 32, "calls to one target before the next one's turn, with --interleave bursts; 1 makes each call arrive at a proxy that was idle since its last one")
	fs.IntVar(&c.Calls, "calls", 0, "if > 0, a batch is this many calls instead of --batch long (not the huge scenario: see --huge-calls)")
	fs.DurationVar(&c.Warmup, "warmup", 200*time.Millisecond, "unmeasured calls per target before a scenario's first round (0: one call per worker)")
	fs.IntVar(&c.Concurrency, "concurrency", 32, "concurrent callers in the echo32 scenario")
	fs.IntVar(&c.BigBytes, "big-bytes", 1<<20, "result size in the big scenario")
	fs.IntVar(&c.BigConc, "big-concurrency", 4, "concurrent callers in the big scenario")
	fs.DurationVar(&c.SSEDuration, "sse-duration", 40*time.Millisecond, "run time of one slow call in the sse scenario; its first progress event comes after duration/steps")
	fs.IntVar(&c.SSESteps, "sse-steps", 4, "progress notifications per slow call in the sse scenario")
	fs.IntVar(&c.SSEConc, "sse-concurrency", 4, "concurrent callers in the sse scenario")
	fs.IntVar(&c.HugeBytes, "huge-bytes", 10<<20, "result size in the huge scenario")
	fs.IntVar(&c.HugeConc, "huge-concurrency", 4, "concurrent callers in the huge scenario")
	fs.IntVar(&c.HugeCalls, "huge-calls", 16, "calls per batch in the huge scenario")
	fs.IntVar(&c.SteadyRounds, "steady-rounds", 30, "batches in a row in the steady scenario, which compares the CPU per call of its last third of them with its first")
	fs.IntVar(&c.ReplayCalls, "replay-calls", 10000, "distinct echo calls on the replay scenario's tape, recorded from the live server before measuring")
	fs.StringVar(&c.Nginx, "nginx", "", "the nginx binary (default: nginx on $PATH, else /usr/sbin/nginx; none found skips the nginx target)")
	fs.StringVar(&c.JSONFile, "json", "", "also write every figure as JSON to this file")
	fs.BoolVar(&c.Check, "check", false, "exit non-zero when a target (see the targets section of the output) fails")
	fs.StringVar(&c.Versus, "versus", "", "another mcptape binary (say, a build of another commit) whose `record` is measured too, as the target versus, "+
		"interleaved with this binary's in every round: a difference between two builds smaller than the drift between two runs still shows")
	fs.BoolVar(&c.KeepTemp, "keep-temp", false, "keep the temporary directory (stores, logs, nginx.conf) and print where it is")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mcptape bench %s\n\n", benchUsage)
		fmt.Fprint(stderr, "Measures direct, a plain Go reverse proxy, nginx and mcptape record side by side on loopback,\n"+
			"interleaved in rounds; prints a markdown table on stdout and progress on stderr.\n\n")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if c.Scenarios, err = parseList("--scenarios", *scenarios, bench.AllScenarios); err != nil {
		return err
	}
	if c.Targets, err = parseList("--targets", *targets, bench.AllTargets); err != nil {
		return err
	}
	if c.Versus != "" {
		if c.Versus, err = versusBinary(c.Versus); err != nil {
			return err
		}
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"--rounds", c.Rounds}, {"--concurrency", c.Concurrency}, {"--big-concurrency", c.BigConc}, {"--sse-steps", c.SSESteps},
		{"--sse-concurrency", c.SSEConc}, {"--huge-concurrency", c.HugeConc}, {"--huge-calls", c.HugeCalls}, {"--replay-calls", c.ReplayCalls}, {"--steady-rounds", c.SteadyRounds}, {"--burst", c.Burst}, {"--big-bytes", c.BigBytes}, {"--huge-bytes", c.HugeBytes}} {
		if v.n < 1 {
			return usagef("%s must be at least 1", v.name)
		}
	}
	if c.Batch <= 0 && c.Calls <= 0 {
		return usagef("--batch must be positive (or give --calls)")
	}
	if c.Interleave != bench.InterleaveBursts && c.Interleave != bench.InterleaveBatches {
		return usagef("--interleave must be %s or %s", bench.InterleaveBursts, bench.InterleaveBatches)
	}
	if c.SSEDuration < time.Millisecond {
		return usagef("--sse-duration must be at least 1ms")
	}
	return bench.Run(ctx, &c, stdout, stderr)
}

// versusBinary resolves --versus to an executable file's path.
func versusBinary(p string) (string, error) {
	path, err := exec.LookPath(p)
	if err != nil {
		if !strings.ContainsRune(p, filepath.Separator) {
			return "", usagef("--versus %s: not found on $PATH; give the binary's path, e.g. ./%s", p, p)
		}
		return "", usagef("--versus %s: %v; build the other version first, e.g. git worktree add /tmp/other COMMIT && (cd /tmp/other && go build -o /tmp/mcptape-other ./cmd/mcptape)", p, errors.Unwrap(err))
	}
	return filepath.Abs(path)
}

// parseList reads a comma-separated subset of all, in all's order.
func parseList(flagName, v string, all []string) ([]string, error) {
	if v == "" || v == "all" {
		return slices.Clone(all), nil
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(all, s) {
			return nil, usagef("%s: unknown %q; want some of %s", flagName, s, strings.Join(all, ","))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	// Run in the documented order, whatever order they were given in.
	slices.SortFunc(out, func(a, b string) int { return slices.Index(all, a) - slices.Index(all, b) })
	return out, nil
}

// runBenchPlainProxy is the hidden `mcptape bench plain-proxy`, one of the
// bench's targets (see bench.PlainProxy).
func runBenchPlainProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench plain-proxy", stderr)
	upstream := fs.String("upstream", "", "the server's base URL (required)")
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	if err := parse(fs, args); err != nil {
		return err
	}
	up, err := url.Parse(*upstream)
	if err != nil || up.Host == "" {
		return usagef("--upstream %q is not a URL like http://127.0.0.1:3001", *upstream)
	}
	return bench.PlainProxy(ctx, up, *listen, stdout, stderr)
}
