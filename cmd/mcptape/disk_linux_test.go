package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// tmpfs mounts a tmpfs of the given size (as mount's size= takes it) on a
// new directory and unmounts it when the test ends. It needs root (or
// CAP_SYS_ADMIN); otherwise the test is skipped, saying so.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("this test mounts a %s tmpfs to fill a real disk, which needs root; skipped as uid %d", size, os.Geteuid())
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, dir, size)
	return dir
}

// mountTmpfs mounts a tmpfs of the given size on dir, an empty directory,
// until the test ends; as tmpfs, the test is skipped where mounting is
// not allowed.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			t.Skipf("this test mounts a %s tmpfs to fill a real disk, and mounting is not allowed here (%v); skipped", size, err)
		}
		t.Fatalf("mounting a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
}

// freeOn is the free space on dir's file system.
func freeOn(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill writes a ballast file in dir until dir's file system has at most
// leave bytes free (0: until it is full), and returns its path.
func fill(t *testing.T, dir, name string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 256<<10)
	for i := range block {
		block[i] = byte(i*7 + 1)
	}
	for {
		free := freeOn(t, dir)
		if free <= leave {
			return path
		}
		n := min(int64(len(block)), free-leave)
		if _, err := f.Write(block[:n]); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
}
