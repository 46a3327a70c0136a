package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// `mcptape bench` measures the proxy against the alternatives a user would
// compare it with, side by side in one run and on loopback only:
//
//	direct   the load generator talks to the fixture server itself
//	plain    a stock httputil.ReverseProxy that records nothing (and, on
//	         purpose, lacks our fix for the request-body race of
//	         libraries.md §3.6b)
//	nginx    Debian's nginx as a non-buffering reverse proxy
//	mcptape  `mcptape record` into a fresh Badger store
//
// Every server and proxy is a child process (this binary re-executed, or
// nginx), so the CPU time and memory of each can be read from /proc. The
// load generator runs here. Targets take turns in short batches, round after
// round, so that drift (thermal, noisy neighbours, GC of the load
// generator) hits all of them alike.

// Scenario ids, as --scenarios takes them.
const (
	scEcho1    = "echo1"
	scEcho32   = "echo32"
	scBig      = "big"
	scSSE      = "sse"
	scSampling = "sampling"
	scMRTR     = "mrtr"
	scReplay   = "replay"
	scHuge     = "huge"
)

var allScenarios = []string{scEcho1, scEcho32, scBig, scSSE, scSampling, scMRTR, scReplay, scHuge}

// Target names, as --targets takes them.
const (
	tgDirect  = "direct"
	tgPlain   = "plain"
	tgNginx   = "nginx"
	tgMcptape = "mcptape"
)

var allTargets = []string{tgDirect, tgPlain, tgNginx, tgMcptape}

// tgReplay is `mcptape replay server`, which only the replay scenario
// measures, beside direct.
const tgReplay = "replay"

type benchConfig struct {
	scenarios []string
	targets   []string
	rounds    int
	batch     time.Duration
	calls     int
	warmup    time.Duration

	concurrency int
	bigBytes    int
	bigConc     int
	sseDuration time.Duration
	sseSteps    int
	sseConc     int
	hugeBytes   int
	hugeConc    int
	hugeCalls   int
	replayCalls int

	nginx    string
	jsonFile string
	check    bool
	keepTemp bool
}

const benchUsage = `[--scenarios LIST] [--targets LIST] [--rounds N] [--batch DUR] [--json FILE] [--check]`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "plain-proxy" {
		return runBenchPlainProxy(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("bench", stderr)
	var c benchConfig
	scenarios := fs.String("scenarios", "all", "comma-separated scenarios to run: "+strings.Join(allScenarios, ",")+
		" (echo at c=1, echo at c=--concurrency, --big-bytes results, SSE first event, 2025-11-25 sampling, 2026-07-28 MRTR, "+
		"the replay server against the live server, --huge-bytes results with peak RSS)")
	targets := fs.String("targets", "all", "comma-separated targets: "+strings.Join(allTargets, ",")+" (direct always runs: it is the baseline)")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds per scenario; in each, every target gets one batch, in rotating order")
	fs.DurationVar(&c.batch, "batch", time.Second, "how long one target's batch lasts")
	fs.IntVar(&c.calls, "calls", 0, "if > 0, a batch is this many calls instead of --batch long (not the huge scenario: see --huge-calls)")
	fs.DurationVar(&c.warmup, "warmup", 200*time.Millisecond, "unmeasured calls per target before a scenario's first round (0: one call per worker)")
	fs.IntVar(&c.concurrency, "concurrency", 32, "concurrent callers in the echo32 scenario")
	fs.IntVar(&c.bigBytes, "big-bytes", 1<<20, "result size in the big scenario")
	fs.IntVar(&c.bigConc, "big-concurrency", 4, "concurrent callers in the big scenario")
	fs.DurationVar(&c.sseDuration, "sse-duration", 40*time.Millisecond, "run time of one slow call in the sse scenario; its first progress event comes after duration/steps")
	fs.IntVar(&c.sseSteps, "sse-steps", 4, "progress notifications per slow call in the sse scenario")
	fs.IntVar(&c.sseConc, "sse-concurrency", 4, "concurrent callers in the sse scenario")
	fs.IntVar(&c.hugeBytes, "huge-bytes", 10<<20, "result size in the huge scenario")
	fs.IntVar(&c.hugeConc, "huge-concurrency", 4, "concurrent callers in the huge scenario")
	fs.IntVar(&c.hugeCalls, "huge-calls", 16, "calls per batch in the huge scenario")
	fs.IntVar(&c.replayCalls, "replay-calls", 10000, "distinct echo calls on the replay scenario's tape, recorded from the live server before measuring")
	fs.StringVar(&c.nginx, "nginx", "", "the nginx binary (default: nginx on $PATH, else /usr/sbin/nginx; none found skips the nginx target)")
	fs.StringVar(&c.jsonFile, "json", "", "also write every figure as JSON to this file")
	fs.BoolVar(&c.check, "check", false, "exit non-zero when a target (see the targets section of the output) fails")
	fs.BoolVar(&c.keepTemp, "keep-temp", false, "keep the temporary directory (stores, logs, nginx.conf) and print where it is")
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
	if c.scenarios, err = parseList("--scenarios", *scenarios, allScenarios); err != nil {
		return err
	}
	if c.targets, err = parseList("--targets", *targets, allTargets); err != nil {
		return err
	}
	if !slices.Contains(c.targets, tgDirect) {
		c.targets = append([]string{tgDirect}, c.targets...)
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"--rounds", c.rounds}, {"--concurrency", c.concurrency}, {"--big-concurrency", c.bigConc}, {"--sse-steps", c.sseSteps},
		{"--sse-concurrency", c.sseConc}, {"--huge-concurrency", c.hugeConc}, {"--huge-calls", c.hugeCalls}, {"--replay-calls", c.replayCalls}, {"--big-bytes", c.bigBytes}, {"--huge-bytes", c.hugeBytes}} {
		if v.n < 1 {
			return usagef("%s must be at least 1", v.name)
		}
	}
	if c.batch <= 0 && c.calls <= 0 {
		return usagef("--batch must be positive (or give --calls)")
	}
	if c.sseDuration < time.Millisecond {
		return usagef("--sse-duration must be at least 1ms")
	}
	if !benchSupported {
		return errors.New("mcptape bench runs on Linux only: it reads CPU time and memory from /proc")
	}
	return benchMain(ctx, &c, stdout, stderr)
}

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

// benchMain sets up the processes, runs the scenarios and prints the report.
func benchMain(ctx context.Context, c *benchConfig, stdout, stderr io.Writer) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		if err != nil && errors.Is(err, context.Canceled) {
			err = errors.New("interrupted; the bench's servers and proxies are stopped")
		}
	}()
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }

	tmp, err := os.MkdirTemp("", "mcptape-bench-")
	if err != nil {
		return err
	}
	env := &benchEnv{cfg: c, dir: tmp, progress: progress}
	defer func() {
		env.stop()
		if c.keepTemp {
			progress("kept %s (stores, logs, nginx.conf)", tmp)
			return
		}
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = fmt.Errorf("removing %s: %w", tmp, rerr)
		}
	}()
	started := time.Now()
	if err := env.start(ctx); err != nil {
		return err
	}
	rep := &benchReport{Machine: machine(env.nginxVersion), Started: started, Config: c.toJSON()}
	for _, t := range env.targets {
		rep.Targets = append(rep.Targets, targetInfo{Name: t.name, URL: t.base, PIDs: t.pids(), Skipped: t.skip})
	}
	for i, id := range c.scenarios {
		sc := env.scenario(id)
		progress("[%d/%d] %s", i+1, len(c.scenarios), sc.title)
		t0 := time.Now()
		res, err := env.runScenario(ctx, sc)
		if err != nil {
			return err
		}
		progress("  %s took %s", sc.short, time.Since(t0).Round(100*time.Millisecond))
		rep.Scenarios = append(rep.Scenarios, res)
	}
	rep.Duration = time.Since(started)
	rep.finish(env)
	rep.writeMarkdown(stdout)
	if c.jsonFile != "" {
		if err := rep.writeJSON(c.jsonFile); err != nil {
			return err
		}
	}
	progress("done in %s", rep.Duration.Round(time.Second))
	if c.check {
		if n := rep.failed(); n > 0 {
			return fmt.Errorf("%d target(s) failed (--check)", n)
		}
	}
	return nil
}
