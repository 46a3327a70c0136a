package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// literalIP reads every spelling of an address that a resolver takes for
// one, and nothing else.
func TestLiteralIP(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "127.1": "127.0.0.1", "2130706433": "127.0.0.1", "0x7f000001": "127.0.0.1",
		"0x7f.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "017700000001": "127.0.0.1", "0": "0.0.0.0",
		"0.0": "0.0.0.0", "10.0.513": "10.0.2.1", "127.0.0.1.": "127.0.0.1", "::ffff:127.0.0.1": "::ffff:127.0.0.1",
		"fe80::1%eth0": "fe80::1%eth0", "::": "::",
		"256.0.0.1": "", "1.2.3.4.5": "", "0x": "0.0.0.0", "08.0.0.1": "", "example.com": "", "": "", "1.2.65536": "",
		"4294967296": "", "1..2": "",
	} {
		ip, ok := literalIP(in)
		got := ""
		if ok {
			got = ip.String()
		}
		if got != want {
			t.Errorf("literalIP(%q) = %q, want %q", in, got, want)
		}
	}
}

// A CONNECT that arrives from the local end of a tunnel the proxy itself
// dialled is a loop, whatever address led it back (a port forwarded to
// the proxy, which no address check sees): 508.
func TestConnectFromOwnTunnel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	p, err := New(&Options{Forward: &ForwardOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	up, err := p.forward.dialTunnel(nil, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	connect := func() int {
		req := httptest.NewRequest(http.MethodConnect, "http://example.com:443", nil)
		req.URL.Host, req.Host = "example.com:443", "example.com:443"
		req.RemoteAddr = up.LocalAddr().String()
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey,
			net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:1"))))
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		return w.Code
	}
	if code := connect(); code != http.StatusLoopDetected {
		t.Errorf("a CONNECT from the proxy's own tunnel: %d, want 508", code)
	}
	up.Close()
	if code := connect(); code == http.StatusLoopDetected {
		t.Errorf("a CONNECT from the address of a tunnel that ended: 508, want it let through")
	}
	if n := p.forward.self.open(); n != 0 {
		t.Errorf("%d tunnel slots held after the CONNECTs ended, want 0", n)
	}
}
