package replay

import (
	"context"
	"io"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// waitRead waits, at most limit, until the reader of the pipe w writes to
// has read everything in it, and reports whether it could tell (w is a
// pipe).
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
			if unix.Fstat(int(fd), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
				return // not a pipe: what a socket's peer read cannot be seen
			}
			var err error
			// FIONREAD (TIOCINQ) on a pipe's write end counts what its
			// reader has not read yet.
			if n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
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
