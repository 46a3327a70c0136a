package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

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
	scSteady   = "steady"
)

// AllScenarios are the scenario ids, in the order they run.
var AllScenarios = []string{scEcho1, scEcho32, scBig, scSSE, scSampling, scMRTR, scReplay, scHuge, scSteady}

// Target names, as --targets takes them.
const (
	tgDirect  = "direct"
	tgPlain   = "plain"
	tgNginx   = "nginx"
	tgMcptape = "mcptape"
	// tgForward is `mcptape record --forward`, the client using it as its
	// HTTP proxy to the fixture server.
	tgForward = "mcptape-forward"
	// tgMITM is `mcptape record --forward --mitm`, the client tunnelling
	// through it (CONNECT, TLS to mcptape's CA) to the fixture server
	// over TLS; mcptape talks TLS to that server too.
	tgMITM = "mcptape-mitm"
)

// tgVersus is `mcptape record` run from another mcptape binary
// (Config.Versus): two builds measured in one run, interleaved, so that
// the machine's drift falls on both alike. It is not in AllTargets: it
// runs when Config.Versus names a binary.
const tgVersus = "versus"

// AllTargets are the target names.
var AllTargets = []string{tgDirect, tgPlain, tgNginx, tgMcptape, tgForward, tgMITM}

// The ways a round interleaves a single caller's targets.
const (
	InterleaveBursts  = "bursts"
	InterleaveBatches = "batches"
)

// tgReplay is `mcptape replay server`, which only the replay scenario
// measures, beside direct.
const tgReplay = "replay"

// Config is one run of the bench: what `mcptape bench`'s flags set. Every
// count and size must be at least 1.
type Config struct {
	Scenarios []string      // of AllScenarios, in that order
	Targets   []string      // of AllTargets; direct is the baseline and always runs
	Rounds    int           // rounds per scenario; each target gets one batch per round
	Batch     time.Duration // how long one batch lasts, unless Calls > 0
	Calls     int           // calls per batch instead of Batch (not the huge scenario)
	Warmup    time.Duration // unmeasured calls per target before a scenario (0: one per worker)
	// Interleave is how a round spreads a single caller's scenario over
	// the targets: InterleaveBursts (Burst calls to each, in turn, over
	// and over) or InterleaveBatches (one batch each, in turn). Scenarios
	// with several callers always run one batch per target.
	Interleave string
	Burst      int // calls per target per turn with InterleaveBursts
	// Versus, when set, is another mcptape binary whose `record` runs as
	// the target "versus" beside this binary's: its store, its process and
	// its figures are its own.
	Versus string

	Concurrency int           // callers in echo32
	BigBytes    int           // result size in big
	BigConc     int           // callers in big
	SSEDuration time.Duration // run time of one slow call in sse
	SSESteps    int           // progress notifications per slow call
	SSEConc     int           // callers in sse
	HugeBytes   int           // result size in huge
	HugeConc    int           // callers in huge
	HugeCalls   int           // calls per batch in huge
	ReplayCalls int           // distinct echo calls on the replay scenario's tape
	// SteadyRounds is the steady scenario's rounds: batches of echo calls
	// at Concurrency, one after another, to mcptape alone.
	SteadyRounds int

	Nginx    string // the nginx binary ("": nginx on $PATH, else /usr/sbin/nginx)
	JSONFile string // also write every figure here as JSON ("": none)
	Check    bool   // fail (Run's error) when a performance target fails
	KeepTemp bool   // keep the temporary directory and say where it is
	Version  string // mcptape's version, for the report and the load generator's clientInfo
}

// mcptapeVersion is the version the report and the load generator's
// clientInfo carry.
var mcptapeVersion = "dev"

// Supported reports whether the bench can run here: it reads CPU time and
// memory from /proc.
const Supported = benchSupported

// Run sets up the processes, runs the scenarios and prints the report:
// markdown on stdout, progress on stderr. With c.Check, a failed
// performance target is an error.
func Run(ctx context.Context, c *Config, stdout, stderr io.Writer) error {
	if !Supported {
		return errors.New("mcptape bench runs on Linux only: it reads CPU time and memory from /proc")
	}
	if c.Version != "" {
		mcptapeVersion = c.Version
	}
	if c.Versus != "" && !slices.Contains(c.Targets, tgVersus) {
		c.Targets = append(c.Targets, tgVersus)
	}
	return benchMain(ctx, c, stdout, stderr)
}

// benchMain sets up the processes, runs the scenarios and prints the report.
func benchMain(ctx context.Context, c *Config, stdout, stderr io.Writer) (err error) {
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
		if c.KeepTemp {
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
	rep := &Report{Machine: machine(env.nginxVersion), Started: started, Config: c.toJSON()}
	for _, t := range env.targets {
		rep.Targets = append(rep.Targets, targetInfo{Name: t.name, URL: t.base, PIDs: t.pids(), Skipped: t.skip})
	}
	for i, id := range c.Scenarios {
		sc := env.scenario(id)
		progress("[%d/%d] %s", i+1, len(c.Scenarios), sc.title)
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
	if c.JSONFile != "" {
		if err := rep.writeJSON(c.JSONFile); err != nil {
			return err
		}
	}
	progress("done in %s", rep.Duration.Round(time.Second))
	if c.Check {
		if n := rep.failed(); n > 0 {
			return fmt.Errorf("%d target(s) failed (--check)", n)
		}
	}
	return nil
}
