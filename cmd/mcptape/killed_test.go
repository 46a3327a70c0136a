package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/fixtures"
)

// lsJSON runs `mcptape ls --json` and returns the sessions.
func lsJSON(t *testing.T, data string) []capture.Session {
	t.Helper()
	code, out, errOut := mcptape(t, "ls", "--data", data, "--json")
	if code != 0 {
		t.Fatalf("ls exited %d: %s", code, errOut)
	}
	var ss []capture.Session
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s capture.Session
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("ls --json: %v", err)
		}
		ss = append(ss, s)
	}
	return ss
}

// shown returns the messages `mcptape show --json` prints for a session.
func shown(t *testing.T, data, id string) []shownMessage {
	t.Helper()
	code, out, errOut := mcptape(t, "show", "--data", data, id, "--json")
	if code != 0 {
		t.Fatalf("show exited %d: %s", code, errOut)
	}
	var ms []shownMessage
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m shownMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("show --json: %v", err)
		}
		ms = append(ms, m)
	}
	return ms
}

// TestKilledRecorder kills a recording `mcptape record` (a child process)
// with SIGKILL in the middle of its traffic. Afterwards a read command
// refuses the store with an error that says what to do, and changes
// nothing in it; the next `mcptape record` on it starts, replaces the dead
// process's recorder.json, and repairs the session it left open: counts
// recounted from the stored messages, status incomplete, the reason given.
func TestKilledRecorder(t *testing.T) {
	up := httptest.NewServer(bulkServer{size: 2 << 10})
	t.Cleanup(up.Close)
	data := t.TempDir()
	args := []string{"record", "--upstream", up.URL + "/mcp", "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off"}
	c := startChild(t, args...)
	proxyURL := urlRE.FindString(c.wait(t, "point your MCP client at ")) + "/mcp"
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)
	for i := range 30 {
		callTagged(t, hc, proxyURL, fmt.Sprintf("call-%d", i), 2<<10)
	}
	// Wait until the summary shows them, then make more calls and kill
	// the recorder before it writes the summary again (every 250 ms).
	fixtures.Eventually(t, 10*time.Second, func() error {
		if ss := lsJSON(t, data); len(ss) != 1 || ss[0].Messages != 60 { // through the recorder's API
			return fmt.Errorf("the recorder does not show 60 messages: %+v", ss)
		}
		return nil
	})
	for i := 30; i < 40; i++ {
		callTagged(t, hc, proxyURL, fmt.Sprintf("call-%d", i), 2<<10)
	}
	time.Sleep(30 * time.Millisecond) // a real child's own 250 ms summary timer: write the messages, not the summary
	c.kill(t)
	dead := c.cmd.Process.Pid
	if a, err := remotestore.ReadAnnouncement(data); err != nil || a.PID != dead {
		t.Fatalf("after the kill, recorder.json: %+v, %v; want the dead pid %d", a, err, dead)
	}

	// A read command: a clear refusal, nothing written.
	before := dirSnapshot(t, data)
	code, _, errOut := mcptape(t, "ls", "--data", data)
	if code != 1 || !strings.Contains(errOut, "not closed cleanly") || !strings.Contains(errOut, "mcptape dashboard --data") {
		t.Errorf("ls on the killed recorder's store: exit %d, %q; want 1 and what to do", code, errOut)
	}
	if after := dirSnapshot(t, data); !equalSnapshots(before, after) {
		t.Errorf("ls changed the store's directory:\nbefore %v\nafter  %v", before, after)
	}

	// The next start repairs.
	c2 := startChild(t, args...)
	c2.wait(t, "point your MCP client at ")
	if a, err := remotestore.ReadAnnouncement(data); err != nil || a.PID != c2.cmd.Process.Pid {
		t.Errorf("recorder.json after the restart: %+v, %v; want pid %d", a, err, c2.cmd.Process.Pid)
	}
	ss := lsJSON(t, data)
	if len(ss) != 1 {
		t.Fatalf("%d sessions after the restart, want the killed one", len(ss))
	}
	s := ss[0]
	ms := shown(t, data, s.ID)
	calls := 0
	for _, m := range ms {
		if m.Kind == "request" && m.Dir == "c2s" {
			calls++
		}
	}
	if s.Status != capture.StatusIncomplete || s.LossReason != badgerstore.StaleReason {
		t.Errorf("the killed session: status %s, reason %q; want incomplete, %q", s.Status, s.LossReason, badgerstore.StaleReason)
	}
	if s.Messages != len(ms) || s.Calls != calls || s.Exchanges == 0 || len(ms) < 60 {
		t.Errorf("the killed session's summary: %d messages, %d calls, %d exchanges; the store holds %d messages, %d calls",
			s.Messages, s.Calls, s.Exchanges, len(ms), calls)
	}
	if code := c2.interrupt(t); code != 0 {
		t.Fatalf("the restarted record exited %d: %s", code, c2.errOut.String())
	}
	if _, err := os.Stat(filepath.Join(data, remotestore.AnnouncementFile)); !os.IsNotExist(err) {
		t.Errorf("recorder.json after a clean stop: %v", err)
	}
	t.Logf("the killed session: %d of the 80 messages sent stored, summary repaired", len(ms))
}

// dirSnapshot lists the files of dir with their sizes and times.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%d %d %v", fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalSnapshots(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
