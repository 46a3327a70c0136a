package protocol

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"
)

// HTTP header names, in their canonical Go form.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderParamPrefix     = "Mcp-Param-"
	HeaderLastEventID     = "Last-Event-Id"
)

// Content types.
const (
	ContentTypeJSON = "application/json"
	ContentTypeSSE  = "text/event-stream"
)

const (
	sentinelPrefix = "=?base64?"
	sentinelSuffix = "?="
)

// ErrBadSentinel reports an `=?base64?…?=` header value whose payload is not
// valid base64 of UTF-8 text.
var ErrBadSentinel = errors.New("malformed =?base64?…?= header value")

// DecodeHeaderValue decodes an Mcp-Name or Mcp-Param-* value: the
// `=?base64?{…}?=` sentinel form is decoded, anything else is returned as is.
func DecodeHeaderValue(v string) (string, error) {
	if !strings.HasPrefix(v, sentinelPrefix) || !strings.HasSuffix(v, sentinelSuffix) || len(v) < len(sentinelPrefix)+len(sentinelSuffix) {
		return v, nil
	}
	payload := v[len(sentinelPrefix) : len(v)-len(sentinelSuffix)]
	b, err := base64.StdEncoding.DecodeString(payload)
	if err != nil || !utf8.Valid(b) {
		return "", ErrBadSentinel
	}
	return string(b), nil
}

// EncodeHeaderValue encodes a value for an Mcp-Name or Mcp-Param-* header,
// using the sentinel form when the value has non-ASCII or control
// characters, leading or trailing whitespace, or itself looks like a
// sentinel.
func EncodeHeaderValue(v string) string {
	needs := strings.HasPrefix(v, sentinelPrefix) || strings.TrimSpace(v) != v
	for i := 0; i < len(v) && !needs; i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f {
			needs = true
		}
	}
	if !needs {
		return v
	}
	return sentinelPrefix + base64.StdEncoding.EncodeToString([]byte(v)) + sentinelSuffix
}

// HopByHop lists the hop-by-hop headers (RFC 9110 §7.6.1) a proxy does not forward.
var HopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}
