package badgerstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// A BulkLoad store lets go of its mapped table pages, and every record
// still reads back as written.
func TestBulkLoadLetsGoOfMappedTables(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, &Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.unmapper.stop() // releaseMapped is called by hand here
	s.unmapper = nil
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	text := strings.Repeat("mcptape bulk load test text, ", 150)
	seq := uint64(0)
	for batch := range 40 {
		b := &capture.Batch{Sessions: []*capture.Session{{ID: fmt.Sprint("s", batch), Start: t0}}}
		for range 200 {
			seq++
			raw := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"text":%q}}`, seq, text)
			b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: fmt.Sprint("s", batch), Time: t0,
				Kind: protocol.KindResult, Batch: -1, Raw: raw, Size: len(raw)})
		}
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flatten(1); err != nil { // tables written and mapped
		t.Fatal(err)
	}
	before := mappedTableKB(t, dir)
	releaseMapped(dir)
	after := mappedTableKB(t, dir)
	t.Logf("resident pages of mapped tables: %d kB before, %d kB after", before, after)
	if before < 1024 || after > before/4 {
		t.Errorf("mapped tables resident: %d kB before releaseMapped, %d kB after; want most of it let go of", before, after)
	}
	n := 0
	for batch := range 40 {
		for m, err := range s.Messages(ctx, fmt.Sprint("s", batch), capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"text":%q}}`, m.Seq, text); string(m.Raw) != want {
				t.Fatalf("message %d reads %.80q", m.Seq, m.Raw)
			}
			n++
		}
	}
	if n != int(seq) {
		t.Errorf("%d messages read back, %d written", n, seq)
	}
}

// mappedTableKB is the resident size of this process's mappings of dir's
// table files.
func mappedTableKB(t *testing.T, dir string) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	kb, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) >= 5 && strings.Contains(fields[0], "-") {
			in = len(fields) >= 6 && strings.HasPrefix(fields[5], dir) && strings.HasSuffix(fields[5], ".sst")
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			kb += n
		}
	}
	return kb
}

// A store for recording lets go of its mapped table pages too, on its own
// (every unmapRecordingEvery), and its records still read back: a recorder
// that has run for a while no longer carries its tables in its resident
// memory (before: tens of MB after a bench run, a third of its RSS).
func TestRecordingStoreLetsGoOfMappedTables(t *testing.T) {
	defer func(d time.Duration) { unmapRecordingEvery = d }(unmapRecordingEvery)
	unmapRecordingEvery = 50 * time.Millisecond
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.unmapper == nil {
		t.Fatal("a store for recording on disk has no unmapper")
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	text := strings.Repeat("mcptape recording store test text, ", 120)
	seq := uint64(0)
	for batch := range 30 {
		b := &capture.Batch{Sessions: []*capture.Session{{ID: fmt.Sprint("s", batch), Start: t0}}}
		for range 200 {
			seq++
			raw := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"text":%q}}`, seq, text)
			b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: fmt.Sprint("s", batch), Time: t0,
				Kind: protocol.KindResult, Batch: -1, Raw: raw, Size: len(raw)})
		}
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Stop it while the tables are written and read whole, then let it run.
	s.unmapper.stop()
	if err := s.db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	n := 0
	for batch := range 30 {
		for m, err := range s.Messages(ctx, fmt.Sprint("s", batch), capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"text":%q}}`, m.Seq, text); string(m.Raw) != want {
				t.Fatalf("message %d reads %.80q", m.Seq, m.Raw)
			}
			n++
		}
	}
	if n != int(seq) {
		t.Fatalf("%d messages read back, %d written", n, seq)
	}
	before := mappedTableKB(t, dir)
	if before < 1024 {
		t.Fatalf("mapped tables resident: %d kB after writing and reading them; the test needs them mapped", before)
	}
	s.unmapper = startUnmapper(dir, unmapRecordingEvery)
	deadline := time.Now().Add(10 * time.Second)
	after := before
	for time.Now().Before(deadline) {
		if after = mappedTableKB(t, dir); after <= before/4 {
			break
		}
		time.Sleep(20 * time.Millisecond) // (the unmapper's own period, on the real clock)
	}
	t.Logf("resident pages of mapped tables: %d kB before, %d kB after", before, after)
	if after > before/4 {
		t.Errorf("mapped tables resident: %d kB, then %d kB with the store's unmapper running; want most of it let go of", before, after)
	}
}
