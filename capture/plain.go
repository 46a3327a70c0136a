package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// MaxPlainBody bounds what the recorder stores of each body of a plain
// HTTP exchange (one that carries no MCP traffic: OAuth metadata, client
// registration, authorize redirects, token requests, health checks). Such
// a body is stored as one message of kind frame, secrets redacted (see
// [RedactOptions]); a longer one is stored cut to this size, with a
// finding that counts the rest (the exchange's RequestBytes and
// ResponseBytes hold the whole sizes).
const MaxPlainBody = 64 << 10

// plainJSON reports whether body is a JSON object that is no JSON-RPC
// message (it has no "jsonrpc" member): a POST of one that carries no MCP
// header is plain HTTP, such as an OAuth dynamic client registration,
// rather than a malformed MCP request.
func plainJSON(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	_, rpc := m["jsonrpc"]
	return !rpc
}

// bufferPlain keeps the first MaxPlainBody bytes of a plain exchange's
// response body (RecorderOptions.MaxMessageSize when that is smaller).
func (xs *exchange) bufferPlain(b []byte) {
	limit := min(MaxPlainBody, xs.out.o.MaxMessageSize)
	if xs.respOver {
		return
	}
	if room := limit - len(xs.respBuf); len(b) > room {
		xs.respBuf = append(xs.respBuf, b[:room]...)
		xs.respOver = true
		return
	}
	xs.respBuf = append(xs.respBuf, b...)
}

// plainBody records a body of a plain HTTP exchange as a frame, redacted:
// decoded from its Content-Encoding first, so that its secrets can be
// found; one that cannot be decoded is not stored, only noted. over says
// that buf is only the start of a body of total bytes.
func (xs *exchange) plainBody(dir protocol.Direction, buf []byte, over bool, total int64, contentType, enc string, at time.Time) {
	if len(buf) == 0 {
		return
	}
	limit := min(MaxPlainBody, xs.out.o.MaxMessageSize)
	if len(buf) > limit {
		buf, over = buf[:limit], true
	}
	var findings []Finding
	if enc != "" && enc != "identity" {
		body, problem := decodeBody(buf, enc)
		if over || problem != "" {
			if problem == "" {
				problem = "the body was cut before its end"
			}
			xs.out.add(xs, xs.out.frameOf(xs, dir, nil, at, Finding{FindingEncoding, fmt.Sprintf(
				"%s body (%d bytes) not stored: %s, so its secrets could not be found and redacted", enc, total, problem)}), nil)
			return
		}
		buf = body
		if len(buf) > limit {
			buf, over = buf[:limit], true
		}
	}
	raw, redacted := xs.out.red.plainBody(buf, contentType)
	if redacted {
		findings = append(findings, Finding{FindingRedacted, "secrets (codes, tokens, client secrets, passwords) were removed from this body"})
	}
	if over {
		findings = append(findings, Finding{FindingOversize, fmt.Sprintf(
			"body of %d bytes: the first %d are stored, the rest is not", total, len(buf))})
	}
	xs.out.add(xs, xs.out.frameOf(xs, dir, raw, at, findings...), nil)
}
