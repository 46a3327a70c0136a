package spool

import (
	"os"
	"syscall"
)

// watchDir reports changes to the files in dir (created, renamed into it,
// written, closed after writing, removed) on the returned channel, at most
// one pending at a time, until stop is called. It fails where the kernel
// will not watch (inotify's limits): the caller then polls.
func watchDir(dir string) (<-chan struct{}, func(), error) {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	const mask = syscall.IN_CREATE | syscall.IN_MOVED_TO | syscall.IN_MODIFY | syscall.IN_CLOSE_WRITE |
		syscall.IN_DELETE | syscall.IN_ATTRIB
	if _, err := syscall.InotifyAddWatch(fd, dir, mask); err != nil {
		syscall.Close(fd)
		return nil, nil, err
	}
	// A non-blocking descriptor in an *os.File waits in the runtime's
	// poller, and Close wakes a Read blocked on it.
	f := os.NewFile(uintptr(fd), "inotify")
	ch := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return // closed by stop, or the watch is gone: polling goes on
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, func() { _ = f.Close() }, nil
}
