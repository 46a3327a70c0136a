package badgerstore

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// unmapper calls releaseMapped now and then until stopped.
type unmapper struct {
	stopped chan struct{}
	done    chan struct{}
}

// unmapEvery is how often a BulkLoad store lets go of its mapped pages;
// unmapRecordingEvery how often a recording's store does (its tables
// grow slowly: after a day of small calls, or a few 1 MiB results, they
// were tens of MB of the recorder's resident memory).
var (
	unmapEvery          = 250 * time.Millisecond
	unmapRecordingEvery = 5 * time.Second
)

// startUnmapper starts the unmapper of a BulkLoad store (bulk) or of a
// recording's.
func startUnmapper(dir string, bulk bool) *unmapper {
	every := unmapRecordingEvery
	if bulk {
		every = unmapEvery
	}
	u := &unmapper{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(u.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-u.stopped:
				return
			case <-t.C:
				releaseMapped(dir)
			}
		}
	}()
	return u
}

// stop ends the unmapper and waits for it; a nil one does nothing.
func (u *unmapper) stop() {
	if u == nil {
		return
	}
	close(u.stopped)
	<-u.done
}

// releaseMapped takes the pages of the store's table files that Badger has
// mapped out of the process's resident memory (madvise MADV_DONTNEED; see
// Options.BulkLoad). Badger writes each table through a shared mapping of
// its file and keeps it mapped while the table lives, so every page of
// every table written counts in the process's RSS until the kernel needs
// the memory: in a bulk write, about the size of what was written. The
// pages stay in the page cache, clean or written back as usual (the
// mappings are shared: nothing is lost), and a read maps them again.
func releaseMapped(dir string) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	prefix := []byte(abs + string(filepath.Separator))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		line := sc.Bytes()
		fields := bytes.Fields(line)
		if len(fields) < 6 || len(fields[1]) < 4 || fields[1][3] != 's' {
			continue // private mappings hold the process's own changes
		}
		path := fields[5]
		if !bytes.HasPrefix(path, prefix) || !bytes.HasSuffix(path, []byte(".sst")) {
			continue
		}
		lo, hi, ok := bytes.Cut(fields[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED)
	}
}
