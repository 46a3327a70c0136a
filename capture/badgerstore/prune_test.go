package badgerstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
)

// tenDays writes 1,000 finished sessions spread evenly over the ten days
// before now, each with messages of random (incompressible) bytes, every
// twentieth with a result large enough for a blob; it returns their ids,
// oldest first.
func tenDays(t *testing.T, s *badgerstore.Store, now time.Time) []string {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []string
	var seq uint64
	for i := range 1000 {
		id := fmt.Sprintf("s%04d", i)
		start := now.Add(-10 * 24 * time.Hour).Add(time.Duration(i) * 864 * time.Second)
		size := 1500
		if i%20 == 0 {
			size = 300 << 10
		}
		b := sessionBatch(id, start, seq, 4, size)
		for _, m := range b.Messages {
			for j := range m.Raw {
				m.Raw[j] = byte('a' + rng.IntN(26))
			}
		}
		seq += 4
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestPruneOlderThan: a store with 1,000 sessions over ten days, pruned
// to the newest three with the store stopped (closed, opened again, as
// `mcptape prune` finds it), keeps exactly the sessions whose traffic is
// younger than three days, whole, and takes less than 40% of the disk space
// it took. A dry run before lists the same sessions and deletes nothing.
// A session still open, and one with traffic a minute ago, are kept
// whatever their age.
func TestPruneOlderThan(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Now()
	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := tenDays(t, s, now)
	old := now.Add(-9 * 24 * time.Hour)
	stillOpen := sessionBatch("open-old", old, 100000, 2, 100)
	stillOpen.Sessions[0].Status = capture.StatusOpen
	active := sessionBatch("active-old", old, 100010, 2, 100)
	active.Sessions[0].End = now.Add(-time.Minute)
	for _, b := range []*capture.Batch{stillOpen, active} {
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, nil)

	o := capture.PruneOptions{OlderThan: 72 * time.Hour, Now: now}
	cutoff := now.Add(-o.OlderThan)
	want := map[string]bool{}
	for i, id := range ids {
		end := now.Add(-10 * 24 * time.Hour).Add(time.Duration(i)*864*time.Second + time.Second)
		if end.Before(cutoff) {
			want[id] = true
		}
	}

	dry := o
	dry.DryRun = true
	rep, err := s.Prune(ctx, dry)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) != len(want) || rep.Kept != 1 {
		t.Errorf("dry run: %d to delete, %d kept; want %d and 1 (the open session)", len(rep.Deleted), rep.Kept, len(want))
	}
	if n := countSessions(t, s); n != 1002 {
		t.Errorf("a dry run deleted sessions: %d of 1002 left", n)
	}

	rep, err = s.Prune(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Deleted {
		if !want[p.ID] || p.Why != "age" {
			t.Errorf("pruned %s (%s), which is not older than three days", p.ID, p.Why)
		}
		delete(want, p.ID)
	}
	if len(want) > 0 {
		t.Errorf("%d sessions older than three days were kept", len(want))
	}
	left := map[string]bool{}
	for x, err := range s.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		left[x.ID] = true
		if x.End.Before(cutoff) && x.ID != "open-old" && x.ID != "active-old" {
			t.Errorf("session %s, last traffic %v, survived", x.ID, x.End)
		}
		if n := countMessages(t, s, x.ID); n != 4 && n != 2 {
			t.Errorf("session %s kept %d messages", x.ID, n)
		}
	}
	if !left["open-old"] || !left["active-old"] {
		t.Errorf("the open or the active session was pruned")
	}
	if rep.SizeAfter >= rep.SizeBefore*4/10 {
		t.Errorf("the store took %d bytes before pruning 70%% of its sessions and %d after: not 60%% of it given back", rep.SizeBefore, rep.SizeAfter)
	}
	t.Logf("pruned %d of 1002 sessions: %.1f MiB -> %.1f MiB on disk", len(rep.Deleted), float64(rep.SizeBefore)/(1<<20), float64(rep.SizeAfter)/(1<<20))
}

// TestPruneMaxSize: pruning to a size deletes the oldest finished sessions
// until the estimate is under it, and the store then is.
func TestPruneMaxSize(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Now()
	s := open(t, dir, nil)
	ids := tenDays(t, s, now)
	size, err := s.Size()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Prune(ctx, capture.PruneOptions{MaxSize: size / 2, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) == 0 {
		t.Fatal("nothing pruned")
	}
	for i, p := range rep.Deleted {
		if p.ID != ids[i] || p.Why != "size" {
			t.Fatalf("pruned #%d: %s (%s), want %s: oldest first", i, p.ID, p.Why, ids[i])
		}
	}
	if rep.SizeAfter > size/2+size/10 {
		t.Errorf("%d bytes left after pruning to %d", rep.SizeAfter, size/2)
	}
	t.Logf("pruned %d sessions: %.1f MiB -> %.1f MiB (bound %.1f MiB)", len(rep.Deleted), float64(rep.SizeBefore)/(1<<20), float64(rep.SizeAfter)/(1<<20), float64(size/2)/(1<<20))
}

// TestMaxAge: a store opened with MaxAge deletes the sessions older than
// it by itself, and keeps the others.
func TestMaxAge(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, age := range []time.Duration{72 * time.Hour, 50 * time.Hour, 47 * time.Hour, time.Hour} {
		if err := s.Write(ctx, sessionBatch(fmt.Sprintf("age%d", i), now.Add(-age), uint64(i*10), 2, 100)); err != nil {
			t.Fatal(err)
		}
	}
	// Retention runs a round as the store opens, then every 30 seconds.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, &badgerstore.Options{MaxAge: 48 * time.Hour})
	fixtures.Eventually(t, 10*time.Second, func() error {
		if n, d := countSessions(t, s), s.Space().Deleted; n != 2 || d != 2 {
			return fmt.Errorf("the round as the store opened left %d sessions and deleted %d, want 2 and 2", n, d)
		}
		return nil
	})
	for _, id := range []string{"age0", "age1"} {
		if _, err := s.Session(ctx, id); err == nil {
			t.Errorf("%s, older than --max-age, was kept", id)
		}
	}
	for _, id := range []string{"age2", "age3"} {
		if _, err := s.Session(ctx, id); err != nil {
			t.Errorf("%s, younger than --max-age: %v", id, err)
		}
	}
	if d := s.Space().Deleted; d != 2 {
		t.Errorf("Space().Deleted = %d, want 2", d)
	}
}

func countSessions(t *testing.T, s capture.Reader) int {
	t.Helper()
	n := 0
	for _, err := range s.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}
