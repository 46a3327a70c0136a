//go:build linux

package proxy

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// sockConn is a TCP connection whose reads and writes are made with the
// read and write system calls themselves, on the socket the runtime's
// poller watches (its deadlines, its waits and its close are the
// runtime's, through syscall.RawConn), without the runtime's bookkeeping
// around a system call that may block. The socket is non-blocking, so
// neither call can. That bookkeeping is what wakes the runtime's monitor
// thread (sysmon) from its sleep each time the process goes from idle to
// a system call, after which it polls every 20µs until the process is idle
// again: a proxy waits on the network between every two steps of a call,
// and on a machine that is not busy that was a tenth of its CPU, more
// than its reads and writes themselves.
//
// Everything else (deadlines, addresses, half-close, keep-alive) is the
// *net.TCPConn's. Errors are the ones net.TCPConn returns.
type sockConn struct {
	*net.TCPConn
	raw syscall.RawConn

	rmu     sync.Mutex // one read at a time owns rp, rn, rerr
	rp      []byte
	rn      int
	rerr    error
	readFn  func(fd uintptr) bool
	wmu     sync.Mutex // one write at a time owns wp, wn, werr
	wp      []byte
	wn      int
	werr    error
	writeFn func(fd uintptr) bool
}

// maxRW bounds one system call's bytes, as internal/poll does.
const maxRW = 1 << 30

// fastConn returns c as a sockConn when it is a TCP connection, else c.
func fastConn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	s := &sockConn{TCPConn: tc, raw: raw}
	s.readFn, s.writeFn = s.doRead, s.doWrite
	return s
}

func (c *sockConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rp, c.rn, c.rerr = p[:min(len(p), maxRW)], 0, nil
	err := c.raw.Read(c.readFn)
	n, rerr := c.rn, c.rerr
	c.rp = nil
	switch {
	case err != nil:
		return 0, opError("read", err, c.TCPConn)
	case rerr == nil || rerr == io.EOF:
		return n, rerr
	}
	return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: rerr}
}

// doRead reads once the socket has bytes (or its end); false: it has none
// yet, the poller waits.
func (c *sockConn) doRead(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rp[0])), uintptr(len(c.rp)))
		switch e {
		case 0:
			c.rn = int(n)
			if n == 0 {
				c.rerr = io.EOF
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rerr = os.NewSyscallError("read", e)
		return true
	}
}

func (c *sockConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wp, c.wn, c.werr = p, 0, nil
	err := c.raw.Write(c.writeFn)
	n, werr := c.wn, c.werr
	c.wp = nil
	switch {
	case err != nil:
		return n, opError("write", err, c.TCPConn)
	case werr != nil:
		return n, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: werr}
	}
	return n, nil
}

// doWrite writes what the socket takes; false: it takes no more for now,
// the poller waits until it does.
func (c *sockConn) doWrite(fd uintptr) bool {
	for c.wn < len(c.wp) {
		p := c.wp[c.wn:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(min(len(p), maxRW)))
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}

// opError is err from a RawConn (a deadline, a closed connection) as the
// connection's own Read or Write names it.
func opError(op string, err error, c *net.TCPConn) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
		return oe
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// peekConn reports, without waiting, whether the connection is still open
// with nothing to read (a peek with MSG_DONTWAIT, made as sockConn's
// reads are).
func peekConn(raw syscall.RawConn, buf *[1]byte, errp *error) func(fd uintptr) bool {
	return func(fd uintptr) bool {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		*errp = nil
		if e != 0 {
			*errp = e
		}
		return true
	}
}

// fastListener accepts sockConns.
type fastListener struct{ *net.TCPListener }

func (l fastListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	return fastConn(c), nil
}

// fastListen is ln accepting sockConns, when it is a TCP listener.
func fastListen(ln net.Listener) net.Listener {
	if tl, ok := ln.(*net.TCPListener); ok {
		return fastListener{tl}
	}
	return ln
}
