package protocol_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcptape/mcptape/protocol"
)

// The DNS-rebinding rule, as every mcptape listener applies it: on a
// loopback listener only loopback names pass; elsewhere any name does.
func TestHostAllowed(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7411}
	loop6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 7411}
	lan := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 7411}
	for _, c := range []struct {
		local net.Addr
		host  string
		want  bool
	}{
		{loop, "localhost:7411", true},
		{loop, "127.0.0.1:7411", true},
		{loop, "[::1]:7411", true},
		{loop, "app.localhost", true},
		{loop, "LOCALHOST", true},
		{loop6, "127.0.0.2", true},
		{loop, "evil.example:7411", false},
		{loop6, "rebind.example", false},
		{loop, "127.0.0.1.example", false},
		{loop, "", false},
		{lan, "evil.example", true},
		{nil, "evil.example", true}, // not from a listener
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = c.host
		if c.local != nil {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, c.local))
		}
		if got := protocol.HostAllowed(r); got != c.want {
			t.Errorf("local %v, Host %q: allowed %v, want %v", c.local, c.host, got, c.want)
		}
	}
}
