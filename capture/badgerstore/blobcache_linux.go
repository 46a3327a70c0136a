package badgerstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropSupported: Linux has sync_file_range and posix_fadvise.
const dropSupported = true

// dropCached writes f's dirty pages back, waits for them, and drops its
// pages from the page cache (pages dirty again stay: the kernel never drops
// those).
func dropCached(f *os.File) {
	fd := int(f.Fd())
	_ = unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
}
