//go:build linux

package proxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// tcpPair is a connected pair of TCP connections on loopback.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// TestSockConnCarriesBytes: megabytes each way at once through a
// sockConn, in reads and writes of every size, arrive whole and in order
// (the socket's buffers fill, so writes wait for the poller, as do reads).
func TestSockConnCarriesBytes(t *testing.T) {
	a, b := tcpPair(t)
	sa, sb := fastConn(a), fastConn(b)
	if _, ok := sa.(*sockConn); !ok {
		t.Fatalf("fastConn gave %T, want *sockConn", sa)
	}
	data := make([]byte, 8<<20)
	rand.Read(data)
	var wg sync.WaitGroup
	got := [2][]byte{}
	for i, pair := range [][2]net.Conn{{sa, sb}, {sb, sa}} {
		w, r := pair[0], pair[1]
		wg.Go(func() {
			for off, n := 0, 1; off < len(data); n = n*7 + 1 {
				if n > 300<<10 {
					n = 1
				}
				end := min(off+n, len(data))
				if _, err := w.Write(data[off:end]); err != nil {
					t.Error(err)
					return
				}
				off = end
			}
		})
		wg.Go(func() {
			buf := make([]byte, 0, len(data))
			p := make([]byte, 200<<10)
			for len(buf) < len(data) {
				n, err := r.Read(p[:1+len(buf)%len(p)])
				buf = append(buf, p[:n]...)
				if err != nil {
					t.Error(err)
					return
				}
			}
			got[i] = buf
		})
	}
	wg.Wait()
	for i := range got {
		if !bytes.Equal(got[i], data) {
			t.Fatalf("direction %d: %d bytes arrived, not the %d sent", i, len(got[i]), len(data))
		}
	}
}

// TestSockConnErrors: a sockConn fails as a *net.TCPConn does, with the
// same error (kind, operation and words): net/http and the proxy read
// them (a timeout is a net.Error whose Timeout is true, a read error an
// *net.OpError with Op "read", a closed connection net.ErrClosed).
func TestSockConnErrors(t *testing.T) {
	type result struct {
		n   int
		err error
	}
	cases := []struct {
		name string
		do   func(c net.Conn, peer *net.TCPConn) result
	}{
		{"read past its deadline", func(c net.Conn, _ *net.TCPConn) result {
			c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			n, err := c.Read(make([]byte, 10))
			return result{n, err}
		}},
		{"read after the peer closed", func(c net.Conn, peer *net.TCPConn) result {
			peer.Write([]byte("abc"))
			peer.Close()
			buf := make([]byte, 10)
			n, _ := io.ReadFull(c, buf[:3])
			_, err := c.Read(buf)
			return result{n, err}
		}},
		{"read after the peer reset", func(c net.Conn, peer *net.TCPConn) result {
			peer.SetLinger(0)
			peer.Close()
			time.Sleep(20 * time.Millisecond) // the kernel delivers the RST with no event to wait on
			n, err := c.Read(make([]byte, 10))
			return result{n, err}
		}},
		{"write after the peer reset", func(c net.Conn, peer *net.TCPConn) result {
			peer.SetLinger(0)
			peer.Close()
			time.Sleep(20 * time.Millisecond) // as above: let the RST arrive
			var n int
			var err error
			for i := 0; i < 100 && err == nil; i++ {
				var m int
				m, err = c.Write(make([]byte, 64<<10))
				n += m
			}
			return result{0, err}
		}},
		{"read after its own close", func(c net.Conn, _ *net.TCPConn) result {
			c.Close()
			n, err := c.Read(make([]byte, 10))
			return result{n, err}
		}},
		{"write after its own close", func(c net.Conn, _ *net.TCPConn) result {
			c.Close()
			n, err := c.Write([]byte("x"))
			return result{n, err}
		}},
		{"read ended by a deadline set while it waits", func(c net.Conn, _ *net.TCPConn) result {
			go func() {
				time.Sleep(20 * time.Millisecond) // so the read is parked in the poller when the deadline moves
				c.SetReadDeadline(time.Unix(1, 0))
			}()
			n, err := c.Read(make([]byte, 10))
			return result{n, err}
		}},
		{"read ended by a close while it waits", func(c net.Conn, _ *net.TCPConn) result {
			go func() {
				time.Sleep(20 * time.Millisecond) // so the read is parked in the poller when it is closed
				c.Close()
			}()
			n, err := c.Read(make([]byte, 10))
			return result{n, err}
		}},
	}
	// The addresses differ between the two connections; the rest of the
	// message must not.
	words := func(err error, c net.Conn) string {
		if err == nil {
			return "<nil>"
		}
		return strings.NewReplacer(c.LocalAddr().String(), "LOCAL", c.RemoteAddr().String(), "REMOTE").Replace(err.Error())
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, peerA := tcpPair(t)
			b, peerB := tcpPair(t)
			fc := fastConn(b)
			want := tc.do(a, peerA)
			got := tc.do(fc, peerB)
			if got.n != want.n || words(got.err, fc) != words(want.err, a) {
				t.Fatalf("sockConn: %d, %q; net.TCPConn: %d, %q", got.n, words(got.err, fc), want.n, words(want.err, a))
			}
			if want.err == nil {
				return
			}
			var wne, gne net.Error
			if errors.As(want.err, &wne) != errors.As(got.err, &gne) || wne != nil && wne.Timeout() != gne.Timeout() {
				t.Errorf("net.Error: sockConn %#v, net.TCPConn %#v", got.err, want.err)
			}
			var woe, goe *net.OpError
			if errors.As(want.err, &woe) != errors.As(got.err, &goe) || woe != nil && woe.Op != goe.Op {
				t.Errorf("*net.OpError: sockConn %#v, net.TCPConn %#v", got.err, want.err)
			}
			for _, sentinel := range []error{io.EOF, net.ErrClosed, os.ErrDeadlineExceeded} {
				if errors.Is(want.err, sentinel) != errors.Is(got.err, sentinel) {
					t.Errorf("errors.Is(%v): sockConn %v, net.TCPConn %v", sentinel, errors.Is(got.err, sentinel), errors.Is(want.err, sentinel))
				}
			}
		})
	}
}
