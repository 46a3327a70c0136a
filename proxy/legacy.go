package proxy

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcptape/mcptape/protocol"
)

// The legacy HTTP+SSE transport (2024-11-05) through a reverse route.
//
// The server's GET stream opens with an endpoint event whose data is the
// URL the client POSTs its messages to. A relative URL resolves against
// the stream's URL, which the client addressed to the proxy: it needs
// nothing, unless a route's prefix must go before an absolute path
// (/message?sessionId=… is /NAME/message?sessionId=… through route NAME).
// An absolute URL names the upstream: it becomes the proxy's, as the
// client addressed it, the route's prefix before the path, the query
// (the session's id) kept. The record keeps the upstream's bytes, and the
// exchange is marked rewritten.

// maxEndpointScan bounds what the proxy reads of a stream looking for its
// endpoint event: the event comes first; past this the stream passes
// untouched.
const (
	maxEndpointScan   = 16 << 10
	maxEndpointEvents = 4
)

// legacyStream reports whether a response may be a legacy SSE stream
// whose endpoint event a reverse route rewrites: a GET without a session
// id (a Streamable HTTP GET stream always carries one) answered with an
// event stream of unknown length.
func legacyStream(res *http.Response, x *exchange) bool {
	if x == nil || x.front.up == nil || res.Request.Method != http.MethodGet || res.StatusCode != http.StatusOK ||
		res.Request.Header.Get(protocol.HeaderSessionID) != "" || res.ContentLength >= 0 || res.Header.Get("Content-Length") != "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return err == nil && mt == protocol.ContentTypeSSE && res.Header.Get("Content-Encoding") == ""
}

// endpointBody reads an upstream's event stream, holding back its first
// events until each is whole, and rewrites the endpoint event's URL. It
// reports the upstream's bytes to the recorder itself (the exchange's
// teeWriter then records nothing), before the client can have them.
type endpointBody struct {
	io.ReadCloser
	x       *exchange
	split   protocol.SSESplitter // holds what was read, not yet handed on (scanning)
	out     []byte               // to hand on
	rec     []byte               // read, not yet reported to the recorder (scanning)
	scanned int
	events  int
	done    bool // past the scan: bytes pass as they come
	err     error
}

func (b *endpointBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		n, err := b.ReadCloser.Read(p)
		if n > 0 && b.done {
			b.x.tap.ResponseBody(p[:n])
			return n, err
		}
		if n > 0 {
			b.rec = append(b.rec, p[:n]...)
			b.scanned += n
			b.split.Feed(p[:n], b.event)
			if !b.done && b.scanned > maxEndpointScan {
				b.done = true
			}
			if b.done {
				b.out = append(b.out, b.split.Rest()...)
			}
		}
		if err != nil {
			b.out = append(b.out, b.split.Rest()...)
			b.err = err
		}
		// The upstream's bytes reach the recorder once the client is to
		// have them, after the rewrite (if any) was noted.
		if len(b.rec) > 0 && (len(b.out) > 0 || b.done) {
			b.x.tap.ResponseBody(b.rec)
			b.rec = nil
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// event takes one event from the splitter while scanning: the endpoint
// event's URL is rewritten; past the bounds, bytes pass untouched.
func (b *endpointBody) event(ev []byte, whole bool) {
	if b.done || !whole {
		b.out = append(b.out, ev...)
		b.done = true
		return
	}
	rewritten, endpoint := b.x.rewriteEndpoint(ev)
	b.out = append(b.out, rewritten...)
	b.events++
	if endpoint || b.events >= maxEndpointEvents {
		b.done = true
	}
}

// rewriteEndpoint rewrites the data of an endpoint event; endpoint reports
// whether ev was the endpoint event.
func (x *exchange) rewriteEndpoint(ev []byte) (_ []byte, endpoint bool) {
	lines := bytes.SplitAfter(ev, []byte("\n"))
	var typ string
	data := -1
	for i, l := range lines {
		t := bytes.TrimRight(l, "\r\n")
		switch {
		case bytes.HasPrefix(t, []byte("event:")):
			typ = strings.TrimSpace(string(t[len("event:"):]))
		case bytes.HasPrefix(t, []byte("data:")):
			if data >= 0 {
				return ev, typ == "endpoint" // a URL over several lines: left alone
			}
			data = i
		}
	}
	if typ != "endpoint" || data < 0 {
		return ev, false
	}
	line := lines[data]
	t := bytes.TrimRight(line, "\r\n")
	val := t[len("data:"):]
	lead := 0
	if len(val) > 0 && val[0] == ' ' {
		lead = 1
	}
	from := string(val[lead:])
	to, ok := x.front.mapEndpoint(from)
	if !ok {
		return ev, true
	}
	var out bytes.Buffer
	for i, l := range lines {
		if i != data {
			out.Write(l)
			continue
		}
		out.WriteString("data:" + string(val[:lead]) + to)
		out.Write(line[len(t):])
	}
	x.tap.Rewritten("legacy SSE endpoint " + from + " → " + to)
	return out.Bytes(), true
}

// mapEndpoint is an endpoint event's URL as a client of the proxy must
// see it; ok is false when it needs no change.
func (m frontMap) mapEndpoint(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil {
		return s, false
	}
	if u.IsAbs() || u.Host != "" {
		if u.Scheme == "" { // //host/path: the stream's scheme
			u.Scheme = m.up.Scheme
		}
		return m.mapURL(u.String())
	}
	if m.prefix != "" && strings.HasPrefix(s, "/") {
		if _, escapes := removeDotSegments(u.Path); escapes {
			return s, false // "/../" after the prefix would name another route
		}
		return m.prefix + s, true
	}
	return s, false
}
