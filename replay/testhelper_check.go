package replay

import (
	"context"
	"testing"
)

// AssertHealthy checks the recording in the tape file at path as `mcptape
// check --tape path` does, and fails t with a line per problem that makes
// it unhealthy (see CheckOptions; nil checks DefaultFailOn). It returns
// the report.
//
//	func TestClientRecording(t *testing.T) {
//		// … a run of the client under test, recorded and exported to a tape …
//		replay.AssertHealthy(t, "testdata/run.tape.json", nil)
//	}
func AssertHealthy(t testing.TB, path string, opts *CheckOptions) *CheckReport {
	t.Helper()
	rep, err := Check(context.Background(), opts, TapeRecording(path))
	if err != nil {
		t.Fatalf("checking %s: %v", path, err)
		return rep
	}
	for _, s := range rep.Sessions {
		for _, p := range s.Failures() {
			t.Errorf("%s: %s", s.where(p), p.Text)
		}
	}
	return rep
}

// AssertSameRecording compares the tape files a and b as `mcptape diff a
// b` does, and fails t with each difference: tools, prompts and
// resources added, removed or changed, answers that changed (as paths,
// with opts' ignore rules; nil compares as DiffOptions' defaults), and
// calls only one of them made. Latency is not compared. It returns the
// report.
func AssertSameRecording(t testing.TB, a, b string, opts *DiffOptions) *DiffReport {
	t.Helper()
	rep, err := Diff(context.Background(), TapeRecording(a), TapeRecording(b), opts)
	if err != nil {
		t.Fatalf("comparing %s and %s: %v", a, b, err)
		return rep
	}
	for _, c := range rep.Catalog {
		t.Errorf("%s -> %s: %s", a, b, c)
	}
	for _, u := range rep.Unlisted {
		t.Errorf("%s -> %s: %s", a, b, u)
	}
	for _, ch := range rep.Answers {
		for _, d := range ch.Diffs {
			t.Errorf("%s: %s: %s in %s, %s in %s", ch.Call, d.Path, d.Recorded, a, d.Live, b)
		}
	}
	for _, c := range rep.OnlyA {
		t.Errorf("%s: only in %s", c.Call, a)
	}
	for _, c := range rep.OnlyB {
		t.Errorf("%s: only in %s", c.Call, b)
	}
	return rep
}
