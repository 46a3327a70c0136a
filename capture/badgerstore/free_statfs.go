//go:build linux || darwin || freebsd

package badgerstore

import "golang.org/x/sys/unix"

// freeBytes is the space on dir's file system that an unprivileged
// process may still use.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
