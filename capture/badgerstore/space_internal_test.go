package badgerstore

import "testing"

// BenchmarkFreeSpaceCheck is what the free-space floor adds to a write:
// one statfs of the store's directory, once per Write (a batch of up to
// a few thousand records).
func BenchmarkFreeSpaceCheck(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := freeBytes(dir); err != nil {
			b.Skip("no free-space measurement on this system:", err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/write")
}
