package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeReport is a bench report with made-up figures: direct, plain, nginx
// and mcptape in every proxy scenario, and the replay server beside direct.
func fakeReport(mod func(r *Report)) *Report {
	f := func(v float64) *float64 { return &v }
	r := &Report{PeakRSS: map[string]float64{tgMcptape: 60}, Config: (&Config{Rounds: 5, Batch: time.Second}).toJSON()}
	for _, name := range []string{tgDirect, tgPlain, tgNginx, tgMcptape, tgReplay} {
		r.Targets = append(r.Targets, targetInfo{Name: name})
	}
	sc := func(id, short string, t map[string]*Figures) {
		r.Scenarios = append(r.Scenarios, &ScenarioResult{ID: id, Short: short, Targets: t,
			Recorder: &RecorderCheck{ClientSent: 10, ClientReceived: 10, Messages: 20, Stored: 20, Match: true}})
	}
	sc(scEcho1, "echo c=1", map[string]*Figures{
		tgDirect:  {Calls: 100, P50: f(300)},
		tgPlain:   {Calls: 100, P50: f(600), AddedP50: f(300), CPUPerCall: f(360)},
		tgNginx:   {Calls: 100, P50: f(360), AddedP50: f(60), CPUPerCall: f(80)},
		tgMcptape: {Calls: 100, P50: f(370), AddedP50: f(70), CPUPerCall: f(150)},
	})
	sc(scSampling, "sampling", map[string]*Figures{
		tgDirect:  {Calls: 100, P50: f(500)},
		tgNginx:   {Calls: 100, P50: f(600), AddedP50: f(100), CPUPerCall: f(150)},
		tgMcptape: {Calls: 100, P50: f(640), AddedP50: f(140), CPUPerCall: f(400)},
	})
	sc(scEcho32, "echo c=32", map[string]*Figures{
		tgDirect:  {Calls: 100, CallsPerSec: f(8000)},
		tgPlain:   {Calls: 100, CallsPerSec: f(3000), CPUPerCall: f(300)},
		tgNginx:   {Calls: 100, CallsPerSec: f(6000), CPUPerCall: f(70)},
		tgMcptape: {Calls: 100, CallsPerSec: f(5800), CPUPerCall: f(150)},
	})
	sc(scBig, "1 MiB results", map[string]*Figures{
		tgNginx:   {Calls: 10, CallsPerSec: f(100), CPUPerMiB: f(2)},
		tgMcptape: {Calls: 10, CallsPerSec: f(95), CPUPerMiB: f(3)},
	})
	sc(scSSE, "SSE first event", map[string]*Figures{
		tgNginx:   {Calls: 10, FirstAdded: f(100)},
		tgMcptape: {Calls: 10, FirstAdded: f(120)},
	})
	sc(scSteady, "steady c=32", map[string]*Figures{
		tgMcptape: {Calls: 600, CallsPerSec: f(2000), CPUPerCall: f(150),
			RoundRates: []float64{2000, 1900, 2100, 2000, 1800, 2000}, RoundCPU: []float64{150, 160, 140, 150, 170, 150}},
	})
	sc(scHuge, "10 MiB results", map[string]*Figures{
		tgNginx:   {Calls: 10, CallsPerSec: f(10)},
		tgMcptape: {Calls: 10, CallsPerSec: f(9.5), PeakRSS: f(80)},
	})
	r.Scenarios = append(r.Scenarios, &ScenarioResult{ID: scReplay, Short: "replay vs live", Targets: map[string]*Figures{
		tgDirect: {Calls: 100, CallsPerSec: f(1000)},
		tgReplay: {Calls: 100, CallsPerSec: f(3000)},
	}})
	if mod != nil {
		mod(r)
	}
	r.Verdicts = r.judge()
	return r
}

func verdictByName(t *testing.T, r *Report, group, prefix string) Verdict {
	t.Helper()
	for _, v := range r.Verdicts {
		if v.Group == group && strings.HasPrefix(v.Name, prefix) {
			return v
		}
	}
	t.Fatalf("no verdict %q for group %s in %+v", prefix, group, r.Verdicts)
	return Verdict{}
}

func TestBenchVerdicts(t *testing.T) {
	r := fakeReport(nil)
	if n := r.failed(); n != 0 {
		t.Fatalf("%d failed verdicts on figures that meet every target: %+v", n, r.Verdicts)
	}
	for _, tc := range []struct {
		name, group, verdict string
		mod                  func(r *Report)
		pass, skipped        bool
	}{
		{"added p50 over 1.25 × nginx's", groupNginx, "echo c=1: added p50", func(r *Report) { *r.Fig(scEcho1, tgMcptape).AddedP50 = 76 }, false, false},
		{"added p50 exactly 1.25 × nginx's", groupNginx, "echo c=1: added p50", func(r *Report) { *r.Fig(scEcho1, tgMcptape).AddedP50 = 75 }, true, false},
		{"sampling added p50 over 1.5 × nginx's", groupNginx, "sampling: added p50", func(r *Report) { *r.Fig(scSampling, tgMcptape).AddedP50 = 151 }, false, false},
		{"sampling not run", groupNginx, "sampling: added p50", func(r *Report) { delete(r.Scenarios[1].Targets, tgNginx) }, false, true},
		{"nginx's added p50 is noise", groupNginx, "echo c=1: added p50", func(r *Report) { *r.Fig(scEcho1, tgNginx).AddedP50 = -3 }, false, true},
		{"CPU per call", groupNginx, "echo c=1: CPU per call", func(r *Report) { *r.Fig(scEcho1, tgMcptape).CPUPerCall = 201 }, false, false},
		{"throughput under 0.9 nginx's", groupNginx, "echo c=32: calls/s", func(r *Report) { *r.Fig(scEcho32, tgMcptape).CallsPerSec = 5399 }, false, false},
		{"slower than the plain proxy", groupPlain, "echo c=1: added p50", func(r *Report) { *r.Fig(scEcho1, tgMcptape).AddedP50 = 391 }, false, false},
		{"first event over 1 ms", groupPlain, "SSE first event: added delay ≤ 1 ms", func(r *Report) { *r.Fig(scSSE, tgMcptape).FirstAdded = 1001 }, false, false},
		{"peak RSS", groupPlain, "peak RSS", func(r *Report) { *r.Fig(scHuge, tgMcptape).PeakRSS = 151 }, false, false},
		{"peak RSS against nginx", groupNginx, "peak RSS < 100 MB", func(r *Report) { *r.Fig(scHuge, tgMcptape).PeakRSS = 101 }, false, false},
		{"peak RSS within the plain proxy's bound", groupPlain, "peak RSS < 150 MB", func(r *Report) { *r.Fig(scHuge, tgMcptape).PeakRSS = 101 }, true, false},
		{"huge results under 0.9 nginx's", groupNginx, "huge results: calls/s", func(r *Report) { *r.Fig(scHuge, tgMcptape).CallsPerSec = 8.9 }, false, false},
		{"peak RSS not measured without the huge scenario", groupPlain, "peak RSS", func(r *Report) { r.Scenarios = r.Scenarios[:len(r.Scenarios)-2] }, false, true},
		{"a lost record", groupPlain, "nothing lost", func(r *Report) { r.Scenarios[0].Recorder.Match = false }, false, false},
		{"a failed call", groupPlain, "every call through mcptape", func(r *Report) { r.Fig(scEcho1, tgMcptape).Failed = 1 }, false, false},
		{"steady: CPU per call grew past 1.5×", groupPlain, "steady c=32: CPU per call", func(r *Report) { r.Fig(scSteady, tgMcptape).RoundCPU = []float64{150, 160, 140, 150, 240, 230} }, false, false},
		{"steady: CPU per call grew 1.5× exactly", groupPlain, "steady c=32: CPU per call", func(r *Report) { r.Fig(scSteady, tgMcptape).RoundCPU = []float64{150, 150, 140, 150, 230, 220} }, true, false},
		{"steady: two rounds", groupPlain, "steady c=32: CPU per call", func(r *Report) { r.Fig(scSteady, tgMcptape).RoundCPU = []float64{150, 400} }, false, true},
		{"steady not run", groupPlain, "steady: CPU per call", func(r *Report) {
			r.Scenarios = slices.DeleteFunc(r.Scenarios, func(s *ScenarioResult) bool { return s.ID == scSteady })
		}, false, true},
		{"replay slower than live", groupReplay, "replay server", func(r *Report) { *r.Fig(scReplay, tgReplay).CallsPerSec = 999 }, false, false},
		{"replay with a failed call", groupReplay, "replay server", func(r *Report) { r.Fig(scReplay, tgReplay).Failed = 1 }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fakeReport(tc.mod)
			v := verdictByName(t, r, tc.group, tc.verdict)
			if v.Pass != tc.pass || v.Skipped != tc.skipped {
				t.Errorf("%s: pass %v skipped %v, want pass %v skipped %v (%s)", v.Name, v.Pass, v.Skipped, tc.pass, tc.skipped, v.Detail)
			}
			if want := 0; !tc.pass && !tc.skipped {
				want = 1
				if r.failed() < want {
					t.Errorf("failed() = %d, want at least 1", r.failed())
				}
			}
		})
	}
	t.Run("the SSE verdict's rounds are the first event's", func(t *testing.T) {
		// Each round's first-event figures, not the calls' latency, which
		// the slow tool's run time dwarfs.
		r := fakeReport(func(r *Report) {
			m, n := r.Fig(scSSE, tgMcptape), r.Fig(scSSE, tgNginx)
			m.RoundAdded, n.RoundAdded = []float64{900, 900, 900}, []float64{100, 100, 100}
			m.RoundFirstAdded, n.RoundFirstAdded = []float64{110, 120, 130}, []float64{100, 100, 100}
		})
		v := verdictByName(t, r, groupNginx, "SSE first event: added ≤ 1.5")
		if !v.Pass || !strings.Contains(v.Detail, "round by round 1.10–1.30") {
			t.Errorf("pass %v, detail %q; want the first event's rounds (1.10–1.30)", v.Pass, v.Detail)
		}
	})
	t.Run("a verdict decided by a fraction of a microsecond", func(t *testing.T) {
		// 1.25 × +91.5 µs = +114.375 µs: +114.4 misses it, and reads so.
		r := fakeReport(func(r *Report) {
			*r.Fig(scEcho1, tgNginx).AddedP50 = 91.5
			*r.Fig(scEcho1, tgMcptape).AddedP50 = 114.4
		})
		v := verdictByName(t, r, groupNginx, "echo c=1: added p50")
		if v.Pass || !strings.HasPrefix(v.Detail, "mcptape +114.40 µs ≤ 1.25 × nginx's +92 µs = +114.38 µs") {
			t.Errorf("pass %v, detail %q; want a failure whose figures show why", v.Pass, v.Detail)
		}
		r = fakeReport(func(r *Report) { *r.Fig(scEcho1, tgMcptape).AddedP50 = 70 })
		if v := verdictByName(t, r, groupNginx, "echo c=1: added p50"); !strings.HasPrefix(v.Detail, "mcptape +70 µs ≤ 1.25 × nginx's +60 µs = +75 µs") {
			t.Errorf("detail %q: figures far apart keep their usual precision", v.Detail)
		}
	})
	t.Run("no nginx", func(t *testing.T) {
		r := fakeReport(func(r *Report) { r.Targets[2].Skipped = "not installed" })
		if v := verdictByName(t, r, groupNginx, "against nginx"); !v.Skipped {
			t.Errorf("nginx missing: %+v", v)
		}
	})
}

// TestBenchReportShowsFailures: a missed target is marked in the report
// that --check's exit code comes from.
func TestBenchReportShowsFailures(t *testing.T) {
	r := fakeReport(func(r *Report) { *r.Fig(scEcho32, tgMcptape).CallsPerSec = 100 })
	var b strings.Builder
	r.writeMarkdown(&b)
	out := b.String()
	for _, want := range []string{"**FAIL** echo c=32: calls/s ≥ 0.9 × nginx's", "### the replay server against the live server", "PASS replay server"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchReportShowsRoundSpread: a calls/s verdict says how the two
// targets compared round by round, so a verdict near its factor shows the
// noise behind it.
func TestBenchReportShowsRoundSpread(t *testing.T) {
	r := fakeReport(func(r *Report) {
		r.Fig(scBig, tgMcptape).RoundRates = []float64{90, 80, 99}
		r.Fig(scBig, tgNginx).RoundRates = []float64{100, 100, 90}
	})
	v := verdictByName(t, r, groupNginx, "big results: calls/s")
	if !strings.Contains(v.Detail, "round by round 0.80–1.10") {
		t.Errorf("the verdict says %q, want the rounds' ratios 0.80–1.10 in it", v.Detail)
	}
}

// TestBenchReportShowsRoundSpreadOfLatencyAndCPU: the added-latency and
// CPU verdicts show their rounds too; a round where either added latency
// was not above zero (noise around direct's) is left out, and the verdict
// says so, rather than showing a negative ratio.
func TestBenchReportShowsRoundSpreadOfLatencyAndCPU(t *testing.T) {
	r := fakeReport(func(r *Report) {
		r.Fig(scEcho1, tgMcptape).RoundAdded = []float64{60, 90, 70, -3}
		r.Fig(scEcho1, tgNginx).RoundAdded = []float64{60, -5, 50, 40}
		r.Fig(scEcho1, tgMcptape).RoundCPU = []float64{150, 160, 140, 150}
		r.Fig(scEcho1, tgNginx).RoundCPU = []float64{75, 80, 70, 75}
	})
	v := verdictByName(t, r, groupNginx, "echo c=1: added p50")
	for _, want := range []string{"round by round 1.00–1.40", "2 of 4 rounds left out, where a figure was not above zero"} {
		if !strings.Contains(v.Detail, want) {
			t.Errorf("the verdict says %q, want %q in it", v.Detail, want)
		}
	}
	v = verdictByName(t, r, groupNginx, "echo c=1: CPU per call")
	if !strings.Contains(v.Detail, "round by round 2.00–2.00") {
		t.Errorf("the verdict says %q, want the rounds' CPU ratios 2.00–2.00 in it", v.Detail)
	}
}
