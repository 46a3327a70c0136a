//go:build !unix

package proxy

// h1Supported: elsewhere the proxy uses net/http's transport only.
const h1Supported = false

func (c *h1Conn) clean() bool { return false }
