//go:build unix && !linux

package proxy

import "syscall"

// peekConn reports, without waiting, whether the connection is still open
// with nothing to read (a peek with MSG_DONTWAIT).
func peekConn(_ syscall.RawConn, buf *[1]byte, errp *error) func(fd uintptr) bool {
	return func(fd uintptr) bool {
		_, _, *errp = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}
}
