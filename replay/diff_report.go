package replay

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the comparison for people: the catalog changes (each
// field as a path with both values), the calls whose answers changed
// (each difference as a path with both values), the calls only one
// recording made, the latency per method, and a verdict.
func (r *DiffReport) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("A: %s\nB: %s\n", oneLine(r.A), oneLine(r.B))
	if len(r.Catalog)+len(r.Unlisted) > 0 {
		ew.printf("\ntools, prompts and resources:\n")
		for _, c := range r.Catalog {
			switch c.Change {
			case "added", "removed":
				ew.printf("  %s %q: %s in B\n", c.Kind, oneLine(c.Name), c.Change)
			default:
				ew.printf("  %s %q: %s\n      A: %s\n      B: %s\n", c.Kind, oneLine(c.Name), oneLine(c.Path), clip(oneLine(c.Old), 300), clip(oneLine(c.New), 300))
			}
		}
		for _, u := range r.Unlisted {
			ew.printf("  %s (not compared)\n", u)
		}
	}
	if len(r.Answers) > 0 {
		ew.printf("\nanswers that changed:\n")
		for _, a := range r.Answers {
			ew.printf("  %s (A: session %s #%d, B: session %s #%d)\n", oneLine(a.Call), oneLine(a.A.Session), a.A.Seq, oneLine(a.B.Session), a.B.Seq)
			for _, d := range a.Diffs {
				ew.printf("    %s\n      A: %s\n      B: %s\n", oneLine(d.Path), clip(oneLine(d.Recorded), 300), clip(oneLine(d.Live), 300))
			}
		}
	}
	for _, only := range []struct {
		side  string
		calls []CallRef
	}{{"A", r.OnlyA}, {"B", r.OnlyB}} {
		if len(only.calls) == 0 {
			continue
		}
		ew.printf("\ncalls only in %s:\n", only.side)
		for _, c := range only.calls {
			ew.printf("  %s (session %s #%d)\n", oneLine(c.Call), oneLine(c.Session), c.Seq)
		}
	}
	if len(r.Latency) > 0 && ew.err == nil {
		ew.printf("\nlatency per method (p50 / p95, answered calls):\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  METHOD\tA\tB")
		for _, l := range r.Latency {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", oneLine(l.Method), latencyText(l.A), latencyText(l.B))
		}
		ew.err = tw.Flush()
	}
	if r.Differ() {
		ew.printf("\nDIFFER: %d catalog change(s), %d answer(s) changed, %d call(s) only in A, %d only in B (%d call(s) compared)\n",
			len(r.Catalog)+len(r.Unlisted), len(r.Answers), len(r.OnlyA), len(r.OnlyB), r.Compared)
	} else {
		ew.printf("\nSAME: the tools, prompts, resources and the answers to %d call(s) agree\n", r.Compared)
	}
	return ew.err
}

func latencyText(s LatencyStats) string {
	if s.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s (%d)", roundLatency(s.P50), roundLatency(s.P95), s.Count)
}

func roundLatency(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return strings.TrimSpace(d.Round(time.Microsecond).String())
}
