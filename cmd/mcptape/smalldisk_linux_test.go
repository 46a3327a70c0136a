package main

import (
	"fmt"
	"github.com/mcptape/mcptape/fixtures"
	"net/http"
	"net/http/httptest"
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
