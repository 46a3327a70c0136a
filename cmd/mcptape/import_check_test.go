package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// writeTapeFile writes a tape of sessions with the given ids (n messages
// each, seqs unique across the tape) to a file and returns its path.
func writeTapeFile(t *testing.T, n int, ids ...string) string {
	t.Helper()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	tape := &replay.Tape{Created: start, Generator: "test"}
	seq := uint64(0)
	for i, id := range ids {
		ts := &replay.TapeSession{Session: &capture.Session{ID: id, Era: protocol.EraModern, Start: start.Add(time.Duration(i) * time.Minute),
			End: start.Add(time.Duration(i)*time.Minute + time.Second), Messages: n, Calls: n, Status: capture.StatusClosed}}
		for j := range n {
			seq++
			raw := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"session %d message %d"}}}`, j, i, j))
			ts.Messages = append(ts.Messages, &capture.Message{Seq: seq, SessionID: id, Direction: protocol.ClientToServer,
				Time: start.Add(time.Duration(i)*time.Minute + time.Duration(j)*time.Millisecond), Kind: protocol.KindRequest,
				Method: "tools/call", Name: "echo", ID: []byte(fmt.Sprint(j)), Batch: -1, Raw: raw, Size: len(raw)})
		}
		tape.Sessions = append(tape.Sessions, ts)
	}
	path := filepath.Join(t.TempDir(), "sessions.tape.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.WriteTape(f, tape); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// storeIDs lists the session ids in the store at dir ("" when there is
// none).
func storeIDs(t *testing.T, dir string) []string {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	code, out, errOut := mcptape(t, "ls", "--data", dir, "--json")
	if code != 0 {
		t.Fatalf("ls: %s", errOut)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var s struct{ ID string }
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	return ids
}

// TestImportAllOrNothing: a tape that holds one session id twice is
// refused whole, naming the id, before anything is written (before: the
// first was imported, then the import failed saying the store held it);
// with --rename both go in. A tape whose second session the store holds
// already leaves the store as it was.
func TestImportAllOrNothing(t *testing.T) {
	tape := writeTapeFile(t, 20, "alpha", "beta", "alpha")
	dst := filepath.Join(t.TempDir(), "store")
	code, out, errOut := mcptape(t, "import", "--data", dst, tape)
	if code != exitError || !strings.Contains(errOut, "holds session alpha twice") || !strings.Contains(errOut, "nothing was imported") || out != "" {
		t.Errorf("import of a tape holding alpha twice: exit %d, stdout %q, stderr %q; want 1 naming alpha", code, out, errOut)
	}
	if ids := storeIDs(t, dst); len(ids) != 0 {
		t.Errorf("the refused import left sessions %v in the store", ids)
	}
	code, _, errOut = mcptape(t, "import", "--rename", "--data", dst, tape)
	if ids := storeIDs(t, dst); code != 0 || len(ids) != 3 || !strings.Contains(strings.Join(ids, " "), "alpha-2") {
		t.Errorf("import --rename: exit %d (%s), sessions %v; want alpha, beta and alpha-2", code, errOut, ids)
	}

	// The store holds "gamma" already: a tape of delta and gamma is
	// refused whole.
	dst = filepath.Join(t.TempDir(), "store")
	if code, _, errOut := mcptape(t, "import", "--data", dst, writeTapeFile(t, 5, "gamma")); code != 0 {
		t.Fatal(errOut)
	}
	code, _, errOut = mcptape(t, "import", "--data", dst, writeTapeFile(t, 5, "delta", "gamma"))
	if ids := storeIDs(t, dst); code != exitError || len(ids) != 1 || !strings.Contains(errOut, "already holds session gamma") {
		t.Errorf("import of a tape whose second session the store holds: exit %d (%s), sessions %v; want 1 and the store as it was", code, errOut, ids)
	}
}

// TestImportRefusesHugeSessionID: a tape whose session id is 10 MB is
// refused with a clear error before anything is written or allocated for
// it (before: 2.9 GB of memory, then a raw Badger error about a key). The
// import runs as a child process, whose peak memory is measured.
func TestImportRefusesHugeSessionID(t *testing.T) {
	long := strings.Repeat("x", 10<<20)
	tape := writeTapeFile(t, 40, "short", long)
	dst := filepath.Join(t.TempDir(), "store")
	c := startChild(t, "import", "--data", dst, tape)
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the import did not end within a minute")
	}
	errOut := c.errOut.String()
	if c.cmd.ProcessState.ExitCode() != exitError || !strings.Contains(errOut, fmt.Sprintf("longer than the %d bytes a session id may have", capture.MaxSessionIDLen)) ||
		!strings.Contains(errOut, "session 2 of the tape") {
		t.Errorf("import of a tape with a 10 MB session id: exit %d, %.300q; want 1 naming the bound", c.cmd.ProcessState.ExitCode(), errOut)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Errorf("the refused tape created the store %s", dst)
	}
	peak, ok := peakRSS(c.cmd.ProcessState)
	if !ok {
		return
	}
	t.Logf("peak memory of the import: %d MiB", peak>>20)
	if peak > 400<<20 {
		t.Errorf("the import peaked at %d MiB for a 10 MiB id it refuses; want far less", peak>>20)
	}
}
