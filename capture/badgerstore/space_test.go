package badgerstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// sessionBatch is a closed session of n messages of raw bytes each,
// starting at start, with seqs from seq+1.
func sessionBatch(id string, start time.Time, seq uint64, n, raw int) *capture.Batch {
	b := &capture.Batch{Sessions: []*capture.Session{{ID: id, Era: protocol.EraModern, Start: start, End: start.Add(time.Second),
		Messages: n, Status: capture.StatusClosed}}}
	for i := range n {
		body := bytes.Repeat([]byte{'a' + byte(i%26)}, raw)
		b.Messages = append(b.Messages, &capture.Message{Seq: seq + uint64(i) + 1, SessionID: id, Direction: protocol.ClientToServer,
			Time: start.Add(time.Duration(i) * time.Millisecond), Kind: protocol.KindRequest, Method: "tools/call", Batch: -1,
			Raw: body, Size: len(body)})
	}
	return b
}

func countMessages(t *testing.T, s capture.Store, id string) int {
	t.Helper()
	n := 0
	for _, err := range s.Messages(context.Background(), id, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestWriteRefusesOneRecordNotItsBatch: a batch that holds one record
// Badger cannot take (an exchange whose headers make a 20 MiB value, more
// than a value-log file holds) beside 500 messages of another session is
// stored record by record: every other record is stored, and the error
// names only the one refused.
func TestWriteRefusesOneRecordNotItsBatch(t *testing.T) {
	ctx := context.Background()
	for _, inMemory := range []bool{false, true} {
		t.Run(fmt.Sprintf("inMemory=%v", inMemory), func(t *testing.T) {
			dir := ""
			if !inMemory {
				dir = t.TempDir()
			}
			s := open(t, dir, &badgerstore.Options{InMemory: inMemory})
			start := time.Now().Add(-time.Hour)
			b := sessionBatch("other", start, 0, 500, 200)
			huge := &capture.Exchange{ID: 1, SessionID: "huge", Method: "POST", URL: "/mcp", Start: start,
				RequestHeader: map[string][]string{"X-Big": {strings.Repeat("x", 20<<20)}}}
			b.Sessions = append(b.Sessions, &capture.Session{ID: "huge", Start: start})
			b.Exchanges = append(b.Exchanges, huge)
			err := s.Write(ctx, b)
			var pe *capture.PartialWriteError
			if !errors.As(err, &pe) {
				t.Fatalf("Write = %v, want a *capture.PartialWriteError", err)
			}
			if len(pe.Refused.Exchanges) != 1 || pe.Refused.Exchanges[0] != huge || len(pe.Refused.Messages) != 0 || len(pe.Refused.Sessions) != 0 {
				t.Errorf("refused %d sessions, %d exchanges, %d messages; want only the huge exchange",
					len(pe.Refused.Sessions), len(pe.Refused.Exchanges), len(pe.Refused.Messages))
			}
			if n := countMessages(t, s, "other"); n != 500 {
				t.Errorf("the other session has %d of its 500 messages", n)
			}
			if _, err := s.Session(ctx, "huge"); err != nil {
				t.Errorf("the huge exchange's session record: %v", err)
			}
			if _, err := s.Exchange(ctx, 1); !errors.Is(err, capture.ErrNotFound) {
				t.Errorf("Exchange(1) = %v, want not found", err)
			}
		})
	}
}

// TestMaxSize: a store bounded at 8 MiB that is written 20 finished
// sessions of about 600 KiB each (large raw bytes, in blob files) deletes
// the oldest, whole, and keeps the newest; a session still open and a
// session with recent traffic are never deleted, however old they start.
func TestMaxSize(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, &badgerstore.Options{MaxSize: 8 << 20})
	old := time.Now().Add(-24 * time.Hour)
	keepOpen := sessionBatch("000-open", old.Add(-time.Hour), 10000, 2, 300<<10)
	keepOpen.Sessions[0].Status = capture.StatusOpen
	recent := sessionBatch("000-recent", old.Add(-time.Hour), 20000, 2, 300<<10)
	recent.Sessions[0].End = time.Now()
	for _, b := range []*capture.Batch{keepOpen, recent} {
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("s%02d", i)
		ids = append(ids, id)
		if err := s.Write(ctx, sessionBatch(id, old.Add(time.Duration(i)*time.Minute), uint64(i*10), 2, 300<<10)); err != nil {
			t.Fatalf("write %s: %v", id, err)
		}
		// Let retention keep up, as it does between calls.
		fixtures.Eventually(t, 10*time.Second, func() error {
			if sp := s.Space(); sp.Paused {
				return fmt.Errorf("writes still paused after %s: %+v", id, sp)
			}
			return nil
		})
	}
	// Retention is done after a round that began after the last write.
	badgerstore.RetainRound(s)
	left := map[string]bool{}
	for x, err := range s.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		left[x.ID] = true
		if n := countMessages(t, s, x.ID); n != 2 {
			t.Errorf("session %s kept %d of its 2 messages: retention deletes sessions whole", x.ID, n)
		}
	}
	if !left["000-open"] || !left["000-recent"] {
		t.Errorf("retention deleted the open or the recently active session: left %v", left)
	}
	if !left[ids[19]] || !left[ids[18]] {
		t.Errorf("the newest sessions were deleted: left %v", left)
	}
	// Oldest first: the deleted sessions are the oldest ones, in a run.
	deleted := 0
	for deleted < len(ids) && !left[ids[deleted]] {
		deleted++
	}
	for _, id := range ids[deleted:] {
		if !left[id] {
			t.Errorf("%s was deleted while older sessions were kept (left %v): retention goes oldest first", id, left)
		}
	}
	sp := s.Space()
	if deleted == 0 || sp.Deleted != int64(deleted) {
		t.Errorf("%d sessions deleted, Space().Deleted = %d", deleted, sp.Deleted)
	}
	size, _ := s.Size()
	if size > 8<<20 {
		t.Errorf("the store takes %d bytes on disk, over its 8 MiB bound", size)
	}
	t.Logf("%d of 20 sessions deleted; the store takes %.1f MiB of its 8 MiB bound", deleted, float64(size)/(1<<20))
}

// snapshot lists every file under dir with its size and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files[p] = fmt.Sprintf("%d %s %v", fi.Size(), fi.ModTime().Format(time.RFC3339Nano), fi.Mode())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestReadOnly: a store opened read-only reads what was stored, refuses
// every write, and leaves every file of the directory as it was.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, sessionBatch("a", time.Now(), 0, 50, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	time.Sleep(20 * time.Millisecond) // past the file system clock's tick (a few ms), so that a write would show in the times
	ro := open(t, dir, &badgerstore.Options{ReadOnly: true})
	if n := countMessages(t, ro, "a"); n != 50 {
		t.Errorf("read %d of 50 messages", n)
	}
	if err := ro.Write(ctx, sessionBatch("b", time.Now(), 100, 1, 10)); !errors.Is(err, badgerstore.ErrReadOnly) {
		t.Errorf("Write = %v, want ErrReadOnly", err)
	}
	if err := ro.DeleteSession(ctx, "a"); !errors.Is(err, badgerstore.ErrReadOnly) {
		t.Errorf("DeleteSession = %v, want ErrReadOnly", err)
	}
	if err := ro.SetLabels(ctx, "a", []string{"x"}); !errors.Is(err, badgerstore.ErrReadOnly) {
		t.Errorf("SetLabels = %v, want ErrReadOnly", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, dir)
	for p, v := range after {
		if before[p] != v {
			t.Errorf("%s changed: %q, was %q", p, v, before[p])
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s is gone", p)
		}
	}
}
