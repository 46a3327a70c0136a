package proxy

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// relay sends a request upstream and copies the response to the client:
// what httputil.ReverseProxy did for the proxy, with the same rules for
// what passes (the outbound request's headers, interim responses,
// trailers, when to flush, how a broken copy ends), in one pass over the
// exchange. What it leaves out is what the proxy never needed: a second
// clone of the request, a ClientTrace in the context to relay interim
// responses, a timer goroutine per streamed response to flush its head,
// and the wrapper that made a body held in memory look like one that
// streams (the transport then wrote the request's head and its body in
// two writes). A streamed response's head leaves with its first bytes
// when they are already in hand, and its last bytes with the response's
// end, in one write each; the stream itself is never held back.
func (p *Proxy) relay(x *exchange, in, out *http.Request) {
	rw := x.w
	if up := upgradeType(in.Header); up != "" && !printable(up) {
		p.upstreamError(rw, out, fmt.Errorf("client tried to switch to invalid protocol %q", up))
		return
	}
	x.outURL = *in.URL
	u := &x.outURL
	u.Scheme, u.Host, u.User = x.rt.up.Scheme, x.rt.up.Host, nil
	// The path exactly as the client sent it (RawPath included), less a
	// route's prefix. The query unchanged, unless some of its parameters
	// do not parse (a ';', a bad escape): then it is re-encoded without
	// them, as ReverseProxy does.
	u.Path, u.RawPath = x.upPath, x.upRaw
	u.RawQuery = cleanQueryParams(u.RawQuery)
	out.URL = u
	out.Host = x.rt.up.Host
	out.Header = outboundHeader(in.Header)
	out.Close = false
	if out.ContentLength == 0 {
		out.Body = nil // net/http's transport may then retry it
	}
	x.ir = interimRelay{w: rw}
	ir := &x.ir
	res, err := p.up.roundTrip(out, x, ir)
	ir.end()
	if err != nil {
		p.upstreamError(rw, out, err)
		return
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		removeHopByHop(res.Header)
	}
	if err := p.modifyResponse(res); err != nil {
		res.Body.Close()
		p.upstreamError(rw, out, err)
		return
	}
	h := rw.Header()
	if len(h) == 0 {
		// The response's own header map, as the upstream sent it: its
		// keys are canonical already, as Add would make them.
		for k, vv := range res.Header {
			h[k] = vv
		}
	} else {
		copyHeader(h, res.Header)
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	rw.WriteHeader(res.StatusCode)
	if err := p.copyResponse(rw, res.Body, flushes(res)); err != nil {
		defer res.Body.Close()
		if in.Context().Value(http.ServerContextKey) == nil {
			return // not under a server, which would recover the panic
		}
		panic(http.ErrAbortHandler)
	}
	if announced == 0 && len(res.Trailer) == 0 {
		// The body was read to its end, so its trailers are in: there
		// are none to add.
		rw.answer()
	}
	res.Body.Close() // now, so that res.Trailer is complete
	if len(res.Trailer) > 0 {
		// Chunked, so that the trailer can follow.
		_ = rw.FlushError()
	}
	if len(res.Trailer) == announced {
		copyHeader(h, res.Trailer)
		return
	}
	for k, vv := range res.Trailer {
		k = http.TrailerPrefix + k
		for _, v := range vv {
			h.Add(k, v)
		}
	}
}

// copyResponse copies the response body to the client. stream: every
// write is flushed as it is made (SSE, a body of unknown length), except
// the last, which leaves with the response's end: when a read returns
// bytes together with the body's end, nothing follows them to wait for.
// A stream's head is flushed at once, unless its first bytes are in hand
// already (then they go in one write).
func (p *Proxy) copyResponse(w *teeWriter, body io.Reader, stream bool) error {
	if stream {
		if r, ok := body.(readyReader); !ok || !r.ready() {
			_ = w.FlushError()
		}
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			nw, werr := w.Write(buf[:n])
			if werr != nil {
				return werr
			}
			if nw != n {
				return io.ErrShortWrite
			}
			if stream && rerr != io.EOF {
				_ = w.FlushError()
			}
		}
		if rerr != nil {
			if rerr == io.EOF {
				return nil
			}
			if rerr != context.Canceled {
				p.log.Debug("reading the upstream response body", "error", rerr)
			}
			return rerr
		}
	}
}

// readyReader is a response body that can tell, without blocking,
// whether a Read would return bytes at once (the h1 transport's).
type readyReader interface{ ready() bool }

// flushes reports whether a response is copied as a stream, each write
// flushed: SSE, and a body of unknown length (ReverseProxy's rule).
func flushes(res *http.Response) bool {
	return res.ContentLength == -1 || isEventStream(res.Header.Get("Content-Type"))
}

// isEventStream reports whether a Content-Type's media type is
// text/event-stream, as mime.ParseMediaType reads it.
func isEventStream(ct string) bool {
	const sse = "text/event-stream"
	if len(ct) >= len(sse) && strings.EqualFold(ct[:len(sse)], sse) {
		if rest := ct[len(sse):]; rest == "" {
			return true
		}
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == sse
}

// interimRelay passes the upstream's interim (1xx) responses to the
// client until the final one is in: each one's headers, then its status.
type interimRelay struct {
	w    http.ResponseWriter
	mu   sync.Mutex
	done bool
}

func (r *interimRelay) relay(code int, h http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return // the round trip is over: the header map is the response's
	}
	wh := r.w.Header()
	copyHeader(wh, h)
	r.w.WriteHeader(code)
	// WriteHeader does not clear them for an interim response.
	clear(wh)
}

func (r *interimRelay) end() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// hopHeaders are the hop-by-hop headers (RFC 9110 §7.6.1, and those
// RFC 2616 named), which are never forwarded.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		delete(h, f)
	}
}

// outboundHeader is the header forwarded upstream for a client's: a copy
// without the hop-by-hop headers (and those the client's Connection
// names), without forwarding headers the client set (Forwarded,
// X-Forwarded-*), without Expect (the proxy reads the body itself and has
// answered 100 Continue) and without any upgrade (a switched connection
// would be a tunnel nothing records); with "Te: trailers" when the client
// said it takes trailers, and an empty User-Agent when it sent none (so
// the transport adds none of its own).
func outboundHeader(in http.Header) http.Header {
	// Sized for what it keeps: a map hinted past 8 entries is a table of
	// several allocations, where up to 8 take one group.
	keys, n := 0, 0
	for k, vv := range in {
		if !dropped(k) {
			keys++
			n += len(vv)
		}
	}
	te := httpguts.HeaderValuesContainsToken(in["Te"], "trailers")
	if te {
		keys++
	}
	if _, ok := in["User-Agent"]; !ok {
		keys++
	}
	out := make(http.Header, keys)
	vs := make([]string, 0, n) // one slab for every value, as Header.Clone
	for k, vv := range in {
		if dropped(k) {
			continue
		}
		vs = append(vs, vv...)
		out[k] = vs[len(vs)-len(vv) : len(vs) : len(vs)]
	}
	for _, f := range in["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				out.Del(sf)
			}
		}
	}
	if te {
		out["Te"] = []string{"trailers"}
	}
	if _, ok := out["User-Agent"]; !ok {
		out["User-Agent"] = []string{""}
	}
	return out
}

// dropped reports a header key that outboundHeader never forwards.
func dropped(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Expect":
		return true
	}
	return false
}

func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// printable reports whether s is printable ASCII.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
}

// reencodeQuery: GODEBUG sets a query parameter limit of its own, and
// ReverseProxy then re-encodes every query.
var reencodeQuery = strings.Contains(os.Getenv("GODEBUG"), "urlmaxqueryparams=")

// cleanQueryParams is the query forwarded for a client's: unchanged when
// every parameter parses; else re-encoded from the ones that do (a ';'
// separator, a bad escape), as ReverseProxy does.
func cleanQueryParams(s string) string {
	reencode := func(s string) string {
		v, _ := url.ParseQuery(s)
		return v.Encode()
	}
	if s == "" {
		return s
	}
	if reencodeQuery || strings.Count(s, "&")+1 > 10000 {
		return reencode(s)
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
