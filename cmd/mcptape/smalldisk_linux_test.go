package main

import (
	"bufio"
	"fmt"
	"github.com/mcptape/mcptape/fixtures"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRecordOnADiskSmallerThanMinFree: on a real 64 MiB tmpfs, under the
// default --min-free of 256 MiB, `record` forwards every call and records
// nothing. It says so loudly when it starts (why, and what to do), and
// `ls` shows the count of messages not recorded, while it runs and after
// it stopped (before: nothing at start, and "no sessions recorded yet").
func TestRecordOnADiskSmallerThanMinFree(t *testing.T) {
	disk := tmpfs(t, "64m")
	data := filepath.Join(disk, "store")
	up := httptest.NewServer(bulkServer{size: 2 << 10})
	t.Cleanup(up.Close)
	c := startChild(t, "record", "--upstream", up.URL+"/mcp", "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off")
	proxyURL := urlRE.FindString(c.wait(t, "point your MCP client at ")) + "/mcp"
	// The warning goes to stderr, the address to stdout: either may be read first.
	c.errOut.await(10*time.Second, c.exited, func(s string) bool { return strings.Contains(s, "--data DIR") })
	warning := c.errOut.String()
	for _, want := range []string{"NOTHING WILL BE RECORDED", "256 MiB that --min-free keeps free", "--min-free 32MiB", "--data DIR"} {
		if !strings.Contains(warning, want) {
			t.Errorf("record's warning at start lacks %q:\n%s", want, warning)
		}
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { callTagged(t, hc, proxyURL, "small-"+strconv.Itoa(i), 2<<10) })
	}
	wg.Wait()

	notRecorded := regexp.MustCompile(`\((\d+) message\(s\) not recorded by the (running recorder|last recording)[^)]*--min-free`)
	fixtures.Eventually(t, 10*time.Second, func() error {
		_, out, _ := mcptape(t, "ls", "--data", data)
		if m := notRecorded.FindStringSubmatch(out); m == nil || m[2] != "running recorder" || m[1] != "20" {
			return fmt.Errorf("ls while recording on the small disk does not show the 20 messages not recorded:\n%s", out)
		}
		return nil
	})
	if code := c.interrupt(t); code != 0 {
		t.Fatalf("record exited %d:\n%s%s", code, c.out.String(), c.errOut.String())
	}
	code, out, errOut := mcptape(t, "ls", "--data", data)
	if m := notRecorded.FindStringSubmatch(out); code != 0 || m == nil || m[2] != "last recording" || m[1] != "20" {
		t.Errorf("ls after the recording: exit %d; want the 20 messages the last recording could not record, and why:\n%s%s", code, out, errOut)
	}
}

// TestWrapOnADiskSmallerThanMinFree: a wrap whose data directory is on a
// 64 MiB tmpfs (under the default floor of 256 MiB free) forwards every
// message and records none, while a dashboard owns the store. `ls` says
// how many were not recorded and what to do, while the dashboard runs and
// after it stopped (before: only the wrap's stderr said it, which a client
// keeps in its own logs, and `ls` showed no sessions as if nothing had
// happened).
func TestWrapOnADiskSmallerThanMinFree(t *testing.T) {
	data, d := dashboardOnSmallDisk(t)

	cmd, in, out, stderr := startWrap(t, append([]string{"wrap", "--data", data, "--name", "small", "--"}, mcptapeArgv(t, "fixture", "server", "--stdio")...)...)
	c := &lineClient{in: in, out: bufio.NewReader(out)}
	c.call(t, 1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)
	if got := c.call(t, 2, "tools/call", `{"name":"echo","arguments":{"text":"on a small disk"}}`); !strings.Contains(got, "on a small disk") {
		t.Fatalf("the call through the wrap was not answered: %s", got)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the wrap: %v; stderr:\n%s", err, stderr.String())
	}

	notRecorded := regexp.MustCompile(`\((\d+) message\(s\) not recorded by the last recording, .*: the disk is nearly full.* free space on that disk, or record into a directory on a larger disk \(--data DIR\)\)`)
	code, lsOut, errOut := mcptape(t, "ls", "--data", data)
	m := notRecorded.FindStringSubmatch(lsOut)
	if code != 0 || m == nil {
		t.Fatalf("ls while the dashboard holds the store: exit %d; want the messages the wrap could not record, and what to do:\n%s%s", code, lsOut, errOut)
	}
	if n, _ := strconv.Atoi(m[1]); n < 4 { // the two calls and their answers at least
		t.Errorf("ls shows %d messages not recorded, want the wrap's 4 or more:\n%s", n, lsOut)
	}
	if code := d.interrupt(t); code != 0 {
		t.Fatalf("the dashboard exited %d:\n%s%s", code, d.out.String(), d.errOut.String())
	}
	code, after, errOut := mcptape(t, "ls", "--data", data)
	if m2 := notRecorded.FindStringSubmatch(after); code != 0 || m2 == nil || m2[1] != m[1] {
		t.Errorf("ls after the dashboard stopped: exit %d; want the same %s messages not recorded:\n%s%s", code, m[1], after, errOut)
	}
}

// TestDashboardOnADiskSmallerThanMinFree: a dashboard that owns a store on
// a 64 MiB tmpfs (under the default --min-free of 256 MiB) is handed a
// wrap's messages through a spool folder on a larger disk. It cannot
// store them, and keeps them in the spool until it can: `ls` says that
// recording is paused, and why, while the dashboard runs (before: "no
// sessions recorded yet" and nothing else), and shows the wrap's session
// from its spool once the dashboard stopped: nothing was lost.
func TestDashboardOnADiskSmallerThanMinFree(t *testing.T) {
	data, d := dashboardOnSmallDisk(t)
	// The wraps' spools on a disk with room: only the store lacks it.
	spoolDir := filepath.Join(data, "spool")
	if err := os.MkdirAll(spoolDir, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, spoolDir, "512m")

	runWrapped(t, data, "waiting", 1)

	paused := regexp.MustCompile(`\(recording is paused in the process that holds the store, pid \d+: .*--min-free.*what wraps hand it waits in their spools`)
	code, lsOut, errOut := mcptape(t, "ls", "--data", data)
	if code != 0 || !paused.MatchString(lsOut) {
		t.Errorf("ls while the dashboard holds the store: exit %d; want it to say recording is paused, and why:\n%s%s", code, lsOut, errOut)
	}
	if code := d.interrupt(t); code != 0 {
		t.Fatalf("the dashboard exited %d:\n%s%s", code, d.out.String(), d.errOut.String())
	}
	code, lsOut, errOut = mcptape(t, "ls", "--data", data)
	if code != 0 || !strings.Contains(lsOut, "waiting") || strings.Contains(lsOut, "not recorded") {
		t.Errorf("ls after the dashboard stopped: exit %d; want the wrap's session from its spool, nothing lost:\n%s%s", code, lsOut, errOut)
	}
}

// dashboardOnSmallDisk starts a dashboard that owns a new store on a
// 64 MiB tmpfs (under the default --min-free of 256 MiB) and returns the
// store's directory.
func dashboardOnSmallDisk(t *testing.T) (string, *proc) {
	t.Helper()
	data := filepath.Join(tmpfs(t, "64m"), "store")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	d := startChild(t, "dashboard", "--data", data, "--listen", "127.0.0.1:0")
	d.wait(t, "dashboard of")
	return data, d
}
