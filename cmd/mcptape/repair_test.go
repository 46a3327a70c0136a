package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// tapeDigest exports the store in dir and sums each session's messages
// (seq, direction, raw bytes), by session id.
func tapeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	tape := filepath.Join(t.TempDir(), "digest.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", dir, "-o", tape); code != 0 {
		t.Fatalf("export of %s exited %d: %s", dir, code, errOut)
	}
	tp, err := replay.LoadTape(tape)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range tp.Sessions {
		h := sha256.New()
		for _, m := range s.Messages {
			h.Write([]byte{byte(m.Seq), byte(m.Seq >> 8), byte(m.Direction)})
			h.Write(m.Raw)
		}
		out[s.Session.ID] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}

// TestRepairDamagedValueLogHeader: five bytes overwritten in the header
// of Badger's value log keep every command out of an otherwise intact
// store (before: the raw "Invalid datakey id", no hint). Now every command
// says what to run; verify names the file; verify --repair recovers the
// whole store into a new directory without touching the damaged one, and
// says nothing was lost; --replace puts it in place and keeps the damaged
// one beside it.
func TestRepairDamagedValueLogHeader(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ids, _ := soundStore(t, dir)
	want := tapeDigest(t, dir)
	overwrite(t, filepath.Join(dir, "000001.vlog"), 2, 5)
	before := dirSnapshot(t, dir)

	for _, args := range [][]string{{"ls"}, {"show", ids[0]}, {"export", "-o", filepath.Join(t.TempDir(), "x.json")}} {
		code, _, errOut := mcptape(t, append(args, "--data", dir)...)
		if code != 1 || !strings.Contains(errOut, "mcptape verify --repair --data "+dir) {
			t.Errorf("%s on the damaged store: exit %d, %q; want 1 saying to run verify --repair", args[0], code, errOut)
		}
	}
	code, out, errOut := mcptape(t, "verify", "--data", dir)
	if code != 1 || !strings.Contains(out, "damaged: value log 000001.vlog: its header is damaged") || !strings.Contains(errOut, "verify --repair") {
		t.Errorf("verify: exit %d, want 1 naming the value log's header:\n%s%s", code, out, errOut)
	}

	into := filepath.Join(filepath.Dir(dir), "recovered")
	code, out, errOut = mcptape(t, "verify", "--repair", "--data", dir, "--into", into)
	for _, w := range []string{"mended: the header of value log 000001.vlog", "recovered: 31 session(s)", "nothing was lost", "--data " + into} {
		if !strings.Contains(out, w) {
			t.Errorf("verify --repair's report lacks %q:\n%s%s", w, out, errOut)
		}
	}
	if code != 0 {
		t.Errorf("verify --repair exited %d: %s", code, errOut)
	}
	if after := dirSnapshot(t, dir); !equalSnapshots(before, after) {
		t.Error("verify --repair changed the damaged store's directory")
	}
	got := tapeDigest(t, into)
	if len(got) != len(want) {
		t.Errorf("the recovered store holds %d sessions, the store held %d", len(got), len(want))
	}
	for id, h := range want {
		if got[id] != h {
			t.Errorf("session %s: its messages differ in the recovered store", id)
		}
	}
	if code, out, _ := mcptape(t, "verify", "--data", into); code != 0 {
		t.Errorf("verify of the recovered store: exit %d\n%s", code, out)
	}

	// In place: the damaged store is kept, renamed.
	code, out, errOut = mcptape(t, "verify", "--repair", "--replace", "--data", dir)
	if code != 0 || !strings.Contains(out, "replaced: "+dir) {
		t.Fatalf("verify --repair --replace: exit %d:\n%s%s", code, out, errOut)
	}
	kept, _ := filepath.Glob(dir + ".damaged-*")
	if len(kept) != 1 {
		t.Fatalf("after --replace, %d damaged stores kept beside it, want 1", len(kept))
	}
	if b, err := os.ReadFile(filepath.Join(kept[0], "000001.vlog")); err != nil || len(b) < 7 || b[2] != 0xA5 {
		t.Errorf("the kept damaged store is not the damaged store (%v)", err)
	}
	if code, out, errOut := mcptape(t, "ls", "--data", dir); code != 0 || strings.Count(out, "\n") != 32 {
		t.Errorf("ls after --replace: exit %d, %d lines:\n%s%s", code, strings.Count(out, "\n"), out, errOut)
	}
}

// TestRepairRebuildsFromTables: a store whose table blocks fail their
// checksums (and whose blob file is damaged) is rebuilt from what its
// tables hold: verify --repair says which tables lost blocks and which
// sessions lost messages, removes the messages whose bytes are gone, and
// marks their sessions incomplete with the count lost, so that the new
// store verifies sound and holds exactly the messages the damaged one
// could still give. A damaged MANIFEST, which keeps Badger from opening
// the store, is rebuilt with nothing lost.
func TestRepairRebuildsFromTables(t *testing.T) {
	dir, _, blobSession := damagedStore(t)
	code, _, errOut := mcptape(t, "export", "--data", dir, "-o", filepath.Join(t.TempDir(), "readable.tape.json"))
	readable := regexp.MustCompile(`holds the (\d+) message\(s\) that could be read`).FindStringSubmatch(errOut)
	if code != 1 || readable == nil {
		t.Fatalf("export of the damaged store exited %d, want 1 saying how much it read: %s", code, errOut)
	}
	into := filepath.Join(t.TempDir(), "rebuilt")
	code, out, errOut := mcptape(t, "verify", "--repair", "--data", dir, "--into", into)
	for _, w := range []string{"rebuilt from its tables", "blocks fail their checksums: the records in them are lost",
		"lost: session " + blobSession, "recovered: 31 session(s)"} {
		if !strings.Contains(out, w) {
			t.Errorf("verify --repair's report lacks %q:\n%s%s", w, out, errOut)
		}
	}
	if code != 0 || strings.Contains(out, "still damaged") || strings.Contains(out, "nothing was lost") {
		t.Errorf("verify --repair: exit %d; want 0, with what was lost:\n%s%s", code, out, errOut)
	}
	code, out, _ = mcptape(t, "verify", "--data", into)
	held := regexp.MustCompile(`(\d+) message\(s\) in`).FindStringSubmatch(out)
	if code != 0 || held == nil || atoi(held[1]) < atoi(readable[1]) {
		t.Errorf("verify of the rebuilt store: exit %d; want it sound, holding at least the %s messages the damaged store gave:\n%s", code, readable[1], out)
	}
	// Every message written is in the rebuilt store or counted lost.
	_, out, _ = mcptape(t, "ls", "--data", into, "--json")
	kept, lost := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var s struct{ Messages, Lost int }
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		kept, lost = kept+s.Messages-s.Lost, lost+s.Lost
	}
	if held != nil && (kept != atoi(held[1]) || kept+lost != 30*200+1 || lost == 0) {
		t.Errorf("the rebuilt store's sessions count %d messages held and %d lost; it holds %s, and %d were written", kept, lost, held[1], 30*200+1)
	}
	t.Logf("the damaged store gave %s messages; the rebuilt one holds %s, %d counted lost", readable[1], held[1], lost)
	code, out, _ = mcptape(t, "ls", "--data", into)
	if code != 0 || !strings.Contains(out, "incomplete (") || !strings.Contains(out, " lost)") {
		t.Errorf("ls of the rebuilt store: exit %d; want the sessions that lost messages marked incomplete with their count:\n%s", code, out)
	}

	// A damaged MANIFEST.
	dir = filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	soundStore(t, dir)
	want := tapeDigest(t, dir)
	overwrite(t, filepath.Join(dir, "MANIFEST"), 8, 16)
	if code, _, errOut := mcptape(t, "ls", "--data", dir); code != 1 || !strings.Contains(errOut, "verify --repair") {
		t.Errorf("ls of a store with a damaged MANIFEST: exit %d, %q", code, errOut)
	}
	into = filepath.Join(t.TempDir(), "rebuilt")
	code, out, errOut = mcptape(t, "verify", "--repair", "--data", dir, "--into", into)
	if code != 0 || !strings.Contains(out, "rebuilt from its tables") || !strings.Contains(out, "nothing was lost") {
		t.Errorf("verify --repair of a damaged MANIFEST: exit %d:\n%s%s", code, out, errOut)
	}
	got := tapeDigest(t, into)
	for id, h := range want {
		if got[id] != h {
			t.Errorf("session %s: its messages differ in the store rebuilt past a damaged MANIFEST", id)
		}
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestRepairReplaysMemtableLog: a store copied while its recorder still
// ran (its newest records only in Badger's memtable log, not yet in a
// table) and then damaged in its MANIFEST is rebuilt with those records
// too: verify --repair reads the memtable log as Badger would have
// replayed it, says nothing was lost, and the late session is whole in the
// new store (before: the rebuild read the tables only, and counted the
// memtable's records lost).
func TestRepairReplaysMemtableLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	soundStore(t, dir) // closed: its records are in tables
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	b := &capture.Batch{Sessions: []*capture.Session{{ID: "sess-late", Era: protocol.EraModern, Start: start,
		End: start.Add(time.Second), Messages: 20, Calls: 20, Status: capture.StatusClosed}}}
	for j := range 20 {
		raw := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"late %d"}}}`, j, j))
		b.Messages = append(b.Messages, &capture.Message{Seq: uint64(100000 + j), SessionID: "sess-late", Direction: protocol.ClientToServer,
			Time: start.Add(time.Duration(j) * time.Millisecond), Kind: protocol.KindRequest,
			Method: "tools/call", Name: "echo", ID: []byte(fmt.Sprint(j)), Batch: -1, Raw: raw, Size: len(raw)})
	}
	if err := st.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	// The copy a crash or a backup of a running recorder leaves.
	copied := filepath.Join(t.TempDir(), "copied")
	if err := os.CopyFS(copied, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	want := tapeDigest(t, dir)
	if _, ok := want["sess-late"]; !ok {
		t.Fatal("the late session is not in the store it was written to")
	}
	overwrite(t, filepath.Join(copied, "MANIFEST"), 8, 16)

	into := filepath.Join(t.TempDir(), "rebuilt")
	code, out, errOut := mcptape(t, "verify", "--repair", "--data", copied, "--into", into)
	if code != 0 || !strings.Contains(out, "rebuilt from its tables") || !strings.Contains(out, "nothing was lost") {
		t.Errorf("verify --repair of a running recorder's copy with a damaged MANIFEST: exit %d; want it rebuilt, nothing lost:\n%s%s", code, out, errOut)
	}
	got := tapeDigest(t, into)
	for id, h := range want {
		if got[id] != h {
			t.Errorf("session %s: its messages differ in the rebuilt store (present: %v)", id, got[id] != "")
		}
	}
}
