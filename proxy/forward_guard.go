package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The forward proxy's guards against itself. A CONNECT (or a request in
// absolute form) that reaches the proxy is a loop: through a tunnel into
// itself, a client nests CONNECT in CONNECT on one socket, each level
// costing the proxy two connections and their goroutines, without end.
// Whatever the target's spelling, the proxy refuses it when it is one of
// this process's listeners (the proxy's own, and those added with
// [Proxy.AddOwnAddr]: the dashboard, the local API, the metrics):
//
//   - the port is one of theirs, and
//   - the host is a loopback or unspecified address, or an address of one
//     of the machine's interfaces, in any spelling (IPv4 in decimal, hex
//     or octal, in one to four parts as inet_aton reads it; IPv4-mapped
//     IPv6; a zone), or localhost, or a name that resolves to one.
//
// A tunnel's dialled connection is checked again once connected (a name
// may resolve differently the second time), and a CONNECT that arrives
// from the local end of one of the proxy's own tunnels is refused too,
// whatever address led there (a port forwarded back to the proxy). A
// CONNECT read inside a tunnel is refused: tunnels do not nest. And each
// client (by address) holds at most ForwardOptions.MaxTunnelsPerClient
// tunnels at a time, so that a loop through another proxy, which none of
// this can see, stays bounded.

// DefaultMaxTunnelsPerClient is ForwardOptions.MaxTunnelsPerClient's
// default.
const DefaultMaxTunnelsPerClient = 256

// resolveWait bounds the lookup of a name that names one of the proxy's
// ports.
const resolveWait = 5 * time.Second

// selfGuard holds what the forward proxy knows of itself.
type selfGuard struct {
	mu    sync.Mutex
	ports map[int]bool // the ports this process listens on
	// out holds the tunnels this proxy dialled, by their two ends.
	out map[tunnelEnds]bool
	// tunnels counts the tunnels open per client address.
	tunnels  map[netip.Addr]int
	maxPerIP int
	ifaddrs  func() ([]net.Addr, error) // net.InterfaceAddrs
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
}

func newSelfGuard(maxPerClient int) *selfGuard {
	if maxPerClient == 0 {
		maxPerClient = DefaultMaxTunnelsPerClient
	}
	return &selfGuard{ports: map[int]bool{}, out: map[tunnelEnds]bool{}, tunnels: map[netip.Addr]int{},
		maxPerIP: maxPerClient, ifaddrs: net.InterfaceAddrs, lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}}
}

// AddOwnAddr tells the forward proxy of another address this process
// listens on (a dashboard, an API, a metrics endpoint): a CONNECT or a
// forward request to it is refused like one to the proxy itself (508).
// The proxy's own listener is known from [Listen]. It does nothing on a
// proxy without a forward leg.
func (p *Proxy) AddOwnAddr(addr string) {
	if p.forward == nil {
		return
	}
	p.forward.self.addOwn(addr)
}

func (g *selfGuard) addOwn(addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	if n, err := strconv.Atoi(port); err == nil && n > 0 {
		g.mu.Lock()
		g.ports[n] = true
		g.mu.Unlock()
	}
}

func (g *selfGuard) ownPort(port int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ports[port]
}

// targets reports whether hostport (a CONNECT's target or an absolute
// URL's host) names this process: a request that arrived on local must
// not be sent back to it. The port of the listener it arrived on counts
// as the proxy's own.
func (g *selfGuard) targets(ctx context.Context, local net.Addr, hostport, defPort string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, defPort
	}
	n, err := net.LookupPort("tcp", port)
	if err != nil {
		return false // not dialable either
	}
	if la, ok := local.(*net.TCPAddr); !(ok && la.Port == n) && !g.ownPort(n) {
		return false
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if ip, ok := literalIP(host); ok {
		return g.local(ip)
	}
	ctx, cancel := context.WithTimeout(ctx, resolveWait)
	defer cancel()
	ips, err := g.lookup(ctx, host)
	if err != nil {
		return false // the dial fails the same way; a CONNECT's dialled address is checked again
	}
	for _, ip := range ips {
		if g.local(ip) {
			return true
		}
	}
	return false
}

// dialled reports whether a connection the proxy dialled reached one of
// its own listeners.
func (g *selfGuard) dialled(c net.Conn) bool {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok || !g.ownPort(ta.Port) {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ok && g.local(ip)
}

// local reports whether ip is this machine: loopback, unspecified (which
// connects to the machine itself), 0.0.0.0/8, or an interface's address.
func (g *selfGuard) local(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if ip.IsLoopback() || ip.IsUnspecified() || ip.Is4() && ip.As4()[0] == 0 {
		return true
	}
	addrs, err := g.ifaddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		var aip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			aip = v.IP
		case *net.IPAddr:
			aip = v.IP
		}
		if x, ok := netip.AddrFromSlice(aip); ok && x.Unmap() == ip {
			return true
		}
	}
	return false
}

// literalIP parses host as an IP address in any spelling a resolver takes
// for one: IPv6 (IPv4-mapped too, with or without a zone), or IPv4 as
// inet_aton reads it — one to four parts, each decimal, 0x-hex or 0-octal,
// the last filling the bytes that remain ("127.1", "2130706433",
// "0x7f.0.0.1", "0177.0.0.01") — with a trailing dot or not.
func literalIP(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(host, ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip, true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		if ip, err := netip.ParseAddr(host[:i]); err == nil {
			return ip, true
		}
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, s := range parts {
		base := 10
		switch {
		case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
			s, base = s[2:], 16
		case len(s) == 2 && (s == "0x" || s == "0X"):
			s, base = "0", 16
		case len(s) > 1 && s[0] == '0':
			s, base = s[1:], 8
		}
		v, err := strconv.ParseUint(s, base, 32)
		if err != nil || s == "" {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if rest := 8 * (4 - (len(vals) - 1)); rest < 32 && last >= 1<<rest {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// tunnelEnds are a connection's two ends, as the proxy dialled it: its own
// (local) and the server's (remote).
type tunnelEnds struct{ local, remote netip.AddrPort }

// fromOwnTunnel reports whether a request came from the local end of a
// tunnel this proxy dialled: a CONNECT looping back through itself. Such
// a request's client end is the tunnel's own end. Its connection reached
// the address the tunnel dialled, unless a port forward (DNAT) in between
// led it to the proxy's; but the system may also give a client's
// connection to the proxy the same address and port as a tunnel's to
// another server, since the two connections' other ends differ. When the
// other ends do not match, the system's socket table tells the two apart:
// a client's own socket to the proxy is in it, a forwarded tunnel's end is
// not (it is the tunnel's socket, whose peer is the address it dialled).
func (g *selfGuard) fromOwnTunnel(r *http.Request) bool {
	remote, ok := addrPort(r.RemoteAddr)
	if !ok {
		return false
	}
	var local netip.AddrPort
	if a := localAddr(r); a != nil {
		local, _ = addrPort(a.String())
	}
	shares, same := g.tunnelFrom(remote, local)
	switch {
	case same:
		return true
	case !shares:
		return false
	}
	// Where it arrived unknown, the client's end decides.
	return !local.IsValid() || !socketExists(remote, local)
}

// tunnelFrom reports whether a tunnel the proxy dialled has the local end
// client (shares), and whether one also has the other end server (same).
func (g *selfGuard) tunnelFrom(client, server netip.AddrPort) (shares, same bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.out[tunnelEnds{local: client, remote: server}] {
		return true, true
	}
	for e := range g.out {
		if e.local == client {
			return true, false
		}
	}
	return false, false
}

// addrPort parses host:port, with an IPv4-mapped address as IPv4.
func addrPort(s string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// dialledOut notes the ends of a tunnel the proxy dialled, until forget.
func (g *selfGuard) dialledOut(c net.Conn) (forget func()) {
	local, ok := addrPort(c.LocalAddr().String())
	remote, ok2 := addrPort(c.RemoteAddr().String())
	if !ok || !ok2 {
		return func() {}
	}
	e := tunnelEnds{local: local, remote: remote}
	g.mu.Lock()
	g.out[e] = true
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.out, e)
		g.mu.Unlock()
	}
}

// tunnelSlot is one client tunnel counted against its bound; release
// gives it back (once).
type tunnelSlot struct {
	once    sync.Once
	release func()
	taken   bool // a connection holds it (set by the CONNECT's goroutine)
}

func (s *tunnelSlot) done() {
	if s != nil {
		s.once.Do(s.release)
	}
}

// admit takes a tunnel slot for the client at remote, or says how many it
// holds when it has no more.
func (g *selfGuard) admit(remote string) (*tunnelSlot, int, bool) {
	ap, ok := addrPort(remote)
	if !ok {
		return &tunnelSlot{release: func() {}}, 0, true
	}
	ip := ap.Addr()
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.tunnels[ip]; g.maxPerIP > 0 && n >= g.maxPerIP {
		return nil, n, false
	}
	g.tunnels[ip]++
	return &tunnelSlot{release: func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.tunnels[ip]--; g.tunnels[ip] <= 0 {
			delete(g.tunnels, ip)
		}
	}}, 0, true
}

// open is how many tunnels the clients hold, for tests.
func (g *selfGuard) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, v := range g.tunnels {
		n += v
	}
	return n
}

// slotConn is a tunnel's client connection: closing it gives its slot
// back.
type slotConn struct {
	net.Conn
	slot *tunnelSlot
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.slot.done()
	return err
}

// CloseWrite half-closes the connection when it can, and closes it
// otherwise.
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// refusals of CONNECTs, with what to do.
func tooManyTunnels(n int) string {
	return fmt.Sprintf("mcptape: refused: this client holds %d tunnels through the proxy, the most one client may at a time "+
		"(--max-tunnels-per-client); close some, or raise the bound", n)
}

const (
	msgSelfTunnel   = "mcptape: refused: a tunnel to the proxy itself would loop"
	msgNestedTunnel = "mcptape: refused: a CONNECT inside a tunnel would nest tunnels; open each tunnel on its own connection to the proxy"
)
