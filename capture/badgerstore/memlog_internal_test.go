package badgerstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// memLogOf writes n batches of one session each into a new store and
// returns the bytes of its memtable log, read while the store is open (as
// a crash leaves it).
func memLogOf(t *testing.T, n int) []byte {
	t.Helper()
	dir := t.TempDir()
	st, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("s-%d", i)
		raw := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":%d}}`, i))
		b := &capture.Batch{Sessions: []*capture.Session{{ID: id, Era: protocol.EraModern, Start: start, End: start, Messages: 1, Status: capture.StatusClosed}},
			Messages: []*capture.Message{{Seq: uint64(i + 1), SessionID: id, Direction: protocol.ClientToServer, Time: start,
				Kind: protocol.KindRequest, Method: "ping", ID: []byte("1"), Batch: -1, Raw: raw, Size: len(raw)}}}
		if err := st.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	if len(names) != 1 {
		t.Fatalf("%d memtable logs, want 1", len(names))
	}
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replayInto replays log into a new managed store and returns how many
// records it wrote and why it stopped.
func replayInto(t *testing.T, log []byte) (int, string) {
	t.Helper()
	bopts, _ := (&Options{}).badgerOptions(t.TempDir())
	db, err := badger.OpenManaged(bopts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wb := db.NewManagedWriteBatch()
	n, why := replayMemLog(log, wb)
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	return n, why
}

// TestReplayMemLogStopsAtDamage: a memtable log read whole gives every
// record of every transaction and says nothing; one damaged in its middle
// gives the transactions before the damage, none after, and says where
// it stopped.
func TestReplayMemLogStopsAtDamage(t *testing.T) {
	log := memLogOf(t, 10)
	all, why := replayInto(t, log)
	if all == 0 || why != "" {
		t.Fatalf("the whole log: %d records, %q; want records and no complaint", all, why)
	}
	// The end of the written part: the log is zeroed past it.
	end := len(log)
	for end > logHeaderSize && log[end-1] == 0 {
		end--
	}
	damaged := append([]byte(nil), log...)
	damaged[logHeaderSize+(end-logHeaderSize)/2] ^= 0xff
	some, why := replayInto(t, damaged)
	if some == 0 || some >= all || !strings.Contains(why, "does not read") {
		t.Errorf("a log damaged in its middle: %d of %d records, %q; want some but not all, and where it stopped", some, all, why)
	}
}
