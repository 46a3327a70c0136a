package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// tenDaysStore fills a new store in a temporary directory with 1,000
// finished sessions spread over the ten days before now (four messages of
// incompressible bytes each, every twentieth with a large result), closes
// it, and returns its directory and how many sessions ended before three
// days ago.
func tenDaysStore(t *testing.T, now time.Time) (dir string, older int) {
	t.Helper()
	dir = t.TempDir()
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	var seq uint64
	for i := range 1000 {
		id := fmt.Sprintf("old-%04d", i)
		start := now.Add(-10 * 24 * time.Hour).Add(time.Duration(i)*864*time.Second + 432*time.Second)
		end := start.Add(2 * time.Second)
		if end.Before(now.Add(-72 * time.Hour)) {
			older++
		}
		b := &capture.Batch{Sessions: []*capture.Session{{ID: id, Era: protocol.EraLegacy, Start: start, End: end, Messages: 4, Calls: 2,
			Status: capture.StatusClosed, Upstream: "http://127.0.0.1:1", Path: "/mcp"}}}
		for j := range 4 {
			n := 2000
			if i%20 == 0 && j == 3 {
				n = 300 << 10
			}
			raw := make([]byte, n)
			for k := range raw {
				raw[k] = byte('a' + rng.IntN(26))
			}
			raw = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"pad":"%s"}}`, j, raw)
			seq++
			b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: id, Direction: protocol.ServerToClient,
				Time: start.Add(time.Duration(j) * time.Millisecond), Kind: protocol.KindResult, Batch: -1, Raw: raw, Size: len(raw)})
		}
		if err := st.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, older
}

func storeSize(t *testing.T, dir string) int64 {
	t.Helper()
	st, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPruneStoppedStore: `mcptape prune --older-than 3d` on a stopped store
// of 1,000 sessions over ten days lists, with --dry-run, the sessions it
// would delete and deletes nothing; without it deletes exactly those, and
// the store takes less disk space after.
func TestPruneStoppedStore(t *testing.T) {
	dir, older := tenDaysStore(t, time.Now())
	before := storeSize(t, dir)

	code, out, errOut := mcptape(t, "prune", "--data", dir, "--older-than", "3d", "--dry-run")
	if code != 0 {
		t.Fatalf("prune --dry-run: exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "would delete old-"); n != older {
		t.Errorf("--dry-run listed %d sessions, want %d:\n%s", n, older, clip(out))
	}
	if !strings.Contains(out, "nothing was deleted (--dry-run)") {
		t.Errorf("--dry-run does not say it deleted nothing:\n%s", clip(out))
	}
	_, lsOut, _ := mcptape(t, "ls", "--data", dir, "--json")
	if n := strings.Count(lsOut, "\n"); n != 1000 {
		t.Fatalf("after --dry-run, ls lists %d sessions, want 1000", n)
	}

	code, out, errOut = mcptape(t, "prune", "--data", dir, "--older-than", "3d", "--json")
	if code != 0 {
		t.Fatalf("prune: exit %d: %s", code, errOut)
	}
	var rep capture.PruneReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("prune --json: %v\n%s", err, clip(out))
	}
	if len(rep.Deleted) != older {
		t.Errorf("pruned %d sessions, want the %d older than three days", len(rep.Deleted), older)
	}
	_, lsOut, _ = mcptape(t, "ls", "--data", dir, "--json")
	left := 0
	cutoff := time.Now().Add(-72 * time.Hour)
	for line := range strings.Lines(lsOut) {
		var s capture.Session
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		if s.End.Before(cutoff) {
			t.Errorf("session %s, last traffic %v, was kept", s.ID, s.End)
		}
		left++
	}
	if left != 1000-older {
		t.Errorf("%d sessions left, want %d", left, 1000-older)
	}
	after := storeSize(t, dir)
	if after >= before*45/100 {
		t.Errorf("the store took %d bytes on disk before pruning 70%% of its sessions, %d after", before, after)
	}
	t.Logf("1000 sessions over 10 days, pruned to 3: %.1f MiB -> %.1f MiB on disk", float64(before)/(1<<20), float64(after)/(1<<20))

	if code, _, errOut := mcptape(t, "prune", "--data", dir); code != exitUsage || !strings.Contains(errOut, "--older-than") {
		t.Errorf("prune without a limit: exit %d, %s", code, errOut)
	}
	if code, _, errOut := mcptape(t, "prune", "--data", dir, "--older-than", "30"); code != exitUsage || !strings.Contains(errOut, "30d") {
		t.Errorf("prune --older-than 30: exit %d, %s", code, errOut)
	}
}

// TestPruneWhileRecording: with `mcptape record` holding the store, prune
// asks it to prune: the old sessions go, and the sessions it is recording
// (one still open, one its client closed a moment ago) are kept, even
// with --older-than 1s, and said to be kept.
func TestPruneWhileRecording(t *testing.T) {
	dir, _ := tenDaysStore(t, time.Now())
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	rec := &recordRun{data: dir}
	rec.cmdRun = startRun(t, "record", "--listen", "127.0.0.1:0", "--dashboard", "off", "--data", dir, "--upstream", up.URL+"/mcp")
	rec.url = rec.wait(t, "point your MCP client at ")

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pruned-client","version":"1"}}}`
	openSession := func() string {
		req, _ := http.NewRequest(http.MethodPost, rec.url, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header.Get("Mcp-Session-Id")
	}
	openSession()
	closed := openSession()
	req, _ := http.NewRequest(http.MethodDelete, rec.url, nil)
	req.Header.Set("Mcp-Session-Id", closed)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
	}
	time.Sleep(1100 * time.Millisecond) // real time past --older-than 1s, the least it takes

	code, out, errOut := mcptape(t, "prune", "--data", dir, "--older-than", "1s")
	if code != 0 {
		t.Fatalf("prune while recording: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "held by a running mcptape") {
		t.Errorf("prune does not say the running recorder pruned: %s", errOut)
	}
	if n := strings.Count(out, "deleted old-"); n != 1000 {
		t.Errorf("deleted %d of the 1000 old sessions:\n%s", n, clip(out))
	}
	// The two sessions, and whatever else the recorder filed in this
	// last second (an exchange of no session, in one of its own).
	if !regexp.MustCompile(`\n[2-9] session\(s\) kept although old`).MatchString(out) {
		t.Errorf("prune does not say it kept the sessions being recorded:\n%s", clip(out))
	}
	_, lsOut, _ := mcptape(t, "ls", "--data", dir)
	if n := strings.Count(lsOut, "pruned-client"); n != 2 || strings.Contains(lsOut, "old-") {
		t.Errorf("the recorder's own sessions: %d of 2 left, or old ones too:\n%s", n, lsOut)
	}
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:1000] + "\n…\n" + s[len(s)-1000:]
	}
	return s
}
