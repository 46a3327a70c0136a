package bench

import (
	"context"
	"fmt"
	"time"
)

// Profiler runs the bench's load generator against a proxy that runs in
// the caller's process, with the fixture server as a child process, so
// that a CPU or memory profile of the caller holds only the proxy, what it
// records into and the load generator (cmd/mcptape's
// BenchmarkRecordingProxy profiles `mcptape record` this way).
type Profiler struct {
	env *benchEnv
	// FixtureURL is the fixture server's base URL.
	FixtureURL string
}

// NewProfiler starts the fixture server (a Command child) with dir for its
// files; logf receives progress.
func NewProfiler(ctx context.Context, dir string, logf func(format string, a ...any)) (*Profiler, error) {
	env := &benchEnv{cfg: &Config{SSEDuration: 40 * time.Millisecond, SSESteps: 4}, dir: dir, progress: logf}
	_, base, err := env.startListener(ctx, "fixture", "mcptape fixture server:", "fixture", "server", "--listen", "127.0.0.1:0")
	if err != nil {
		env.stop()
		return nil, err
	}
	return &Profiler{env: env, FixtureURL: base}, nil
}

// Close stops the fixture server.
func (p *Profiler) Close() { p.env.stop() }

// Callers are conc concurrent callers against one proxy.
type Callers struct {
	p  *Profiler
	ws []*worker
}

// Callers returns conc callers against the proxy at base.
func (p *Profiler) Callers(base string, conc int) *Callers {
	t := &target{name: tgMcptape, base: base, hc: benchHTTPClient()}
	c := &Callers{p: p, ws: make([]*worker, conc)}
	for i := range c.ws {
		c.ws[i] = p.env.newWorker(t)
	}
	return c
}

// LoadResult is what Run measured.
type LoadResult struct {
	Calls, Failed int
	Elapsed       time.Duration
	P50, P99      time.Duration
	Examples      map[string]string // one error message of each kind that failed
}

// Run makes n calls of kind: "echo" (a 2026-07-28 echo tool call), "sse"
// (a slow call streaming progress), "big" (a bigBytes result) or
// "sampling" (a 2025-11-25 sampling round trip: the call, the server's
// request on its stream, the client's answer POSTed back, the result; each
// caller opens its session on its first such call).
func (c *Callers) Run(ctx context.Context, kind string, bigBytes, n int) (*LoadResult, error) {
	var call func(*worker, context.Context) (sample, error)
	switch kind {
	case "echo":
		call = (*worker).callEcho
	case "sse":
		call = (*worker).callSlow
	case "big":
		call = func(w *worker, ctx context.Context) (sample, error) { return w.callBig(ctx, bigBytes) }
	case "sampling":
		for _, w := range c.ws {
			if w.session == "" {
				if err := w.initLegacy(ctx); err != nil {
					return nil, err
				}
			}
		}
		call = (*worker).callSampling
	default:
		return nil, fmt.Errorf("bench: no call kind %q (echo, sse, big, sampling)", kind)
	}
	res := runBatch(ctx, c.ws, &scenarioSpec{conc: len(c.ws), call: call}, n, 0)
	return &LoadResult{Calls: res.calls, Failed: res.failed, Elapsed: res.elapsed, P50: percentile(res.lats, 0.5), P99: percentile(res.lats, 0.99), Examples: res.examples}, nil
}
