package storetest

import (
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// testCountSessions: a SessionCounter counts the sessions Sessions yields,
// through new sessions, rewritten ones, deletes and (persistent backends)
// a reopen.
func testCountSessions(t *testing.T, s capture.Store, reopen func(*testing.T, capture.Store) capture.Store) {
	ctx := t.Context()
	count := func(s capture.Store, want int) {
		t.Helper()
		n, err := s.(capture.SessionCounter).CountSessions(ctx)
		if err != nil {
			t.Fatalf("CountSessions: %v", err)
		}
		if listed := len(collect(t, s.Sessions(ctx, capture.SessionQuery{}))); n != want || listed != want {
			t.Errorf("CountSessions = %d, Sessions lists %d; want %d", n, listed, want)
		}
	}
	count(s, 0)
	write(t, s, &capture.Batch{Sessions: []*capture.Session{fullSession("s1", at(0)), fullSession("s2", at(time.Minute)), fullSession("s1", at(0))}})
	count(s, 2)
	// A rewritten session (a later Start moves it in the time index) is
	// still one.
	write(t, s, &capture.Batch{Sessions: []*capture.Session{fullSession("s2", at(2*time.Minute)), fullSession("s3", at(3*time.Minute)), fullSession("s4", at(4*time.Minute))}})
	count(s, 4)
	if err := s.DeleteSession(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
	count(s, 3)
	if reopen == nil {
		return
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	count(s, 3)
	write(t, s, &capture.Batch{Sessions: []*capture.Session{fullSession("s5", at(5*time.Minute))}})
	count(s, 4)
}
