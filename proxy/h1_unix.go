//go:build unix

package proxy

import "syscall"

// h1Supported: the h1 transport checks a pooled connection with a
// non-blocking peek, which needs a socket call.
const h1Supported = true

// clean reports whether a pooled connection is still open with nothing
// to read: an upstream that closed it, or sent bytes nobody asked for,
// while it sat idle makes it unusable.
func (c *h1Conn) clean() bool {
	if c.peek == nil {
		sc, ok := c.c.(syscall.Conn)
		if !ok {
			return false
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		c.raw, c.peek = rc, peekConn(rc, new([1]byte), &c.peekErr)
	}
	// EAGAIN: nothing to read and not closed. A byte, or none at all (the
	// upstream's FIN), is no error.
	return c.raw.Read(c.peek) == nil && c.peekErr == syscall.EAGAIN
}
