package badgerstore

import "testing"

// BenchmarkFreeSpaceCheck is what the free-space floor adds to a write
// that measures: one statfs of the store's directory (once a second far
// from the floor, once per Write near it).
func BenchmarkFreeSpaceCheck(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := freeBytes(dir); err != nil {
			b.Skip("no free-space measurement on this system:", err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/write")
}

// TestFreeSpaceMeasuredOncePerSecondFarFromTheFloor: far from the floor,
// one measurement stands for a second of writes, which count against it;
// near the floor every write measures, so the floor holds exactly; and a
// disk that fell under the floor pauses recording at the next measurement.
func TestFreeSpaceMeasuredOncePerSecondFarFromTheFloor(t *testing.T) {
	var stats int
	free := int64(10 << 30)
	old := statFree
	statFree = func(string) (int64, error) { stats++; return free, nil }
	defer func() { statFree = old }()
	g := &space{s: &Store{dir: t.TempDir()}, floor: 256 << 20, resume: 300 << 20, free: -1}

	for range 100 {
		if a, err := g.admit(1 << 20); a != admitAll || err != nil {
			t.Fatalf("10 GiB free: admit = %v, %v", a, err)
		}
	}
	if stats != 1 {
		t.Errorf("100 writes far from the floor measured the disk %d times, want once", stats)
	}
	if want := int64(10<<30 - 100<<20); g.free != want {
		t.Errorf("free after 100 writes of 1 MiB: %d, want the measurement less them, %d", g.free, want)
	}

	// A second later the disk is measured again: now near the floor.
	g.statAt = g.statAt.Add(-statEvery)
	free = 300 << 20
	if a, _ := g.admit(1 << 20); a != admitAll || stats != 2 {
		t.Fatalf("a second later: admit = %v after %d measurements, want admitAll after 2", a, stats)
	}
	for range 10 {
		g.admit(1 << 20)
	}
	if stats != 12 {
		t.Errorf("10 writes within the margin of the floor measured the disk %d times in all, want 12", stats)
	}
	free = 200 << 20
	if a, err := g.admit(1 << 20); a == admitAll || err == nil {
		t.Errorf("under the floor: admit = %v, %v, want a refusal", a, err)
	}
}
