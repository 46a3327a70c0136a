package protocol

import (
	"net"
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
