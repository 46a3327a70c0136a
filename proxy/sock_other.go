//go:build !linux

package proxy

import "net"

// fastConn is c: the direct reads and writes of sock_linux.go are made on
// Linux only.
func fastConn(c net.Conn) net.Conn { return c }

// fastListen is ln (see fastConn).
func fastListen(ln net.Listener) net.Listener { return ln }
