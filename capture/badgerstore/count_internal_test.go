package badgerstore

import (
	"context"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
)

// A store written before the session count was kept counts its records
// once when asked, keeps the count from then on, and a reopen finds it;
// while the count is not known, a write that adds a session leaves no
// count behind that would be wrong.
func TestSessionCountOfAnOlderStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	session := func(id string) *capture.Session { return &capture.Session{ID: id, Start: time.Unix(1, 0)} }
	if err := s.Write(ctx, &capture.Batch{Sessions: []*capture.Session{session("a"), session("b")}}); err != nil {
		t.Fatal(err)
	}
	// As a store of an older mcptape: no count.
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(keySessions)) }); err != nil {
		t.Fatal(err)
	}
	s.sessions.set(0, false)
	if err := s.Write(ctx, &capture.Batch{Sessions: []*capture.Session{session("c")}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountSessions(ctx); err != nil || n != 3 {
		t.Fatalf("CountSessions = %d, %v; want 3", n, err)
	}
	if err := s.Write(ctx, &capture.Batch{Sessions: []*capture.Session{session("d")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, known := s.sessions.get(); !known || n != 4 {
		t.Errorf("after a reopen the count is %d (known %v), want 4 kept", n, known)
	}
}
