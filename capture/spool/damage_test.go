package spool_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/spool"
)

// frames lists the records of a spool: where each ends, and its message
// count.
func frames(t *testing.T, path string) (ends []int64, msgs []int) {
	t.Helper()
	for r, err := range spool.Read(path, 0) {
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, r.Offset)
		msgs = append(msgs, len(r.Batch.Messages))
	}
	return ends, msgs
}

// ingestWithLog runs one ingest pass of the store in dir, returning what
// the ingester logged.
func ingestWithLog(t *testing.T, o *owner, dir string) string {
	t.Helper()
	var log bytes.Buffer
	ing := spool.NewIngester(dir, o.rec, o.store, &spool.IngestOptions{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := ing.Once(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("an ingest pass did not end within 20s")
	}
	if err := o.rec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return log.String()
}

// A spool damaged in the middle (its wrap ended): the owner stores every
// readable record, before and after the damage, marks the session
// incomplete with the damaged record's messages counted as lost and a
// finding that says where, logs it, and keeps the spool in spool/damaged
// instead of deleting it.
func TestDamagedSpoolIsMarkedAndKept(t *testing.T) {
	dir := t.TempDir()
	path := wrapSide(t, dir, "srv", 60, true)
	ends, msgs := frames(t, path)
	if len(ends) < 5 {
		t.Fatalf("the spool has %d records, want several", len(ends))
	}
	k := len(ends) / 2
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[(ends[k-1]+ends[k])/2] ^= 0xff // inside record k's payload
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range msgs {
		total += n
	}
	o := openOwner(t, dir)
	defer o.close(t)
	log := ingestWithLog(t, o, dir)
	ss := onlySessions(t, o.store)
	if len(ss) != 1 {
		t.Fatalf("%d sessions, want 1", len(ss))
	}
	s := ss[0]
	stored := len(messagesOf(t, o.store, s.ID))
	if stored != total-msgs[k] {
		t.Errorf("%d messages stored, want every readable one: %d of %d (record %d of %d, %d messages, damaged)", stored, total-msgs[k], total, k, len(ends), msgs[k])
	}
	if s.Status != capture.StatusIncomplete || s.Lost != msgs[k] || !strings.Contains(s.LossReason, "could not be read") {
		t.Errorf("session: status %s, lost %d (%q); want incomplete with the damaged record's %d messages lost", s.Status, s.Lost, s.LossReason, msgs[k])
	}
	var finding bool
	for x, err := range o.store.Exchanges(context.Background(), s.ID) {
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range x.FindingList {
			finding = finding || strings.Contains(f.Message, "could not be read") && strings.Contains(f.Message, "damaged")
		}
	}
	if !finding {
		t.Error("no finding on the session's exchange says what could not be read")
	}
	if !strings.Contains(log, "could not be read") {
		t.Errorf("the ingester logged nothing about the damage:\n%s", log)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the damaged spool is still waiting in the spool folder")
	}
	if _, err := os.Stat(filepath.Join(dir, spool.Dir, "damaged", filepath.Base(path))); err != nil {
		t.Errorf("the damaged spool was not kept aside: %v", err)
	}
}

// A spool cut in the middle of its last record, whose wrap is gone without
// closing it (killed): the session is closed as incomplete, the cut
// record's messages (its header's count) are lost, and the spool is kept.
func TestCutSpoolOfAKilledWrap(t *testing.T) {
	dir := t.TempDir()
	path := wrapSide(t, dir, "srv", 40, true)
	ends, msgs := frames(t, path)
	// Drop the End record (the wrap was killed before writing it), then
	// cut the last record with messages in the middle.
	last := len(ends) - 2
	for msgs[last] == 0 {
		last--
	}
	if err := os.Truncate(path, (ends[last-1]+ends[last])/2); err != nil {
		t.Fatal(err)
	}
	o := openOwner(t, dir)
	defer o.close(t)
	ingestWithLog(t, o, dir)
	ss := onlySessions(t, o.store)
	if len(ss) != 1 {
		t.Fatalf("%d sessions, want 1", len(ss))
	}
	s := ss[0]
	if s.Status == capture.StatusOpen || s.Lost < msgs[last] {
		t.Errorf("session of a killed wrap with a cut spool: status %s, lost %d (%q); want it closed, %d lost", s.Status, s.Lost, s.LossReason, msgs[last])
	}
	if _, err := os.Stat(filepath.Join(dir, spool.Dir, "damaged", filepath.Base(path))); err != nil {
		t.Errorf("the cut spool was not kept aside: %v", err)
	}
}

// A spool whose wrap was killed between two records (nothing cut, but no
// End): its session does not stay open forever.
func TestSpoolOfAKilledWrapIsClosed(t *testing.T) {
	dir := t.TempDir()
	path := wrapSide(t, dir, "srv", 20, true)
	// Keep the records written while the session was open: a killed wrap
	// writes neither its end nor the End record.
	var cut int64
	for r, err := range spool.Read(path, 0) {
		if err != nil {
			t.Fatal(err)
		}
		closed := false
		for _, s := range r.Batch.Sessions {
			closed = closed || s.Status != capture.StatusOpen
		}
		if closed {
			break
		}
		cut = r.Offset
	}
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	o := openOwner(t, dir)
	defer o.close(t)
	ingestWithLog(t, o, dir)
	ss := onlySessions(t, o.store)
	if len(ss) != 1 || ss[0].Status == capture.StatusOpen {
		t.Fatalf("sessions %+v; want one, not open", ss)
	}
	if c := ss[0].Command; c == nil || c.Exit == "" {
		t.Errorf("the session of a killed wrap says nothing of how its server ended: %+v", c)
	}
}

// A sparse file whose frame claims 512 MiB (or a plausible 70 MiB with a
// wrong checksum) costs the reader no memory for it.
func TestHugeFrameCostsNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		claim uint32
	}{{"512 MiB", 512 << 20}, {"70 MiB", 70 << 20}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := wrapSide(t, dir, "srv", 3, false)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			// A frame header of the file's version that claims c.claim:
			// version 1 is length and checksum, version 2 a mark, length,
			// checksum and message count.
			hdr := []byte{byte(c.claim >> 24), byte(c.claim >> 16), byte(c.claim >> 8), byte(c.claim), 0, 0, 0, 0}
			first := make([]byte, 16)
			if _, err := f.ReadAt(first, 0); err != nil {
				t.Fatal(err)
			}
			if string(first) == "mcptape-spool 2\n" {
				hdr = append([]byte{0xf5, 'M', 'T', 0x02}, append(hdr, 0, 0, 0, 1)...)
			}
			if _, err := f.Write(hdr); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := os.Truncate(path, fi.Size()+int64(c.claim)+64); err != nil { // sparse
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			n := 0
			for _, err := range spool.Read(path, 0) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("read %d records; allocated %.1f MiB", n, float64(alloc)/(1<<20))
			if alloc > 16<<20 {
				t.Errorf("reading a spool whose frame claims %s allocated %.0f MiB", c.name, float64(alloc)/(1<<20))
			}
		})
	}
}

// A spool owned by another user is not ingested (nor deleted): only what
// this user's wraps wrote is.
func TestForeignSpoolIsNotIngested(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a file of another user's needs root")
	}
	dir := t.TempDir()
	path := wrapSide(t, dir, "intruder", 5, true)
	if err := os.Chown(path, 12345, 12345); err != nil {
		t.Skipf("chown: %v", err)
	}
	o := openOwner(t, dir)
	defer o.close(t)
	log := ingestWithLog(t, o, dir)
	if ss := onlySessions(t, o.store); len(ss) != 0 {
		t.Errorf("a spool of another user's was ingested: %d sessions", len(ss))
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the foreign spool was moved or deleted: %v", err)
	}
	if !strings.Contains(log, "another user") && !strings.Contains(log, "not read") {
		t.Errorf("the ingester did not say why it leaves the file alone:\n%s", log)
	}
}
