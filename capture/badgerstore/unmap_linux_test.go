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
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// A BulkLoad store lets go of its mapped table pages, and every record
// still reads back as written.
func TestBulkLoadLetsGoOfMappedTables(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.unmapper.stop() // releaseMapped is called by hand here
	s.unmapper = nil
	text := strings.Repeat("mcptape bulk load test text, ", 150)
	writeTextBatches(t, s, 40, text)
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
	readBackText(t, s, 40, text)
}

// writeTextBatches writes batches of 200 results carrying text, one
// session ("s0", "s1", ...) a batch.
func writeTextBatches(t *testing.T, s *Store, batches int, text string) {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for batch := range batches {
		b := &capture.Batch{Sessions: []*capture.Session{{ID: fmt.Sprint("s", batch), Start: t0}}}
		for range 200 {
			seq++
			raw := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"text":%q}}`, seq, text)
			b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: fmt.Sprint("s", batch), Time: t0,
				Kind: protocol.KindResult, Batch: -1, Raw: raw, Size: len(raw)})
		}
		if err := s.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
}

// readBackText checks that every message writeTextBatches wrote reads
// back as written.
func readBackText(t *testing.T, s *Store, batches int, text string) {
	t.Helper()
	n := 0
	for batch := range batches {
		for m, err := range s.Messages(context.Background(), fmt.Sprint("s", batch), capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"text":%q}}`, m.Seq, text); string(m.Raw) != want {
				t.Fatalf("message %d reads %.80q", m.Seq, m.Raw)
			}
			n++
		}
	}
	if n != batches*200 {
		t.Errorf("%d messages read back, %d written", n, batches*200)
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
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.unmapper == nil {
		t.Fatal("a store for recording on disk has no unmapper")
	}
	text := strings.Repeat("mcptape recording store test text, ", 120)
	writeTextBatches(t, s, 30, text)
	// Stop it while the tables are written and read whole, then let it run.
	s.unmapper.stop()
	if err := s.db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	readBackText(t, s, 30, text)
	before := mappedTableKB(t, dir)
	if before < 1024 {
		t.Fatalf("mapped tables resident: %d kB after writing and reading them; the test needs them mapped", before)
	}
	s.unmapper = startUnmapper(dir, false)
	fixtures.Eventually(t, 10*time.Second, func() error {
		if after := mappedTableKB(t, dir); after > before/4 {
			return fmt.Errorf("mapped tables resident: %d kB, then %d kB with the store's unmapper running; want most of it let go of", before, after)
		}
		return nil
	})
}
