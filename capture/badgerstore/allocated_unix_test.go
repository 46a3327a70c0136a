//go:build unix

package badgerstore_test

import (
	"os"
	"syscall"
)

// allocated is the disk space fi's file takes.
func allocated(fi os.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Blocks * 512, true
}
