//go:build !linux

package main

import "testing"

// tmpfs skips: the tests that fill a real disk mount a tmpfs, which only
// Linux offers them.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	t.Skipf("this test mounts a %s tmpfs to fill a real disk, which needs Linux", size)
	return ""
}

// freeOn and fill are only reached past tmpfs.
func freeOn(t *testing.T, dir string) int64 {
	t.Helper()
	t.Fatal("freeOn needs Linux")
	return 0
}

func fill(t *testing.T, dir, name string, leave int64) string {
	t.Helper()
	t.Fatal("fill needs Linux")
	return ""
}
