package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// TestImportUndoneWhenTheDiskFills: an import whose second session no
// longer fits on a real disk (a small tmpfs, filled to just above the
// store's free-space floor) is undone: the session written before is
// removed again, and the error says nothing was imported.
func TestImportUndoneWhenTheDiskFills(t *testing.T) {
	disk := tmpfs(t, "96m")
	dir := filepath.Join(disk, "store")
	const floor = 32 << 20
	st, err := badgerstore.Open(dir, &badgerstore.Options{MinFree: floor})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Three sessions of 3 MiB each (raw bytes large enough for blob files,
	// written as they come), with room left for one.
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	tape := &replay.Tape{Created: start}
	seq := uint64(0)
	for i := range 3 {
		id := fmt.Sprintf("big-%d", i)
		ts := &replay.TapeSession{Session: &capture.Session{ID: id, Start: start.Add(time.Duration(i) * time.Minute), Messages: 3, Status: capture.StatusClosed}}
		for range 3 {
			seq++
			pad := make([]byte, 768<<10)
			_, _ = rand.Read(pad)
			raw := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"text":%q}}`, seq, base64.StdEncoding.EncodeToString(pad)))
			ts.Messages = append(ts.Messages, &capture.Message{Seq: seq, SessionID: id, Direction: protocol.ServerToClient,
				Time: start, Kind: protocol.KindResult, Batch: -1, Raw: raw, Size: len(raw)})
		}
		tape.Sessions = append(tape.Sessions, ts)
	}
	fill(t, disk, "ballast", floor+5<<20)
	ids, err := replay.Import(context.Background(), st, tape, nil)
	if err == nil || !errors.Is(err, capture.ErrStoreFull) || !strings.Contains(err.Error(), "nothing was imported") || ids != nil {
		t.Fatalf("an import that fills the disk: ids %v, error %v; want none, and an error saying the disk is full and nothing was imported", ids, err)
	}
	var left []string
	for s, err := range st.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, s.ID)
	}
	if len(left) != 0 {
		t.Errorf("the failed import left sessions %v in the store", left)
	}
}
