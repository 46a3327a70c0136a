//go:build unix

package remotestore

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with pid runs (signal 0 probes
// without sending anything; EPERM means it runs as another user).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
