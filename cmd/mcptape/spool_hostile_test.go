//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/spool"
	"github.com/mcptape/mcptape/fixtures"
)

// A wrap killed with SIGKILL, and a FIFO named like a spool in the folder:
// `ls` does not hang on the FIFO and shows the killed wrap's session; the
// next owner (a dashboard) ingests the spool, closes the session the wrap
// never closed, leaves the FIFO alone, and stops on SIGTERM.
func TestKilledWrapAndFIFO(t *testing.T) {
	data := t.TempDir()
	cmd := mcptapeCmd(t, append([]string{"wrap", "--data", data, "--name", "killed", "--"}, mcptapeArgv(t, "fixture", "server", "--stdio")...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog(t, cmd, "the wrap", nil)
	c := &lineClient{in: in, out: bufio.NewReader(out)}
	c.call(t, 1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)
	c.call(t, 2, "tools/call", `{"name":"echo","arguments":{"text":"before the kill"}}`)
	// Written to the spool, not closed.
	fixtures.Eventually(t, 10*time.Second, func() error {
		files, _ := spool.Files(data)
		for _, f := range files {
			if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("before the kill")) {
				return nil
			}
		}
		return fmt.Errorf("the call is in none of the spools %q", files)
	})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	fifo := filepath.Join(data, spool.Dir, "zz-fifo.spool")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	defer func() {
		// Whatever happened, let a blocked reader go.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ls := exec.CommandContext(ctx, mcptapeArgv(t, "ls", "--data", data)[0], mcptapeArgv(t, "ls", "--data", data)[1:]...)
	ls.Env = append(os.Environ(), asMcptapeEnv+"=1")
	lsOut, err := ls.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ls hung on a FIFO in the spool folder")
	}
	if err != nil || !strings.Contains(string(lsOut), "stdio:killed") {
		t.Errorf("ls: %v\n%s", err, lsOut)
	}

	d := startChild(t, "dashboard", "--data", data, "--listen", "127.0.0.1:0")
	d.wait(t, "dashboard of")
	fixtures.Eventually(t, 15*time.Second, func() error {
		if files, _ := spool.Files(data); len(files) != 0 {
			return fmt.Errorf("the dashboard did not ingest the killed wrap's spool %q:\n%s", files, d.errOut.String())
		}
		return nil
	})
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the dashboard ignored SIGTERM:\n%s", d.errOut.String())
	}
	if _, err := os.Lstat(fifo); err != nil {
		t.Errorf("the FIFO was touched: %v", err)
	}
	if !strings.Contains(d.errOut.String()+d.out.String(), "not read") {
		t.Errorf("the dashboard did not say it leaves the FIFO alone:\n%s", d.errOut.String())
	}
	s, ms := routeSession(t, data, "killed")
	if s.Status == capture.StatusOpen || s.Command == nil || s.Command.Exit == "" {
		t.Errorf("the killed wrap's session: status %s, command %+v; want it closed, saying its end is not known", s.Status, s.Command)
	}
	if len(ms) < 2 {
		t.Errorf("%d messages of the killed wrap's session stored", len(ms))
	}
}
