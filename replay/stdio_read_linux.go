package replay

import (
	"context"
	"io"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// waitRead waits, at most limit, until the reader of the pipe (or Unix
// socket) w writes to has read everything in it, and reports whether it
// could tell.
func waitRead(ctx context.Context, w io.Writer, limit time.Duration) bool {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	unread := func() (int, bool) {
		n, known := 0, false
		_ = raw.Control(func(fd uintptr) {
			var st unix.Stat_t
			if unix.Fstat(int(fd), &st) != nil {
				return
			}
			req := uint(0)
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFIFO:
				// FIONREAD (TIOCINQ) on a pipe's write end counts what its
				// reader has not read yet.
				req = unix.TIOCINQ
			case unix.S_IFSOCK:
				// A Unix socket (what Node gives a child for stdio): its
				// send queue (SIOCOUTQ) holds what the peer has not read
				// yet. A TCP socket's holds what was not acknowledged,
				// which says nothing of what the peer's program read.
				if sa, err := unix.Getsockname(int(fd)); err != nil {
					return
				} else if _, ok := sa.(*unix.SockaddrUnix); !ok {
					return
				}
				req = unix.SIOCOUTQ
			default:
				return
			}
			var err error
			if n, err = unix.IoctlGetInt(int(fd), req); err == nil {
				known = true
			}
		})
		return n, known
	}
	deadline := time.Now().Add(limit)
	for {
		n, known := unread()
		if !known {
			return false
		}
		if n == 0 || time.Now().After(deadline) {
			return true
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return true
		}
	}
}
