package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures"
)

// TestRecordRunsOnOneCoreWhileIdle runs `record` as a process of its own
// (the Ps follow the load only there, not in a test's process): idle, it
// runs Go code on one core, as its Prometheus metrics show, and on as many
// as GOMAXPROCS says when the user set it.
func TestRecordRunsOnOneCoreWhileIdle(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: there is no core to leave idle")
	}
	gomaxprocs := regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\S+)$`)
	for _, tc := range []struct{ env, want string }{{"", "1"}, {"2", "2"}} {
		t.Setenv("GOMAXPROCS", tc.env) // the child's environment ("": unset)
		c := startChild(t, "record", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0",
			"--data", t.TempDir(), "--dashboard", "off", "--metrics", "127.0.0.1:0")
		metrics := urlRE.FindString(c.wait(t, "Prometheus metrics at ")) + "/metrics"
		fixtures.Eventually(t, 5*time.Second, func() error {
			res, err := http.Get(metrics)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			m := gomaxprocs.FindSubmatch(b)
			if m == nil {
				return fmt.Errorf("no go_sched_gomaxprocs_threads in the metrics")
			}
			if got := string(m[1]); got != tc.want {
				return fmt.Errorf("GOMAXPROCS=%q: %s Ps, want %s", tc.env, got, tc.want)
			}
			return nil
		})
		if code := c.interrupt(t); code != 0 {
			t.Fatalf("record exited %d:\n%s%s", code, c.out.String(), c.errOut.String())
		}
	}
}
