//go:build unix

package spool_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture/spool"
)

// A FIFO named like a spool: reading the folder never blocks on it, and
// the real spool beside it is read.
func TestFIFOInTheSpoolFolder(t *testing.T) {
	dir := t.TempDir()
	real := wrapSide(t, dir, "srv", 5, true)
	fifo := filepath.Join(dir, spool.Dir, "00000000-fifo.spool")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	done := make(chan int, 1)
	go func() {
		n := 0
		files, _ := spool.Files(dir)
		for _, f := range files {
			for _, err := range spool.Read(f, 0) {
				if err == nil {
					n++
				}
			}
			spool.Running(f)
		}
		done <- n
	}()
	select {
	case n := <-done:
		if n == 0 {
			t.Errorf("the spool beside the FIFO (%s) was not read", real)
		}
	case <-time.After(10 * time.Second):
		// Unblock the reader, so the test can end.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("reading the spool folder blocked on a FIFO")
	}
	o := openOwner(t, dir)
	defer o.close(t)
	log := ingestWithLog(t, o, dir)
	if !strings.Contains(log, "not read") {
		t.Errorf("the ingester did not say it leaves the FIFO alone:\n%s", log)
	}
	if _, err := os.Lstat(fifo); err != nil {
		t.Errorf("the FIFO was touched: %v", err)
	}
}
