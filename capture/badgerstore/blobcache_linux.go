package badgerstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing f's dirty pages to disk, without waiting;
// false if it could not.
func startWriteback(f *os.File) bool {
	return unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE) == nil
}

// dropCached waits for f's write-back and drops its pages from the page
// cache (pages still dirty stay: the kernel never drops those).
func dropCached(f *os.File) {
	fd := int(f.Fd())
	_ = unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
}
