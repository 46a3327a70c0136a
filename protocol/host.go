package protocol

import (
	"net"
	"net/http"
	"strings"
)

// LoopbackHost reports whether a Host header value (a name or address,
// with or without a port) names the loopback host: localhost, a
// *.localhost name, or a loopback IP. A server listening on a loopback
// address refuses other names (go-sdk's servers do too): a page that
// rebinds its own name to 127.0.0.1 still sends that name, and so cannot
// reach the local server through the browser (DNS rebinding).
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HostAllowed is the DNS-rebinding rule of every mcptape listener (the
// proxy, the replay server, the dashboard, the recorder's local API), as go-sdk's servers apply it:
// a request that arrived on a loopback address must name a loopback host
// ([LoopbackHost]). A request that arrived elsewhere, or not from a
// listener (a handler called directly), passes.
func HostAllowed(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || la == nil {
		return true
	}
	var ip net.IP
	if ta, ok := la.(*net.TCPAddr); ok {
		ip = ta.IP
	} else if h, _, err := net.SplitHostPort(la.String()); err == nil {
		ip = net.ParseIP(h)
	}
	if ip == nil || !ip.IsLoopback() {
		return true
	}
	return LoopbackHost(r.Host)
}
