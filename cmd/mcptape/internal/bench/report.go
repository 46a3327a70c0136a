package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Report is everything `mcptape bench` measured; --json writes it.
type Report struct {
	Machine   machineInfo       `json:"machine"`
	Config    map[string]any    `json:"config"`
	Started   time.Time         `json:"started"`
	Duration  time.Duration     `json:"duration_ns"`
	Targets   []targetInfo      `json:"targets"`
	Scenarios []*ScenarioResult `json:"scenarios"`
	// PeakRSS is each proxy's highest VmHWM over the whole run, in MB.
	PeakRSS  map[string]float64 `json:"peak_rss_mb"`
	Verdicts []Verdict          `json:"verdicts"`
}

type machineInfo struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model"`
	Kernel     string `json:"kernel"`
	Go         string `json:"go"`
	Mcptape    string `json:"mcptape"`
	Nginx      string `json:"nginx,omitempty"`
	TempDir    string `json:"temp_dir"`
}

type targetInfo struct {
	Name    string `json:"name"`
	URL     string `json:"url,omitempty"`
	PIDs    []int  `json:"pids,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	// Exited says how the target's process ended, when it did so before
	// the bench stopped it.
	Exited string `json:"exited,omitempty"`
}

// Verdict is one of the performance targets, passed or not.
type Verdict struct {
	// Group is what the target compares: "plain" (mcptape against the
	// plain Go proxy), "nginx" (against nginx), "replay" (the replay
	// server against the live one).
	Group   string `json:"group"`
	Name    string `json:"name"`
	Pass    bool   `json:"pass"`
	Skipped bool   `json:"skipped,omitempty"`
	Detail  string `json:"detail"`
}

func machine(nginx string) machineInfo {
	return machineInfo{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUModel: cpuModel(), Kernel: kernelRelease(),
		Go: runtime.Version(), Mcptape: mcptapeVersion, Nginx: nginx, TempDir: os.TempDir(),
	}
}

func (c *Config) toJSON() map[string]any {
	return map[string]any{
		"scenarios": c.Scenarios, "targets": c.Targets, "rounds": c.Rounds, "batch": c.Batch.String(), "calls": c.Calls, "interleave": c.Interleave, "burst": c.Burst, "versus": c.Versus,
		"warmup": c.Warmup.String(), "concurrency": c.Concurrency, "big_bytes": c.BigBytes, "big_concurrency": c.BigConc,
		"sse_duration": c.SSEDuration.String(), "sse_steps": c.SSESteps, "sse_concurrency": c.SSEConc,
		"huge_bytes": c.HugeBytes, "huge_concurrency": c.HugeConc, "huge_calls": c.HugeCalls, "steady_rounds": c.SteadyRounds,
	}
}

func (r *Report) scenario(id string) *ScenarioResult {
	for _, s := range r.Scenarios {
		if s.ID == id {
			return s
		}
	}
	return nil
}

func (r *Report) Fig(id, target string) *Figures {
	if s := r.scenario(id); s != nil {
		return s.Targets[target]
	}
	return nil
}

func (r *Report) ran(target string) bool {
	for _, t := range r.Targets {
		if t.Name == target {
			return t.Skipped == ""
		}
	}
	return false
}

// finish reads the whole-run peaks and judges the targets.
func (r *Report) finish(e *benchEnv) {
	r.PeakRSS = map[string]float64{}
	for i, t := range e.targets {
		if t.live() && t.proc != nil && t.proc.exited() {
			r.Targets[i].Exited = fmt.Sprintf("%v; %s", t.proc.waitErr, t.proc.logTail())
		}
	}
	for _, t := range e.live() {
		if t.proc != nil {
			t.peakKB = max(t.peakKB, peakKB(t))
			r.PeakRSS[t.name] = float64(t.peakKB) / 1024
		}
	}
	r.Verdicts = r.judge()
}

func (r *Report) failed() int {
	n := 0
	for _, v := range r.Verdicts {
		if !v.Pass && !v.Skipped {
			n++
		}
	}
	return n
}

// The groups of targets.
const (
	groupPlain  = "plain"  // mcptape against the plain Go proxy
	groupNginx  = "nginx"  // mcptape against nginx
	groupReplay = "replay" // the replay server against the live server
)

// judge applies the performance targets: against the plain Go proxy,
// against nginx, and the replay server against the live one.
func (r *Report) judge() []Verdict {
	out := r.judgeProxies()
	// The replay server answers at least as fast as the live one.
	if rp, d := r.Fig(scReplay, tgReplay), r.Fig(scReplay, tgDirect); rp != nil && d != nil && rp.CallsPerSec != nil && d.CallsPerSec != nil {
		out = append(out, Verdict{Group: groupReplay, Name: "replay server: calls/s ≥ the live server's, none failed", Pass: *rp.CallsPerSec >= *d.CallsPerSec && rp.Failed == 0,
			Detail: fmt.Sprintf("replay %s (%d failed) ≥ live %s", num(*rp.CallsPerSec, "/s"), rp.Failed, num(*d.CallsPerSec, "/s"))})
	}
	return out
}

// judgeProxies applies the proxy targets (against plain and nginx).
func (r *Report) judgeProxies() []Verdict {
	var out []Verdict
	if !r.ran(tgMcptape) {
		return nil
	}
	add := func(group, name string, ok bool, detail string) {
		out = append(out, Verdict{Group: group, Name: name, Pass: ok, Detail: detail})
	}
	skip := func(group, name, why string) {
		out = append(out, Verdict{Group: group, Name: name, Skipped: true, Detail: why})
	}
	// ratio checks mcptape's figure against factor × the other target's:
	// at most, or at least when more is better.
	ratio := func(group, name, scenario, other string, factor float64, mt measure) {
		get, rounds, unit, atLeast := mt.fig, mt.rounds, mt.unit, mt.atLeast
		m, o := r.Fig(scenario, tgMcptape), r.Fig(scenario, other)
		if m == nil || o == nil || get(m) == nil || get(o) == nil {
			skip(group, name, "not measured: run the "+scenario+" scenario with the "+other+" and mcptape targets")
			return
		}
		mv, ov := *get(m), *get(o)
		if !atLeast && ov <= 0 {
			// An added figure at or below zero is noise around direct's:
			// no factor of it means anything.
			skip(group, name, fmt.Sprintf("%s's figure %s is not above zero, so no ratio applies; rerun with more --rounds", other, num(ov, unit)))
			return
		}
		limit := factor * ov
		ms, ls := close2(mv, limit, unit)
		op, ok := "≤", mv <= limit
		if atLeast {
			op, ok = "≥", mv >= limit
		}
		detail := fmt.Sprintf("mcptape %s %s %.3g × %s's %s = %s", ms, op, factor, other, num(ov, unit), ls)
		if rounds != nil && ov > 0 {
			detail += roundSpread(mv/ov, rounds(m), rounds(o), other)
		}
		add(group, name, ok, detail)
	}
	added := measure{func(f *Figures) *float64 { return f.AddedP50 }, func(f *Figures) []float64 { return f.RoundAdded }, "+µs", false}
	rate := measure{func(f *Figures) *float64 { return f.CallsPerSec }, func(f *Figures) []float64 { return f.RoundRates }, "/s", true}
	cpuCall := measure{func(f *Figures) *float64 { return f.CPUPerCall }, func(f *Figures) []float64 { return f.RoundCPU }, "µs", false}
	cpuMiB := measure{func(f *Figures) *float64 { return f.CPUPerMiB }, nil, "ms", false}
	firstAdded := measure{func(f *Figures) *float64 { return f.FirstAdded }, func(f *Figures) []float64 { return f.RoundFirstAdded }, "+µs", false}

	firstMax := func(group string) {
		name := "SSE first event: added delay ≤ 1 ms"
		f := r.Fig(scSSE, tgMcptape)
		if f == nil || f.FirstAdded == nil {
			skip(group, name, "not measured: run the sse scenario")
			return
		}
		add(group, name, *f.FirstAdded <= 1000, fmt.Sprintf("mcptape %s ≤ +1000 µs", num(*f.FirstAdded, "+µs")))
	}

	if r.ran(tgPlain) {
		ratio(groupPlain, "echo c=1: added p50 ≤ 1.3 × plain's", scEcho1, tgPlain, 1.3, added)
		ratio(groupPlain, "echo c=32: calls/s ≥ 0.7 × plain's", scEcho32, tgPlain, 0.7, rate)
	} else {
		skip(groupPlain, "against the plain Go proxy", "the plain target did not run")
	}
	firstMax(groupPlain)
	// Nothing lost: every scenario's client counts are the stored counts.
	var bad []string
	checked := 0
	for _, s := range r.Scenarios {
		if s.Recorder == nil {
			continue
		}
		checked++
		if !s.Recorder.Match {
			bad = append(bad, s.Short+": "+s.Recorder.Note)
		}
	}
	if checked == 0 {
		skip(groupPlain, "nothing lost", "no scenario ran")
	} else if len(bad) > 0 {
		add(groupPlain, "nothing lost: client counts = stored counts, none lost or dropped", false, strings.Join(bad, "; "))
	} else {
		add(groupPlain, "nothing lost: client counts = stored counts, none lost or dropped", true, fmt.Sprintf("all %d scenarios match", checked))
	}
	failedCalls, calls := 0, 0
	for _, s := range r.Scenarios {
		if f := s.Targets[tgMcptape]; f != nil {
			failedCalls += f.Failed
			calls += f.Calls
		}
	}
	add(groupPlain, "every call through mcptape succeeded", failedCalls == 0, fmt.Sprintf("%d failed of %d", failedCalls, calls+failedCalls))
	peakRSS := func(group string, limit float64) {
		name := fmt.Sprintf("peak RSS < %.0f MB with large results in flight", limit)
		f := r.Fig(scHuge, tgMcptape)
		if f == nil || f.PeakRSS == nil {
			skip(group, name, "not measured: run the huge scenario")
			return
		}
		add(group, name, *f.PeakRSS < limit, fmt.Sprintf("mcptape's peak RSS during the %s scenario %.1f MB", r.scenario(scHuge).Short, *f.PeakRSS))
	}
	peakRSS(groupPlain, 150)
	// The steady scenario: its CPU per call holds as its store grows.
	const steadyCPU = "CPU per call over the last third of the rounds ≤ 1.5 × the first third's"
	sc := r.scenario(scSteady)
	measured := sc != nil && sc.Targets[tgMcptape] != nil
	var cpu []float64
	if measured {
		cpu = sc.Targets[tgMcptape].RoundCPU
	}
	switch first, last := thirds(cpu); {
	case !measured:
		skip(groupPlain, "steady: "+steadyCPU, "not measured: run the steady scenario")
	case first == nil || *first <= 0:
		skip(groupPlain, sc.Short+": "+steadyCPU, fmt.Sprintf("%d rounds: give at least 3 --steady-rounds", len(cpu)))
	default:
		add(groupPlain, sc.Short+": "+steadyCPU, *last <= 1.5**first, fmt.Sprintf("last third %s, first third %s (%.2f×); round by round %s–%s",
			num(*last, "µs"), num(*first, "µs"), *last / *first, num(slices.Min(cpu), "µs"), num(slices.Max(cpu), "µs")))
	}
	// Not calls/s: the load generator and the fixture server share the
	// machine, and their own speed moves it by a third from round to round.

	if !r.ran(tgNginx) {
		skip(groupNginx, "against nginx", "the nginx target did not run")
		return out
	}
	ratio(groupNginx, "echo c=1: added p50 ≤ 1.25 × nginx's", scEcho1, tgNginx, 1.25, added)
	ratio(groupNginx, "echo c=1: CPU per call ≤ 2.5 × nginx's", scEcho1, tgNginx, 2.5, cpuCall)
	ratio(groupNginx, "echo c=32: CPU per call ≤ 2.5 × nginx's", scEcho32, tgNginx, 2.5, cpuCall)
	ratio(groupNginx, "echo c=32: calls/s ≥ 0.9 × nginx's", scEcho32, tgNginx, 0.9, rate)
	ratio(groupNginx, "sampling: added p50 per round trip ≤ 1.5 × nginx's", scSampling, tgNginx, 1.5, added)
	ratio(groupNginx, "big results: calls/s ≥ 0.9 × nginx's", scBig, tgNginx, 0.9, rate)
	ratio(groupNginx, "big results: CPU per MiB ≤ 2 × nginx's", scBig, tgNginx, 2, cpuMiB)
	ratio(groupNginx, "huge results: calls/s ≥ 0.9 × nginx's", scHuge, tgNginx, 0.9, rate)
	ratio(groupNginx, "SSE first event: added ≤ 1.5 × nginx's", scSSE, tgNginx, 1.5, firstAdded)
	firstMax(groupNginx)
	peakRSS(groupNginx, 100)
	return out
}

// measure is a figure the verdicts compare between two targets: how to get
// it, each round's (nil: no round-by-round spread), its unit, and whether
// more is better.
type measure struct {
	fig     func(*Figures) *float64
	rounds  func(*Figures) []float64
	unit    string
	atLeast bool
}

// num formats v with its unit; "+µs" is a signed difference.
func num(v float64, unit string) string { return numPrec(v, unit, 0) }

// numPrec is num with extra more decimal places.
func numPrec(v float64, unit string, extra int) string {
	switch unit {
	case "+µs":
		return fmt.Sprintf("%+.*f µs", extra, v)
	case "µs":
		return fmt.Sprintf("%.*f µs", extra, v)
	case "ms":
		return fmt.Sprintf("%.*f ms", 2+extra, v)
	case "/s":
		return fmt.Sprintf("%.*f calls/s", extra, v)
	}
	return fmt.Sprintf("%.*g %s", 3+extra, v, unit)
}

// close2 formats a figure and the bound it is judged against, with as many
// more decimal places as it takes (up to three) for two that differ to
// read differently: a verdict decided by a fraction of the unit does not
// print as "114 µs ≤ 114 µs" and fail.
func close2(v, bound float64, unit string) (string, string) {
	for extra := 0; ; extra++ {
		a, b := numPrec(v, unit, extra), numPrec(bound, unit, extra)
		if a != b || v == bound || extra == 3 {
			return a, b
		}
	}
}

// row is one line of the table: a metric of a scenario for every target.
type row struct {
	scenario, metric string
	vals             map[string]*float64
	prec             int
	signed, ratio    bool
}

func (r *Report) rows() []row {
	var rows []row
	for _, s := range r.Scenarios {
		add := func(metric string, prec int, signed, ratio bool, get func(*Figures) *float64) {
			rw := row{scenario: s.Short, metric: metric, vals: map[string]*float64{}, prec: prec, signed: signed, ratio: ratio}
			for name, f := range s.Targets {
				rw.vals[name] = get(f)
			}
			rows = append(rows, rw)
		}
		p50 := func(f *Figures) *float64 { return f.P50 }
		p99 := func(f *Figures) *float64 { return f.P99 }
		ms := func(get func(*Figures) *float64) func(*Figures) *float64 {
			return func(f *Figures) *float64 {
				if v := get(f); v != nil {
					return ptr(*v / 1000)
				}
				return nil
			}
		}
		added := func(f *Figures) *float64 { return f.AddedP50 }
		rate := func(f *Figures) *float64 { return f.CallsPerSec }
		mibs := func(f *Figures) *float64 { return f.MiBPerSec }
		cpuCall := func(f *Figures) *float64 { return f.CPUPerCall }
		cpuMiB := func(f *Figures) *float64 { return f.CPUPerMiB }
		failed := func(f *Figures) *float64 { return ptr(float64(f.Failed)) }
		switch s.ID {
		case scEcho1, scSampling, scMRTR:
			add("p50 latency (µs)", 0, false, true, p50)
			add("p99 latency (µs)", 0, false, true, p99)
			add("added p50 over direct (µs)", 0, true, true, added)
			if s.ID == scEcho1 {
				add("calls/s", 0, false, true, rate)
			}
			add("proxy CPU per call (µs)", 0, false, true, cpuCall)
		case scReplay:
			add("calls/s", 0, false, true, rate)
			add("p50 latency (µs)", 0, false, true, p50)
			add("p99 latency (µs)", 0, false, true, p99)
			add("calls/s ÷ live (direct)", 2, false, false, func(f *Figures) *float64 {
				d := s.Targets[tgDirect]
				if f == d || f.CallsPerSec == nil || d == nil || d.CallsPerSec == nil || *d.CallsPerSec <= 0 {
					return nil
				}
				return ptr(*f.CallsPerSec / *d.CallsPerSec)
			})
			add("replay server CPU per call (µs)", 0, false, true, cpuCall)
		case scEcho32:
			add("calls/s", 0, false, true, rate)
			add("p50 latency (µs)", 0, false, true, p50)
			add("p99 latency (µs)", 0, false, true, p99)
			add("proxy CPU per call (µs)", 0, false, true, cpuCall)
		case scBig, scHuge:
			add("calls/s", 1, false, true, rate)
			add("MiB/s", 0, false, true, mibs)
			add("p50 latency (ms)", 2, false, true, ms(p50))
			add("proxy CPU per MiB (ms)", 2, false, true, cpuMiB)
			if s.ID == scHuge {
				add("peak RSS during the scenario (MB)", 1, false, true, func(f *Figures) *float64 { return f.PeakRSS })
			}
		case scSteady:
			add("calls/s", 0, false, false, rate)
			add("p50 latency (µs)", 0, false, false, p50)
			add("p99 latency (µs)", 0, false, false, p99)
			add("proxy CPU per call (µs)", 0, false, false, cpuCall)
			add("calls/s, first third of the rounds", 0, false, false, func(f *Figures) *float64 { v, _ := thirds(f.RoundRates); return v })
			add("calls/s, last third", 0, false, false, func(f *Figures) *float64 { _, v := thirds(f.RoundRates); return v })
			add("proxy CPU per call, first third (µs)", 0, false, false, func(f *Figures) *float64 { v, _ := thirds(f.RoundCPU); return v })
			add("proxy CPU per call, last third (µs)", 0, false, false, func(f *Figures) *float64 { _, v := thirds(f.RoundCPU); return v })
		case scSSE:
			add("first event delivery p50 (µs)", 0, false, true, func(f *Figures) *float64 { return f.FirstP50 })
			add("first event delivery p99 (µs)", 0, false, true, func(f *Figures) *float64 { return f.FirstP99 })
			add("first event added p50 over direct (µs)", 0, true, true, func(f *Figures) *float64 { return f.FirstAdded })
			add("call p50 (ms)", 2, false, true, ms(p50))
			add("proxy CPU per call (µs)", 0, false, true, cpuCall)
		}
		add("failed calls", 0, false, false, failed)
	}
	if len(r.PeakRSS) > 0 {
		rw := row{scenario: "whole run", metric: "peak RSS (MB)", vals: map[string]*float64{}, prec: 1, ratio: true}
		for name, mb := range r.PeakRSS {
			rw.vals[name] = ptr(mb)
		}
		rows = append(rows, rw)
	}
	return rows
}

func cell(v *float64, prec int, signed bool) string {
	if v == nil {
		return "—"
	}
	if signed {
		return fmt.Sprintf("%+.*f", prec, *v)
	}
	return fmt.Sprintf("%.*f", prec, *v)
}

func (r *Report) writeMarkdown(w io.Writer) {
	m := r.Machine
	var live []string
	for _, t := range r.Targets {
		if t.Skipped == "" {
			live = append(live, t.Name)
		}
	}
	fmt.Fprintf(w, "# mcptape bench\n\n")
	fmt.Fprintf(w, "- machine: %d CPUs (nproc), %s; %s; %s (GOMAXPROCS %d); mcptape %s", m.CPUs, m.CPUModel, m.Kernel, m.Go, m.GOMAXPROCS, m.Mcptape)
	if m.Nginx != "" {
		fmt.Fprintf(w, "; %s", m.Nginx)
	}
	fmt.Fprintln(w)
	batch := r.Config["batch"].(string) + " batch"
	if n, _ := r.Config["calls"].(int); n > 0 {
		batch = fmt.Sprintf("%d-call batch", n)
	}
	single := ""
	if r.Config["interleave"] == InterleaveBursts {
		single = fmt.Sprintf("; a scenario with a single caller spreads each round over its targets in bursts of %d calls to each in turn, over and over "+
			"(about the same calls per target as a %s each, but spread over the same stretch of time; its calls/s is calls over the time spent in them)", r.Config["burst"], batch)
	}
	steady := ""
	if r.scenario(scSteady) != nil {
		steady = fmt.Sprintf(" (the steady scenario: %d batches in a row to mcptape alone)", r.Config["steady_rounds"])
	}
	fmt.Fprintf(w, "- method: loopback only, every server and proxy its own process; %d rounds per scenario%s, each round one %s per target in rotating order (interleaved)%s; %s in all\n",
		r.Config["rounds"], steady, batch, single, r.Duration.Round(time.Second))
	versus := ""
	if v, _ := r.Config["versus"].(string); v != "" {
		versus = fmt.Sprintf("; versus = `%s record`, another mcptape binary (--versus), set up as mcptape is", v)
		if r.Config["interleave"] == InterleaveBursts {
			versus += ", the two trading places every other round of a single caller's bursts (each meets what the other leaves behind as often)"
		}
	}
	fmt.Fprintf(w, "- targets: direct = load generator → fixture server; plain = stock httputil.ReverseProxy (without mcptape's fix for the request-body race that cuts streams); "+
		"nginx = proxy_buffering off, HTTP/1.1 keepalive upstream; mcptape = `mcptape record` into a fresh Badger store under %s; "+
		"mcptape-forward = `mcptape record --forward`, the load generator using it as its HTTP proxy; "+
		"mcptape-mitm = `mcptape record --forward --mitm`, the load generator tunnelling through it (CONNECT, TLS with mcptape's CA) to the fixture server over TLS (so its figures include TLS on both sides, which direct does not have); "+
		"replay = `mcptape replay server` on a tape recorded from the fixture server (replay scenario only)%s\n", m.TempDir, versus)
	for _, t := range r.Targets {
		if t.Skipped != "" {
			fmt.Fprintf(w, "- **%s skipped**: %s\n", t.Name, t.Skipped)
		}
		if t.Exited != "" {
			fmt.Fprintf(w, "- **%s's process exited during the run**: %s\n", t.Name, t.Exited)
		}
	}
	fmt.Fprintln(w)

	var ratios []string
	if slices.Contains(live, tgMcptape) {
		for _, o := range []string{tgPlain, tgNginx, tgVersus} {
			if slices.Contains(live, o) {
				ratios = append(ratios, o)
			}
		}
	}
	fmt.Fprintf(w, "| scenario | metric | %s |", strings.Join(live, " | "))
	for _, o := range ratios {
		fmt.Fprintf(w, " mcptape ÷ %s |", o)
	}
	fmt.Fprintf(w, "\n|---|---|%s%s\n", strings.Repeat("---:|", len(live)), strings.Repeat("---:|", len(ratios)))
	last := ""
	for _, rw := range r.rows() {
		sc := rw.scenario
		if sc == last {
			sc = ""
		}
		last = rw.scenario
		fmt.Fprintf(w, "| %s | %s |", sc, rw.metric)
		for _, t := range live {
			fmt.Fprintf(w, " %s |", cell(rw.vals[t], rw.prec, rw.signed))
		}
		for _, o := range ratios {
			mv, ov := rw.vals[tgMcptape], rw.vals[o]
			if !rw.ratio || mv == nil || ov == nil || *ov <= 0 || (rw.signed && *mv < 0) {
				fmt.Fprint(w, " — |")
				continue
			}
			fmt.Fprintf(w, " %.2f× |", *mv / *ov)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "\nLatency percentiles are over every measured call of every round; calls/s and MiB/s are medians of the per-round rates; "+
		"\"added\" is a target's p50 minus direct's; proxy CPU is utime+stime of the proxy's process (nginx: master and workers) "+
		"during its own batches, divided by its calls or MiB; peak RSS is VmHWM (nginx: summed over its processes); "+
		"an SSE first event's delivery is from the fixture server's send (its time is in the event) to the load generator's receipt, "+
		"so that how late the server's timer fired is left out.\n")
	for _, s := range r.Scenarios {
		fmt.Fprintf(w, "\n- %s: %s", s.Short, s.Title)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "\n## failed calls\n\n")
	none := true
	for _, s := range r.Scenarios {
		for _, t := range live {
			f := s.Targets[t]
			if f == nil || f.Failed == 0 {
				continue
			}
			none = false
			kinds := make([]string, 0, len(f.Errors))
			for k, n := range f.Errors {
				kinds = append(kinds, fmt.Sprintf("%d %s (e.g. %s)", n, k, f.ErrorExamples[k]))
			}
			slices.Sort(kinds)
			fmt.Fprintf(w, "- %s, %s: %d of %d: %s\n", s.Short, t, f.Failed, f.Calls+f.Failed, strings.Join(kinds, "; "))
		}
	}
	if none {
		fmt.Fprintln(w, "None: every response had the right id, a result, and a complete stream.")
	}

	if slices.Contains(live, tgMcptape) {
		fmt.Fprintf(w, "\n## mcptape's recorder: client counts = stored counts\n\n")
		fmt.Fprintln(w, "Messages the load generator sent and received through mcptape (SSE frames without a message, such as 2025-11-25 priming events, count as one, as the recorder stores them), against the recorder's Stats.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| scenario | client sent | client received | client total | decoded | stored | lost | dropped | |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---|")
		for _, s := range r.Scenarios {
			rc := s.Recorder
			if rc == nil {
				continue
			}
			mark := "equal"
			if !rc.Match {
				mark = "**DIFFERENT**"
			}
			fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %s |\n", s.Short, rc.ClientSent, rc.ClientReceived, rc.Client(), rc.Messages, rc.Stored, rc.Lost, rc.Dropped, mark)
		}
	}

	if len(r.Verdicts) > 0 {
		fmt.Fprintf(w, "\n## targets\n")
		group := ""
		pass, judged := 0, 0
		for _, v := range r.Verdicts {
			if v.Group != group {
				group = v.Group
				what := "mcptape against the plain Go proxy"
				switch group {
				case groupReplay:
					what = "the replay server against the live server"
				case groupNginx:
					what = "mcptape against nginx"
				}
				fmt.Fprintf(w, "\n### %s\n\n", what)
			}
			status := "**FAIL**"
			switch {
			case v.Skipped:
				status = "SKIP"
			case v.Pass:
				status = "PASS"
			}
			if !v.Skipped {
				judged++
				if v.Pass {
					pass++
				}
			}
			fmt.Fprintf(w, "- %s %s: %s\n", status, v.Name, v.Detail)
		}
		fmt.Fprintf(w, "\n%d of %d targets passed.\n", pass, judged)
	}
}

func (r *Report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// roundSpread says how mcptape's calls/s (ratio times other's) compared
// with other's round by round (the batches of a round run back to back),
// so that a reader sees how much of a verdict near its factor is the
// machine's noise.
func roundSpread(ratio float64, m, o []float64, other string) string {
	if len(m) < 2 || len(m) != len(o) {
		return ""
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	out := 0
	for i := range m {
		if o[i] <= 0 || m[i] <= 0 {
			out++ // a figure at or below zero is noise: no ratio
			continue
		}
		lo, hi = min(lo, m[i]/o[i]), max(hi, m[i]/o[i])
	}
	if out == len(m) {
		return ""
	}
	s := fmt.Sprintf(" (mcptape ÷ %s: %.2f; round by round %.2f–%.2f", other, ratio, lo, hi)
	if out > 0 {
		s += fmt.Sprintf("; %d of %d rounds left out, where a figure was not above zero", out, len(m))
	}
	return s + ")"
}

// thirds returns the medians of v's first and last thirds (the steady
// scenario's rounds, in order); nil with fewer than three.
func thirds(v []float64) (first, last *float64) {
	n := len(v) / 3
	if n == 0 {
		return nil, nil
	}
	return ptr(median(v[:n])), ptr(median(v[len(v)-n:]))
}
