package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures"
)

// TestRecordRunsOnOneCoreWhileIdle runs the built binary (the tuner starts
// in main, which tests do not run): an idle `record` runs Go code on one
// core, as its Prometheus metrics show, and on as many as GOMAXPROCS says
// when the user set it.
func TestRecordRunsOnOneCoreWhileIdle(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: there is no core to leave idle")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command")
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcptape")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		env  string
		want string
	}{{"", "1"}, {"GOMAXPROCS=2", "2"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, bin, "record", "--upstream", "http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:0",
			"--data", t.TempDir(), "--dashboard", "off", "--metrics", "127.0.0.1:0")
		cmd.Env = withoutEnv(os.Environ(), "GOMAXPROCS")
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		metrics := ""
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := regexp.MustCompile(`Prometheus metrics at (\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				metrics = m[1]
				break
			}
		}
		go io.Copy(io.Discard, out)
		if metrics == "" {
			cancel()
			cmd.Wait()
			t.Fatalf("%s: record printed no metrics URL", tc.env)
		}
		fixtures.Eventually(t, 5*time.Second, func() error {
			res, err := http.Get(metrics)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			m := regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\S+)$`).FindSubmatch(b)
			if m == nil {
				return fmt.Errorf("no go_sched_gomaxprocs_threads in the metrics")
			}
			if got := string(m[1]); got != tc.want {
				return fmt.Errorf("%q: GOMAXPROCS %s, want %s", tc.env, got, tc.want)
			}
			return nil
		})
		_ = cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		cancel()
	}
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
