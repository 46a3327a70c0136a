package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// teardownTimeout bounds closing one worker's session.
const teardownTimeout = 3 * time.Second

// scenarioSpec is one measurement: a kind of call, at a concurrency.
type scenarioSpec struct {
	id, title, short string
	conc             int
	// calls, if > 0, is the calls per batch, whatever the configuration;
	// rounds, if > 0, the rounds.
	calls    int
	rounds   int
	setup    func(*worker, context.Context) error
	call     func(*worker, context.Context) (sample, error)
	teardown func(*worker, context.Context) error
	// payload is the result size per call, for MiB/s and CPU per MiB.
	payload int
	// first: the call measures its first progress event. rss: the
	// scenario reports the proxies' peak RSS.
	first, rss bool
	// only, if not empty, names the targets the scenario measures; else it
	// measures every live proxy target.
	only []string
}

func (e *benchEnv) scenario(id string) *scenarioSpec {
	c := e.cfg
	switch id {
	case scEcho1:
		return &scenarioSpec{id: id, title: "echo, concurrency 1", short: "echo c=1", conc: 1, call: (*worker).callEcho}
	case scEcho32:
		return &scenarioSpec{id: id, title: fmt.Sprintf("echo, concurrency %d", c.Concurrency),
			short: fmt.Sprintf("echo c=%d", c.Concurrency), conc: c.Concurrency, call: (*worker).callEcho}
	case scBig:
		return &scenarioSpec{id: id, title: fmt.Sprintf("%s results (big tool), concurrency %d", sizeText(c.BigBytes), c.BigConc),
			short: sizeText(c.BigBytes) + " results", conc: c.BigConc, payload: c.BigBytes,
			call: func(w *worker, ctx context.Context) (sample, error) { return w.callBig(ctx, c.BigBytes) }}
	case scSSE:
		return &scenarioSpec{id: id, title: fmt.Sprintf("SSE first event (slow tool, %d progress events over %s), concurrency %d", c.SSESteps, c.SSEDuration, c.SSEConc),
			short: "SSE first event", conc: c.SSEConc, first: true, call: (*worker).callSlow}
	case scSampling:
		return &scenarioSpec{id: id, title: "sampling round trip, 2025-11-25 (stateful: server→client request, answer POSTed), concurrency 1",
			short: "sampling 2025-11-25", conc: 1, setup: (*worker).initLegacy, teardown: (*worker).closeLegacy, call: (*worker).callSampling}
	case scMRTR:
		return &scenarioSpec{id: id, title: "MRTR round trip, 2026-07-28 (input_required, then retry with inputResponses), concurrency 1",
			short: "MRTR 2026-07-28", conc: 1, call: (*worker).callMRTR}
	case scReplay:
		return &scenarioSpec{id: id, title: fmt.Sprintf("`mcptape replay server --timing fast` against the live fixture server: the same echo calls, "+
			"concurrency 1, from a tape of %d distinct recorded calls", c.ReplayCalls),
			short: "replay vs live", conc: 1, only: []string{tgDirect, tgReplay}, call: (*worker).callReplayEcho}
	case scHuge:
		return &scenarioSpec{id: id, title: fmt.Sprintf("%s results, concurrency %d, %d calls per batch, peak RSS", sizeText(c.HugeBytes), c.HugeConc, c.HugeCalls),
			short: sizeText(c.HugeBytes) + " results", conc: c.HugeConc, calls: c.HugeCalls, payload: c.HugeBytes, rss: true,
			call: func(w *worker, ctx context.Context) (sample, error) { return w.callBig(ctx, c.HugeBytes) }}
	case scSteady:
		return &scenarioSpec{id: id, title: fmt.Sprintf("steady recording: echo at concurrency %d, %d batches in a row to mcptape alone "+
			"(does its cost per call hold as its store grows and compacts?)", c.Concurrency, c.SteadyRounds),
			short: fmt.Sprintf("steady c=%d", c.Concurrency), conc: c.Concurrency, rounds: c.SteadyRounds, only: []string{tgMcptape}, call: (*worker).callEcho}
	}
	panic("unknown scenario " + id)
}

func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// batchResult is what one batch of calls against one target measured.
type batchResult struct {
	calls, failed int
	lats, firsts  []time.Duration
	errs          map[string]int
	examples      map[string]string
	elapsed       time.Duration
}

func (b *batchResult) fail(err error) {
	k := errKind(err)
	if b.errs == nil {
		b.errs, b.examples = map[string]int{}, map[string]string{}
	}
	b.errs[k]++
	if _, ok := b.examples[k]; !ok {
		msg := err.Error()
		if ce, ok := err.(*callError); ok {
			msg = ce.msg
		}
		b.examples[k] = msg
	}
	b.failed++
}

func (b *batchResult) merge(o *batchResult) {
	b.calls += o.calls
	b.lats = append(b.lats, o.lats...)
	b.firsts = append(b.firsts, o.firsts...)
	for k, n := range o.errs {
		for range n {
			b.fail(&callError{kind: k, msg: o.examples[k]})
		}
	}
}

// take counts one call's outcome; false: ctx ended the call, and the
// batch with it.
func (b *batchResult) take(ctx context.Context, sc *scenarioSpec, s sample, err error) bool {
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		b.fail(err)
		if errKind(err) == errTransport {
			time.Sleep(10 * time.Millisecond) // a dead target fails fast; do not spin
		}
		return true
	}
	b.calls++
	b.lats = append(b.lats, s.lat)
	if sc.first {
		b.firsts = append(b.firsts, s.first)
	}
	return true
}

// runBatch runs ws until calls calls are made (calls > 0) or for d.
func runBatch(ctx context.Context, ws []*worker, sc *scenarioSpec, calls int, d time.Duration) *batchResult {
	var left atomic.Int64
	left.Store(int64(calls))
	parts := make([]batchResult, len(ws))
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i, w := range ws {
		if w.broken != nil {
			continue
		}
		p := &parts[i]
		wg.Go(func() {
			for ctx.Err() == nil {
				if calls > 0 {
					if left.Add(-1) < 0 {
						return
					}
				} else if !time.Now().Before(deadline) {
					return
				}
				if s, err := sc.call(w, ctx); !p.take(ctx, sc, s, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	b := &batchResult{elapsed: time.Since(start)}
	for i := range parts {
		b.merge(&parts[i])
	}
	return b
}

// paired reports whether a scenario's rounds interleave their targets in
// short bursts instead of one long batch each: a single caller's latency,
// on a machine whose speed drifts from one second to the next by more than
// the differences measured, is compared fairly only when every target's
// calls are spread over the same stretch of time.
func (e *benchEnv) paired(sc *scenarioSpec, live []*target) bool {
	return e.cfg.Interleave == InterleaveBursts && sc.conc == 1 && len(live) > 1
}

// roundOrder is the order targets take their turns in round r: live's,
// rotated by r. In a paired round, where targets take turns in bursts over
// and over, a target is followed by the same one every time, and that one's
// first calls meet whatever the first leaves behind: a recorder writes its
// turn's last calls during the next turn. With versus always after mcptape,
// a build compared with a copy of itself came out 0.82x as fast. So mcptape
// and versus trade places every other round: each follows the other as often
// as it is followed by it, and the target after them is the same as before.
func roundOrder(live []*target, r int, paired bool) []*target {
	order := make([]*target, len(live))
	for k := range live {
		order[k] = live[(r+k)%len(live)]
	}
	if paired && r%2 == 1 {
		m := slices.IndexFunc(order, func(t *target) bool { return t.name == tgMcptape })
		v := slices.IndexFunc(order, func(t *target) bool { return t.name == tgVersus })
		if m >= 0 && v >= 0 {
			order[m], order[v] = order[v], order[m]
		}
	}
	return order
}

// runInterleaved makes burst calls with each worker in turn (ws[i] calls
// target i), over and over, until each made about calls calls (calls > 0)
// or for d, and returns each target's batch. A batch's elapsed time is the
// time spent in its own calls, so its calls/s is what a single caller
// would get from it alone.
func runInterleaved(ctx context.Context, ws []*worker, sc *scenarioSpec, burst, calls int, d time.Duration) []*batchResult {
	out := make([]*batchResult, len(ws))
	for i := range out {
		out[i] = &batchResult{}
	}
	burst = max(burst, 1)
	deadline := time.Now().Add(d)
turns:
	for n := 0; ctx.Err() == nil; n += burst {
		k := burst
		if calls > 0 {
			if n >= calls {
				break
			}
			k = min(k, calls-n)
		} else if !time.Now().Before(deadline) {
			break
		}
		for i, w := range ws {
			if w.broken != nil {
				continue
			}
			b := out[i]
			for range k {
				start := time.Now()
				s, err := sc.call(w, ctx)
				b.elapsed += time.Since(start)
				if !b.take(ctx, sc, s, err) {
					break turns
				}
			}
		}
	}
	return out
}

// accum gathers one target's batches over a scenario's rounds.
type accum struct {
	batchResult
	rates []float64
	p50s  []float64 // each round's p50 latency, µs
	cpus  []float64 // each round's CPU per call, µs
	// firstP50s is each round's p50 first-event delivery, µs.
	firstP50s []float64
	cpuTicks  int64
}

// ScenarioResult is one scenario's figures for every target.
type ScenarioResult struct {
	ID          string              `json:"id"`
	Title       string              `json:"title"`
	Short       string              `json:"short"`
	Concurrency int                 `json:"concurrency"`
	Payload     int                 `json:"payload_bytes,omitempty"`
	Targets     map[string]*Figures `json:"targets"`
	Recorder    *RecorderCheck      `json:"recorder,omitempty"`
	spec        *scenarioSpec
}

// Figures are one target's numbers in one scenario. Pointers are nil when
// a figure does not apply (no CPU for direct, say).
type Figures struct {
	Calls         int               `json:"calls"`
	Failed        int               `json:"failed"`
	Errors        map[string]int    `json:"errors,omitempty"`
	ErrorExamples map[string]string `json:"error_examples,omitempty"`
	P50           *float64          `json:"p50_us,omitempty"`
	P99           *float64          `json:"p99_us,omitempty"`
	AddedP50      *float64          `json:"added_p50_us,omitempty"`
	FirstP50      *float64          `json:"first_event_p50_us,omitempty"`
	FirstP99      *float64          `json:"first_event_p99_us,omitempty"`
	FirstAdded    *float64          `json:"first_event_added_p50_us,omitempty"`
	// The first SSE event's delivery, from the fixture server's send (in
	// the event) to the load generator's receipt, each round's p50 and
	// that less direct's in the round.
	RoundFirstP50s  []float64 `json:"first_event_p50_us_rounds,omitempty"`
	RoundFirstAdded []float64 `json:"first_event_added_p50_us_rounds,omitempty"`
	CallsPerSec     *float64  `json:"calls_per_sec,omitempty"`
	RoundRates      []float64 `json:"calls_per_sec_rounds,omitempty"` // each round's, in order
	RoundP50s       []float64 `json:"p50_us_rounds,omitempty"`        // each round's p50, in order
	RoundAdded      []float64 `json:"added_p50_us_rounds,omitempty"`  // each round's p50 less direct's in that round
	RoundCPU        []float64 `json:"cpu_us_per_call_rounds,omitempty"`
	MiBPerSec       *float64  `json:"mib_per_sec,omitempty"`
	CPUPerCall      *float64  `json:"cpu_us_per_call,omitempty"`
	CPUPerMiB       *float64  `json:"cpu_ms_per_mib,omitempty"`
	PeakRSS         *float64  `json:"peak_rss_mb,omitempty"`
}

// RecorderCheck compares what the load generator exchanged through mcptape
// in one scenario with what the recorder decoded and stored.
type RecorderCheck struct {
	ClientSent     int64  `json:"client_sent"`
	ClientReceived int64  `json:"client_received"`
	Messages       int64  `json:"recorder_messages"`
	Stored         int64  `json:"stored"`
	Lost           int64  `json:"lost"`
	Dropped        int64  `json:"dropped"`
	StoreErrors    int64  `json:"store_errors"`
	Match          bool   `json:"match"`
	Note           string `json:"note,omitempty"`
}

func (r *RecorderCheck) Client() int64 { return r.ClientSent + r.ClientReceived }

func (e *benchEnv) target(name string) *target {
	for _, t := range e.targets {
		if t.name == name {
			return t
		}
	}
	return nil
}

// live is the targets that run, the replay server aside.
func (e *benchEnv) live() []*target {
	var out []*target
	for _, t := range e.targets {
		if t.live() && t.name != tgReplay {
			out = append(out, t)
		}
	}
	return out
}

// measured is the targets a scenario measures.
func (e *benchEnv) measured(sc *scenarioSpec) []*target {
	if len(sc.only) == 0 {
		return e.live()
	}
	var out []*target
	for _, t := range e.targets {
		if t.live() && slices.Contains(sc.only, t.name) {
			out = append(out, t)
		}
	}
	return out
}

func cpuTicks(t *target) int64 {
	var n int64
	for _, pid := range t.pids() {
		n += procCPUTicks(pid)
	}
	return n
}

func peakKB(t *target) int64 {
	var n int64
	for _, pid := range t.pids() {
		n += procStatusKB(pid, "VmHWM")
	}
	return n
}

// runScenario runs one scenario's rounds, interleaving the targets.
func (e *benchEnv) runScenario(ctx context.Context, sc *scenarioSpec) (*ScenarioResult, error) {
	cfg := e.cfg
	live := e.measured(sc)
	res := &ScenarioResult{ID: sc.id, Title: sc.title, Short: sc.short, Concurrency: sc.conc, Payload: sc.payload,
		Targets: map[string]*Figures{}, spec: sc}
	rec := e.target(tgMcptape)
	if rec != nil && !slices.Contains(live, rec) {
		rec = nil
	}
	var (
		before    capture.Stats
		beforeErr error
	)
	if rec != nil && rec.live() {
		before, beforeErr = e.recorderIdle(ctx, nil, -1)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}

	workers := map[string][]*worker{}
	acc := map[string]*accum{}
	for _, t := range live {
		acc[t.name] = &accum{}
		for range sc.conc {
			w := e.newWorker(t)
			if sc.setup != nil {
				if err := sc.setup(w, ctx); err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					w.broken = err
					acc[t.name].fail(fmt.Errorf("setup: %w", err))
				}
			}
			workers[t.name] = append(workers[t.name], w)
		}
	}
	if sc.rss {
		for _, t := range live {
			t.peakKB = max(t.peakKB, peakKB(t))
			for _, pid := range t.pids() {
				_ = resetPeakRSS(pid)
			}
		}
	}

	// Warm up: connections, the proxies' pools, the fixture's code paths.
	for _, t := range live {
		calls, d := sc.calls, cfg.Warmup
		if calls == 0 && d == 0 {
			calls = sc.conc
		}
		if calls > 0 {
			calls = min(calls, max(sc.conc, 2))
		}
		// Failed warm-up calls count as failures; their latencies do not count.
		b := runBatch(ctx, workers[t.name], sc, calls, d)
		for k, n := range b.errs {
			for range n {
				acc[t.name].fail(&callError{kind: k, msg: "warm-up: " + b.examples[k]})
			}
		}
	}
	if err := cmp.Or(ctx.Err(), e.checkChildren()); err != nil {
		return nil, err
	}

	calls, d := sc.calls, cfg.Batch
	if calls == 0 {
		calls = cfg.Calls
	}
	paired := e.paired(sc, live)
	rounds := cmp.Or(sc.rounds, cfg.Rounds)
	for r := range rounds {
		var line []string
		order := roundOrder(live, r, paired)
		// Each target's batch, and the CPU ticks it used meanwhile.
		batches := make([]*batchResult, len(order))
		ticks := make([]int64, len(order))
		if paired {
			// A burst of calls to each target in turn: the machine's drift
			// over the round falls on every target alike.
			ws := make([]*worker, len(order))
			for k, t := range order {
				ws[k], ticks[k] = workers[t.name][0], -cpuTicks(t)
			}
			batches = runInterleaved(ctx, ws, sc, cfg.Burst, calls, d*time.Duration(len(order)))
			for k, t := range order {
				ticks[k] += cpuTicks(t)
			}
		} else {
			for k, t := range order {
				ticks[k] = -cpuTicks(t)
				batches[k] = runBatch(ctx, workers[t.name], sc, calls, d)
				ticks[k] += cpuTicks(t)
			}
		}
		if err := cmp.Or(ctx.Err(), e.checkChildren()); err != nil {
			return nil, err
		}
		for k, t := range order {
			b := batches[k]
			a := acc[t.name]
			a.merge(b)
			a.cpuTicks += ticks[k]
			rate := 0.0
			if b.elapsed > 0 {
				rate = float64(b.calls) / b.elapsed.Seconds()
			}
			a.rates = append(a.rates, rate)
			if t.proc != nil && b.calls > 0 {
				a.cpus = append(a.cpus, float64(ticks[k])/clockTicks/float64(b.calls)*1e6)
			}
			s := fmt.Sprintf("%s %.0f/s", t.name, rate)
			if len(b.lats) > 0 {
				p50 := percentile(b.lats, 0.5)
				a.p50s = append(a.p50s, us(p50))
				s += fmt.Sprintf(" p50 %s", roundDur(p50))
			}
			if len(b.firsts) > 0 {
				a.firstP50s = append(a.firstP50s, us(percentile(b.firsts, 0.5)))
			}
			if b.failed > 0 {
				s += fmt.Sprintf(" %d FAILED", b.failed)
			}
			line = append(line, s)
		}
		e.progress("  round %d/%d: %s", r+1, rounds, strings.Join(line, " | "))
	}

	if sc.teardown != nil {
		for _, t := range live {
			for _, w := range workers[t.name] {
				// Bounded: a server may hold a session's DELETE while a call
				// on it waits for an answer that a cut stream never asked
				// for (the plain proxy's cut streams do that).
				tctx, cancel := context.WithTimeout(ctx, teardownTimeout)
				if err := sc.teardown(w, tctx); err != nil && ctx.Err() == nil {
					e.progress("  %s: closing a session: %v", t.name, err)
				}
				cancel()
			}
		}
	}
	for _, t := range live {
		f := acc[t.name].figures(sc, t)
		if sc.rss && t.proc != nil {
			kb := peakKB(t)
			t.peakKB = max(t.peakKB, kb)
			f.PeakRSS = ptr(float64(kb) / 1024)
		}
		res.Targets[t.name] = f
	}
	if d := res.Targets[tgDirect]; d != nil {
		for name, f := range res.Targets {
			if name == tgDirect {
				continue
			}
			if f.P50 != nil && d.P50 != nil {
				f.AddedP50 = ptr(*f.P50 - *d.P50)
			}
			f.RoundAdded = roundDiff(f.RoundP50s, d.RoundP50s)
			if f.FirstP50 != nil && d.FirstP50 != nil {
				f.FirstAdded = ptr(*f.FirstP50 - *d.FirstP50)
			}
			f.RoundFirstAdded = roundDiff(f.RoundFirstP50s, d.RoundFirstP50s)
		}
	}

	if rec != nil && rec.live() {
		rc := &RecorderCheck{}
		for _, w := range workers[tgMcptape] {
			rc.ClientSent += w.sent
			rc.ClientReceived += w.recv
		}
		after, err := e.recorderIdle(ctx, &before, rc.Client())
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err = cmp.Or(beforeErr, err); err != nil {
			// The run goes on: the report says what went wrong.
			rc.Note = err.Error()
			if rec.proc.exited() {
				rc.Note += fmt.Sprintf("; mcptape record exited (%v); %s", rec.proc.waitErr, rec.proc.logTail())
			}
			res.Recorder = rc
			return res, nil
		}
		rc.Messages = after.Messages - before.Messages
		rc.Stored = after.Stored - before.Stored
		rc.Lost = after.Lost - before.Lost
		rc.Dropped = after.Dropped - before.Dropped
		rc.StoreErrors = after.StoreErrors - before.StoreErrors
		rc.Match = rc.Messages == rc.Client() && rc.Stored == rc.Client() && rc.Lost == 0 && rc.Dropped == 0
		if !rc.Match {
			rc.Note = fmt.Sprintf("client %d, decoded %d, stored %d, lost %d, dropped %d", rc.Client(), rc.Messages, rc.Stored, rc.Lost, rc.Dropped)
			if after.LastError != "" {
				rc.Note += "; last store error: " + after.LastError
			}
		}
		res.Recorder = rc
	}
	return res, nil
}

// recorderIdle waits until the recorder has decoded and stored everything:
// nothing in flight or queued, every decoded message stored or lost, and,
// when want >= 0, want messages more than base; or until its counts stop
// moving. It returns the counts then.
func (e *benchEnv) recorderIdle(ctx context.Context, base *capture.Stats, want int64) (capture.Stats, error) {
	deadline := time.Now().Add(20 * time.Second)
	var last capture.Stats
	stable := time.Now()
	settle := 300 * time.Millisecond
	if want >= 0 {
		settle = 2 * time.Second
	}
	for {
		st, err := e.recorder.Status(ctx)
		if err != nil {
			return capture.Stats{}, fmt.Errorf("asking the mcptape recorder for its counts: %w", err)
		}
		s := st.Stats
		idle := s.InFlight == 0 && s.QueueDepth == 0 && s.Messages == s.Stored+s.Lost
		if idle && base != nil && want >= 0 && s.Messages-base.Messages == want {
			return s, nil
		}
		if s != last {
			last, stable = s, time.Now()
		} else if idle && time.Since(stable) >= settle {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return capture.Stats{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (a *accum) figures(sc *scenarioSpec, t *target) *Figures {
	f := &Figures{Calls: a.calls, Failed: a.failed, Errors: a.errs, ErrorExamples: a.examples}
	if len(a.lats) > 0 {
		f.P50 = ptr(us(percentile(a.lats, 0.5)))
		f.P99 = ptr(us(percentile(a.lats, 0.99)))
		f.RoundP50s = a.p50s
	}
	if len(a.firsts) > 0 {
		f.FirstP50 = ptr(us(percentile(a.firsts, 0.5)))
		f.FirstP99 = ptr(us(percentile(a.firsts, 0.99)))
		f.RoundFirstP50s = a.firstP50s
	}
	if len(a.rates) > 0 {
		f.CallsPerSec = ptr(median(a.rates))
		f.RoundRates = a.rates
		if sc.payload > 0 {
			f.MiBPerSec = ptr(*f.CallsPerSec * float64(sc.payload) / (1 << 20))
		}
	}
	if t.proc != nil && a.calls > 0 {
		cpu := float64(a.cpuTicks) / clockTicks // seconds
		f.CPUPerCall = ptr(cpu / float64(a.calls) * 1e6)
		if len(a.cpus) == len(a.rates) {
			f.RoundCPU = a.cpus
		}
		if sc.payload > 0 {
			f.CPUPerMiB = ptr(cpu * 1e3 / (float64(a.calls) * float64(sc.payload) / (1 << 20)))
		}
	}
	return f
}

func ptr(v float64) *float64 { return &v }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// roundDiff is each round's figure less direct's in that round; nil
// unless both have every round.
func roundDiff(f, direct []float64) []float64 {
	if len(f) != len(direct) {
		return nil
	}
	var out []float64
	for i, v := range f {
		out = append(out, v-direct[i])
	}
	return out
}

// percentile is the nearest-rank q-quantile of ds (sorted in place).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
