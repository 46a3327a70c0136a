package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// damagedStore writes 30 closed sessions of 200 messages each, and one
// whose single message is large enough for a blob file, closes the store,
// then really overwrites bytes: 512 in the middle of the data blocks of
// its largest table file, and 64 in the blob file.
func damagedStore(t *testing.T) (dir string, ids []string, blobSession string) {
	t.Helper()
	dir = t.TempDir()
	ids, blobSession = soundStore(t, dir)
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table files after closing the store")
	}
	slices.SortFunc(tables, func(a, b string) int { return int(fileSize(t, b) - fileSize(t, a)) })
	// Two places: the message index records sort first, their raw bytes
	// after them.
	overwrite(t, tables[0], fileSize(t, tables[0])/10, 512)
	overwrite(t, tables[0], fileSize(t, tables[0])*6/10, 512)
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "*"))
	if len(blobs) != 1 {
		t.Fatalf("%d blob files, want 1", len(blobs))
	}
	overwrite(t, blobs[0], 1000, 64)
	return dir, ids, blobSession
}

// soundStore writes damagedStore's sessions into a store in dir and
// closes it.
func soundStore(t *testing.T, dir string) (ids []string, blobSession string) {
	t.Helper()
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for i := range 31 {
		id := fmt.Sprintf("sess-%02d", i)
		n, size := 200, 300
		if i == 30 {
			n, size, blobSession = 1, 400<<10, id
		} else {
			ids = append(ids, id)
		}
		b := &capture.Batch{Sessions: []*capture.Session{{ID: id, Era: protocol.EraModern, Start: start.Add(time.Duration(i) * time.Minute),
			End: start.Add(time.Duration(i)*time.Minute + time.Second), Messages: n, Calls: n, Status: capture.StatusClosed}}}
		for j := range n {
			seq++
			unit := fmt.Sprintf("%s message %d ", id, j)
			text := strings.Repeat(unit, size/len(unit)+1)[:size]
			raw := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, j, text))
			b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: id, Direction: protocol.ClientToServer,
				Time: start.Add(time.Duration(i)*time.Minute + time.Duration(j)*time.Millisecond), Kind: protocol.KindRequest,
				Method: "tools/call", Name: "echo", ID: []byte(fmt.Sprint(j)), Batch: -1, Raw: raw, Size: len(raw)})
		}
		if err := st.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return ids, blobSession
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// overwrite writes n bytes of 0xA5 at off in the file at path.
func overwrite(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, n), off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedStore: with bytes of a table file and of a blob file really
// overwritten, `verify` names both and exits 1; `export` writes a tape of
// everything readable and exits 1 naming the damage; `show` of each
// session prints what it can and exits 1 exactly when messages of that
// session are gone — and the two agree on what could be read. (Before,
// show and export exited 0 with messages silently missing.)
func TestDamagedStore(t *testing.T) {
	dir, ids, blobSession := damagedStore(t)
	table := ""
	if tables, _ := filepath.Glob(filepath.Join(dir, "*.sst")); len(tables) > 0 {
		slices.SortFunc(tables, func(a, b string) int { return int(fileSize(t, b) - fileSize(t, a)) })
		table = filepath.Base(tables[0])
	}
	before := dirSnapshot(t, dir)

	code, out, errOut := mcptape(t, "verify", "--data", dir)
	if code != 1 {
		t.Errorf("verify exited %d, want 1:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"damaged: table " + table + ": a data block fails its checksum", "messages its record counts are missing", "damaged: session " + blobSession, "fails its checksum", "is damaged"} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("verify's report lacks %q:\n%s%s", want, out, errOut)
		}
	}

	tape := filepath.Join(t.TempDir(), "damaged.tape.json")
	code, _, errOut = mcptape(t, "export", "--data", dir, "-o", tape)
	if code != 1 || !strings.Contains(errOut, "the store is damaged") || !strings.Contains(errOut, "table "+table) {
		t.Errorf("export exited %d, want 1 naming the damage and the table:\n%s", code, errOut)
	}
	tp, err := replay.LoadTape(tape)
	if err != nil {
		t.Fatalf("the export kept no readable tape: %v", err)
	}
	exported := 0
	for _, s := range tp.Sessions {
		exported += len(s.Messages)
	}
	if exported == 0 || exported >= 30*200 {
		t.Errorf("the tape holds %d messages: want what could be read, some but not all of %d", exported, 30*200)
	}
	if !strings.Contains(errOut, fmt.Sprintf("holds the %d message(s) that could be read", exported)) {
		t.Errorf("export does not say how much the tape holds (%d):\n%s", exported, errOut)
	}

	shownTotal, damagedSessions := 0, 0
	for _, id := range append(ids, blobSession) {
		code, out, errOut := mcptape(t, "show", "--data", dir, id, "--json")
		n := strings.Count(out, "\n")
		shownTotal += n
		switch {
		case code == 0 && (n != 200 && id != blobSession):
			t.Errorf("show %s exited 0 with %d of its 200 messages", id, n)
		case code == 1:
			damagedSessions++
			if !strings.Contains(errOut, "the store is damaged") || !strings.Contains(errOut, "mcptape verify") {
				t.Errorf("show %s exited 1 without naming the damage: %s", id, errOut)
			}
		case code != 0:
			t.Errorf("show %s exited %d: %s", id, code, errOut)
		}
		if id == blobSession && (code != 1 || !strings.Contains(errOut, "fails its checksum")) {
			t.Errorf("show of the session whose blob was overwritten: exit %d, %q", code, errOut)
		}
	}
	if shownTotal != exported {
		t.Errorf("show printed %d messages in all, the tape holds %d", shownTotal, exported)
	}
	if damagedSessions < 2 {
		t.Errorf("%d sessions reported damaged, want the blob's and at least one in the table", damagedSessions)
	}
	if after := dirSnapshot(t, dir); !equalSnapshots(before, after) {
		t.Error("verify, export or show changed the store's directory")
	}
	t.Logf("%d of %d messages readable; %d sessions damaged", exported, 30*200+1, damagedSessions)
}

// TestVerifyWhileRecording: verify asks the running recorder, which holds
// the store, to check it; a sound store is reported so.
func TestVerifyWhileRecording(t *testing.T) {
	up := httptest.NewServer(bulkServer{size: 1 << 10})
	t.Cleanup(up.Close)
	r := startRecord(t, "--upstream", up.URL+"/mcp")
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)
	for i := range 5 {
		callTagged(t, hc, r.base+"/mcp", fmt.Sprint("v", i), 1<<10)
	}
	code, out, errOut := mcptape(t, "verify", "--data", r.data)
	if code != 0 || !strings.Contains(out, "ok: no damage found") || !strings.Contains(out, "session(s)") {
		t.Errorf("verify while recording: exit %d\n%s%s", code, out, errOut)
	}
}
