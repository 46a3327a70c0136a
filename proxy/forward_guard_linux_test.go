//go:build linux

package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// A client whose connection to the proxy has the same address and port as
// a tunnel's connection to another server (the system gives a connection
// any free port for its own pair of ends) is not a loop: its CONNECT goes
// through. Made certain here by noting a tunnel with the client's own end.
func TestConnectFromAPortATunnelAlsoUses(t *testing.T) {
	p, err := New(&Options{Forward: &ForwardOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	client, proxySide := tcpPair(t) // proxySide's end stands for the proxy's listener
	clientEnd, listener := client.LocalAddr().(*net.TCPAddr).AddrPort(), proxySide.LocalAddr()
	if !socketExists(clientEnd, listener.(*net.TCPAddr).AddrPort()) {
		t.Fatalf("the client's socket %s -> %s is not in the system's table", clientEnd, listener)
	}
	// A tunnel to another server from the client's address and port.
	forget := p.forward.self.dialledOut(fakeEnds{local: client.LocalAddr(), remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:9"))})
	defer forget()
	req := httptest.NewRequest(http.MethodConnect, "http://example.com:443", nil)
	req.URL.Host, req.Host = "example.com:443", "example.com:443"
	req.RemoteAddr = clientEnd.String()
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, listener))
	if p.forward.self.fromOwnTunnel(req) {
		t.Errorf("a client sharing a tunnel's port (its connection to %s, the tunnel's to 127.0.0.1:9) was taken for a loop", listener)
	}
}

type fakeEnds struct {
	net.Conn
	local, remote net.Addr
}

func (c fakeEnds) LocalAddr() net.Addr  { return c.local }
func (c fakeEnds) RemoteAddr() net.Addr { return c.remote }
