package bench

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestRunInterleavedTakesTurnsInBursts checks the order a single caller's
// round makes its calls in: burst calls to each target, in turn, over and
// over, with exactly the calls asked for each, and a failing target's
// calls counted as failed without stopping the others.
func TestRunInterleavedTakesTurnsInBursts(t *testing.T) {
	ws := []*worker{{t: &target{name: "a"}}, {t: &target{name: "b"}}, {t: &target{name: "c"}}}
	var order []string
	sc := &scenarioSpec{conc: 1, call: func(w *worker, _ context.Context) (sample, error) {
		order = append(order, w.t.name)
		if w.t.name == "c" {
			return sample{}, &callError{kind: "rpc", msg: "boom"}
		}
		return sample{lat: time.Duration(len(order)) * time.Microsecond}, nil
	}}
	out := runInterleaved(context.Background(), ws, sc, 2, 5, 0)
	want := []string{"a", "a", "b", "b", "c", "c", "a", "a", "b", "b", "c", "c", "a", "b", "c"}
	if !slices.Equal(order, want) {
		t.Fatalf("calls made in the order %v, want %v", order, want)
	}
	for i, b := range out[:2] {
		if b.calls != 5 || len(b.lats) != 5 || b.failed != 0 {
			t.Errorf("target %d: %d calls, %d latencies, %d failed; want 5, 5, 0", i, b.calls, len(b.lats), b.failed)
		}
		if b.elapsed <= 0 {
			t.Errorf("target %d: no time spent in its calls", i)
		}
	}
	if c := out[2]; c.calls != 0 || c.failed != 5 || c.errs["rpc"] != 5 {
		t.Errorf("the failing target: %d calls, %d failed (%v); want 0 and 5", c.calls, c.failed, c.errs)
	}

	// For a duration instead: every target gets its turns until it is over.
	order = order[:0]
	out = runInterleaved(context.Background(), ws[:2], sc, 1, 0, 20*time.Millisecond)
	if out[0].calls == 0 || out[1].calls < out[0].calls-1 || out[1].calls > out[0].calls {
		t.Errorf("over a duration: %d and %d calls, want the same or one fewer for the second", out[0].calls, out[1].calls)
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Fatalf("with bursts of one call, %s was called twice in a row: %v", order[i], order[:i+1])
		}
	}

	// A cancelled run stops at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out = runInterleaved(ctx, ws, sc, 4, 100, 0)
	if out[0].calls+out[1].calls+out[2].calls+out[2].failed != 0 {
		t.Errorf("a cancelled run made calls")
	}
}

// TestRoundOrderTradesTheComparedBuilds checks that, taking turns in
// bursts, mcptape and versus each follow the other in half the rounds (the
// one after meets the one before's leftover recording), and that nothing
// else changes: the same rotation otherwise, and no swap in rounds of one
// batch per target.
func TestRoundOrderTradesTheComparedBuilds(t *testing.T) {
	live := []*target{{name: tgDirect}, {name: tgNginx}, {name: tgMcptape}, {name: tgVersus}}
	names := func(ts []*target) []string {
		var s []string
		for _, x := range ts {
			s = append(s, x.name)
		}
		return s
	}
	after := map[string]map[string]int{} // target → the one after it (cyclically) → rounds
	for r := range 4 {
		order := names(roundOrder(live, r, true))
		if len(order) != len(live) {
			t.Fatalf("round %d: order %v", r, order)
		}
		for k, n := range order {
			next := order[(k+1)%len(order)]
			if after[n] == nil {
				after[n] = map[string]int{}
			}
			after[n][next]++
		}
		if plain := names(roundOrder(live, r, false)); plain[0] != live[r%4].name || plain[1] != live[(r+1)%4].name {
			t.Errorf("round %d unpaired: %v, want live rotated by %d", r, plain, r)
		}
	}
	if after[tgMcptape][tgVersus] != 2 || after[tgVersus][tgMcptape] != 2 {
		t.Errorf("over 4 rounds mcptape was followed by versus %d times and versus by mcptape %d; want 2 and 2 (%v)",
			after[tgMcptape][tgVersus], after[tgVersus][tgMcptape], after)
	}
	if after[tgDirect][tgNginx] != 4 {
		t.Errorf("nginx followed direct in %d of 4 rounds, want all (%v)", after[tgDirect][tgNginx], after)
	}
	// Without versus, the rotation alone.
	three := live[:3]
	for r := range 3 {
		if got := names(roundOrder(three, r, true)); got[0] != three[r].name {
			t.Errorf("round %d without versus: %v, want live rotated by %d", r, got, r)
		}
	}
}
