package badgerstore

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// dropSupported: Linux has sync_file_range and posix_fadvise; packSupported:
// it can punch holes in a file and find whether any data is left in it.
const (
	dropSupported = true
	packSupported = true
)

// directFlag opens a file for direct I/O.
const directFlag = unix.O_DIRECT

// clearDirect turns direct I/O on f off.
func clearDirect(f *os.File) error {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	return err
}

// pwritev writes the buffers of iov to f at off, in one system call.
func pwritev(f *os.File, iov [][]byte, off int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	want := 0
	for _, b := range iov {
		want += len(b)
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Pwritev(int(fd), iov, off)
			if werr != unix.EINTR {
				return true
			}
		}
	}); err != nil {
		return err
	}
	if werr == nil && n < want {
		werr = io.ErrShortWrite
	}
	return werr
}

// dropCached writes n bytes of f from off (n == 0: to its end) back, waits
// for them, and drops their pages from the page cache (pages dirty again
// stay: the kernel never drops those).
func dropCached(f *os.File, off, n int64) {
	fd := int(f.Fd())
	_ = unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	_ = unix.Fadvise(fd, off, n, unix.FADV_DONTNEED)
}

// punch gives back the disk space of n bytes of f from off, which read as
// zeros after, and reports whether f holds any data still.
func punch(f *os.File, off, n int64) (left bool, err error) {
	fd := int(f.Fd())
	if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
		return true, err
	}
	if _, err := unix.Seek(fd, 0, unix.SEEK_DATA); errors.Is(err, unix.ENXIO) {
		return false, nil
	}
	return true, nil
}
