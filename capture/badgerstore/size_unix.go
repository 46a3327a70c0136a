//go:build unix

package badgerstore

import (
	"io/fs"
	"syscall"
)

// diskUsage is the space a file takes on disk: Badger preallocates its
// value log and memtables as sparse files, whose apparent size (48 MiB for
// an empty store) says nothing about the disk.
func diskUsage(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
