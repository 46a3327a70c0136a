//go:build unix

package clientconfig

import (
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives f the owner of like, when run by root (sudo mcptape
// attach must not leave a user's config owned by root, unreadable to the
// client). Best effort: a failure leaves the file readable by root only at
// worst, and the mode is kept regardless.
func keepOwner(f *os.File, like fs.FileInfo) {
	st, ok := like.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return
	}
	_ = f.Chown(int(st.Uid), int(st.Gid))
}

// syncDir makes a rename in dir durable. Best effort.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
