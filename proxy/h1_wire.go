package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// The h1 transport's own wire format for the shapes the proxy sends and
// most upstreams answer with: a request head written straight into the
// connection's buffer, and a response head parsed from the bytes already
// in the read buffer. net/http's Request.Write sorts the header through a
// pool and formats with fmt; ReadResponse goes through textproto, a string
// per line and a map sized by a guess. Both stay the reference: a request
// or a response outside the subset below is left to them untouched, and
// within it the bytes written and the Response built are theirs (the
// differential tests and fuzz targets in h1_wire_test.go hold them to it).

// writeRequest writes req, head and in-memory body, into bw exactly as
// req.Write would, when both fit in bw's free space and req is of a shape
// it knows: an origin-form http request with a token method (not
// CONNECT), a plain host, no Close, no Trailer, no TransferEncoding, no
// ClientTrace, header names that are tokens and values without control
// bytes, and a body that is nil, http.NoBody or an in-memory reader
// (io.NopCloser of a *bytes.Reader, *bytes.Buffer or *strings.Reader)
// holding exactly ContentLength bytes. Otherwise it writes nothing and
// reports false: the caller then calls req.Write. trace is the
// ClientTrace in req's context, looked up once by the caller.
func writeRequest(bw *bufio.Writer, req *http.Request, trace *httptrace.ClientTrace) bool {
	u := req.URL
	if u == nil || u.Opaque != "" || req.Close || req.Trailer != nil || len(req.TransferEncoding) > 0 {
		return false
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if method == http.MethodConnect || !token(method) {
		return false
	}
	var body io.WriterTo // nil: none
	n := req.ContentLength
	switch req.Body {
	case nil, http.NoBody:
		if n != 0 {
			return false
		}
	default:
		body = inMemory(req.Body, n)
		if body == nil {
			return false
		}
	}
	if trace != nil {
		return false // Write calls its hooks
	}
	host := req.Host
	if host == "" {
		host = u.Host
	}
	if !plainHost(host) {
		return false
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if !uriBytes(path) || !uriBytes(u.RawQuery) {
		return false
	}

	// The header's keys in Write's order, without those it writes
	// itself; a few on the stack.
	var keyArr [24]string
	keys := keyArr[:0]
	for k, vv := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		if !token(k) {
			return false
		}
		for _, v := range vv {
			if !plainValue(v) {
				return false
			}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ua := "Go-http-client/1.1"
	if vv, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(vv) > 0 {
			ua = vv[0]
		}
		if !plainValue(ua) {
			return false
		}
	}

	b := bw.AvailableBuffer()
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	if u.ForceQuery || u.RawQuery != "" {
		b = append(b, '?')
		b = append(b, u.RawQuery...)
	}
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	if ua != "" {
		b = append(b, "User-Agent: "...)
		b = append(b, textproto.TrimString(ua)...)
		b = append(b, "\r\n"...)
	}
	if n > 0 || n == 0 && (method == "POST" || method == "PUT" || method == "PATCH") {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, n, 10)
		b = append(b, "\r\n"...)
	}
	for _, k := range keys {
		for _, v := range req.Header[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, textproto.TrimString(v)...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	if int64(len(b))+n > int64(bw.Available()) {
		// It would not go out in one flush: Write's own way, which
		// reports a failed body write as such.
		return false
	}
	bw.Write(b)
	if body != nil {
		body.WriteTo(bw)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	return true
}

var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(bytes.NewReader(nil)))
)

// inMemory is the reader inside rc when rc is io.NopCloser of a reader
// net/http knows to be in memory (it writes a head and such a body in one
// flush) holding exactly n > 0 bytes; otherwise nil.
func inMemory(rc io.ReadCloser, n int64) io.WriterTo {
	if n <= 0 {
		return nil
	}
	switch t := reflect.TypeOf(rc); t {
	case nopCloserType, nopCloserWriterToType:
	default:
		return nil
	}
	switch r := reflect.ValueOf(rc).Field(0).Interface().(type) {
	case *bytes.Reader:
		if int64(r.Len()) == n {
			return r
		}
	case *bytes.Buffer:
		if int64(r.Len()) == n {
			return r
		}
	case *strings.Reader:
		if int64(r.Len()) == n {
			return r
		}
	}
	return nil
}

// plainHost reports a host Write sends as it is: ASCII letters, digits
// and ".-_:[]" (no zone, nothing to encode, nothing it would blank).
func plainHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// uriBytes reports a request target piece of visible ASCII only.
func uriBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// plainValue reports a header value without control bytes but HTAB, so
// that Write's only change to it is trimming spaces and tabs at its ends.
func plainValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if !valueByte(v[i]) {
			return false
		}
	}
	return true
}

// readResponse parses a response head that is whole in br's buffer and of
// a shape it knows, as http.ReadResponse would, and consumes it. The shape:
// a status line "HTTP/1.1 NNN reason" of visible bytes; header lines ending
// in CRLF, each a token name, a colon and a value without control bytes
// but HTAB, none folded; at most one Content-Length, of digits; a
// Transfer-Encoding only as exactly "chunked", and then neither a
// Content-Length nor a Trailer header; none on a response without a body
// (1xx, 204, 304); and a request that is not HEAD. Otherwise it consumes
// nothing and reports false: the caller then calls http.ReadResponse on
// the same reader.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, bool) {
	if req != nil && req.Method == http.MethodHead {
		return nil, false
	}
	p, _ := br.Peek(br.Buffered())
	i := bytes.IndexByte(p, '\n')
	if i < 13 || p[i-1] != '\r' {
		return nil, false
	}
	line := p[:i-1]
	if string(line[:9]) != "HTTP/1.1 " || len(line) > 12 && line[12] != ' ' {
		return nil, false
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return nil, false
		}
		code = code*10 + int(c-'0')
	}
	for _, c := range line[12:] {
		if !valueByte(c) {
			return nil, false
		}
	}
	status := line[9:]

	// The header's lines, checked; a few on the stack.
	var fieldArr [20]wireField
	fields := fieldArr[:0]
	vlen := 0
	pos := i + 1
	for {
		j := bytes.IndexByte(p[pos:], '\n')
		if j < 1 || p[pos+j-1] != '\r' {
			return nil, false // not whole yet, or a bare LF
		}
		l0, l1 := pos, pos+j-1
		pos += j + 1
		if l0 == l1 {
			break
		}
		colon := bytes.IndexByte(p[l0:l1], ':')
		if colon < 1 {
			return nil, false
		}
		for _, c := range p[l0 : l0+colon] {
			if !tokenByte(c) {
				return nil, false
			}
		}
		v0, v1 := l0+colon+1, l1
		for _, c := range p[v0:v1] {
			if !valueByte(c) {
				return nil, false
			}
		}
		for v0 < v1 && (p[v0] == ' ' || p[v0] == '\t') {
			v0++
		}
		for v1 > v0 && (p[v1-1] == ' ' || p[v1-1] == '\t') {
			v1--
		}
		fields = append(fields, wireField{l0, l0 + colon, v0, v1})
		vlen += v1 - v0
	}

	h := make(http.Header, len(fields))
	vs := make([]string, len(fields))
	all := string(valuesOf(p, fields, vlen))
	var kb [64]byte
	off := 0
	var saw struct{ te, cl, trailer, conn, pragma bool }
	for _, f := range fields {
		key := canonicalKey(kb[:0], p[f.k0:f.k1])
		switch key {
		case "Transfer-Encoding":
			saw.te = true
		case "Content-Length":
			saw.cl = true
		case "Trailer":
			saw.trailer = true
		case "Connection":
			saw.conn = true
		case "Pragma":
			saw.pragma = true
		}
		v := all[off : off+f.v1-f.v0]
		off += f.v1 - f.v0
		if vv := h[key]; vv == nil {
			vv, vs = vs[:1:1], vs[1:]
			vv[0] = v
			h[key] = vv
		} else {
			h[key] = append(vv, v)
		}
	}

	chunked := false
	if saw.te {
		if te := h["Transfer-Encoding"]; len(te) != 1 || te[0] != "chunked" {
			return nil, false
		}
		chunked = true
		delete(h, "Transfer-Encoding")
	}
	n := int64(-1)
	if saw.cl {
		cl := h["Content-Length"]
		if len(cl) != 1 || chunked || len(cl[0]) == 0 || len(cl[0]) > 18 {
			return nil, false
		}
		n = 0
		for _, c := range []byte(cl[0]) {
			if c < '0' || c > '9' {
				return nil, false
			}
			n = n*10 + int64(c-'0')
		}
	}
	if saw.trailer && chunked {
		return nil, false
	}
	if bodyless(code) {
		if chunked {
			return nil, false
		}
		n = 0
	}

	res := &http.Response{Status: statusText(status), StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: n, Request: req}
	if saw.conn && httpguts.HeaderValuesContainsToken(h["Connection"], "close") {
		delete(h, "Connection")
		res.Close = true
	}
	if pv := h["Pragma"]; saw.pragma && len(pv) > 0 && pv[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
	switch {
	case chunked:
		res.TransferEncoding = []string{"chunked"}
		b := &wireBody{br: br, res: res, closing: res.Close}
		b.src = httputil.NewChunkedReader(br)
		res.Body = b
	case n == 0:
		res.Body = http.NoBody
	case n > 0:
		b := &wireBody{closing: res.Close}
		b.lr = io.LimitedReader{R: br, N: n}
		b.src = &b.lr
		res.Body = b
	default:
		// Neither a length nor chunked: the body runs to the close.
		res.Close = true
		res.Body = &wireBody{src: br, closing: true}
	}
	br.Discard(pos)
	return res, true
}

// wireField is a header line's name (k0:k1) and trimmed value (v0:v1).
type wireField struct{ k0, k1, v0, v1 int }

// valuesOf is the fields' values, one after the other.
func valuesOf(p []byte, fields []wireField, n int) []byte {
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = append(b, p[f.v0:f.v1]...)
	}
	return b
}

// statusText is the status line after its protocol, interned when common.
func statusText(b []byte) string {
	switch string(b) {
	case "200 OK":
		return "200 OK"
	case "202 Accepted":
		return "202 Accepted"
	}
	return string(b)
}

// tokenByte reports a byte of an HTTP token (a header name, a method).
func tokenByte(c byte) bool { return tokenBytes[c] }

var tokenBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

// token reports a non-empty string of token bytes.
func token(s string) bool {
	for i := 0; i < len(s); i++ {
		if !tokenBytes[s[i]] {
			return false
		}
	}
	return s != ""
}

// valueByte reports a byte textproto accepts in a header value: visible
// ASCII, SP, HTAB and obs-text.
func valueByte(c byte) bool {
	return c >= ' ' && c != 0x7f || c == '\t'
}

// canonicalKey is the canonical form of the token k, as
// textproto.CanonicalMIMEHeaderKey makes it, built in buf; a name common
// in MCP traffic (its lower-case spellings from Node's fetch included) is
// interned, so that it allocates nothing.
func canonicalKey[K string | []byte](buf []byte, k K) string {
	buf = append(buf, k...)
	upper := true
	for i, c := range buf {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
		upper = c == '-'
	}
	switch string(buf) {
	case "Accept":
		return "Accept"
	case "Accept-Encoding":
		return "Accept-Encoding"
	case "Authorization":
		return "Authorization"
	case "Cache-Control":
		return "Cache-Control"
	case "Connection":
		return "Connection"
	case "Content-Encoding":
		return "Content-Encoding"
	case "Content-Length":
		return "Content-Length"
	case "Content-Type":
		return "Content-Type"
	case "Date":
		return "Date"
	case "Etag":
		return "Etag"
	case "Host":
		return "Host"
	case "Keep-Alive":
		return "Keep-Alive"
	case "Last-Event-Id":
		return "Last-Event-Id"
	case "Mcp-Session-Id":
		return "Mcp-Session-Id"
	case "Mcp-Protocol-Version":
		return "Mcp-Protocol-Version"
	case "Origin":
		return "Origin"
	case "Pragma":
		return "Pragma"
	case "Sec-Fetch-Mode":
		return "Sec-Fetch-Mode"
	case "Server":
		return "Server"
	case "Trailer":
		return "Trailer"
	case "Transfer-Encoding":
		return "Transfer-Encoding"
	case "User-Agent":
		return "User-Agent"
	case "Vary":
		return "Vary"
	case "X-Accel-Buffering":
		return "X-Accel-Buffering"
	}
	return string(buf)
}

// wireBody is a body as net/http's own for a response read by
// http.ReadResponse, or a request by http.ReadRequest: Content-Length
// limited (an early end is io.ErrUnexpectedEOF, the last bytes come with
// io.EOF; Close reads the rest unless the connection is closing), chunked
// (the trailer read into the response's at the end), or read to the
// close; http.ErrBodyReadAfterClose after Close.
type wireBody struct {
	src     io.Reader
	lr      io.LimitedReader
	br      *bufio.Reader  // chunked: where the trailer is
	res     *http.Response // chunked, until the trailer is read
	closing bool

	mu     sync.Mutex
	sawEOF bool
	closed bool
}

func (b *wireBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *wireBody) readLocked(p []byte) (n int, err error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	n, err = b.src.Read(p)
	limited := b.src == &b.lr
	if err == io.EOF {
		b.sawEOF = true
		if b.res != nil {
			if e := b.readTrailer(); e != nil {
				err = e
				b.sawEOF = false
				b.closed = true
			}
			b.res = nil
		} else if limited && b.lr.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil && n > 0 && limited && b.lr.N == 0 {
		err = io.EOF
		b.sawEOF = true
	}
	return n, err
}

var errTrailerEOF = errors.New("http: unexpected EOF reading trailer")

func (b *wireBody) readTrailer() error {
	buf, err := b.br.Peek(2)
	if bytes.Equal(buf, []byte("\r\n")) {
		b.br.Discard(2)
		return nil
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if err != nil {
		return err
	}
	if !upcomingDoubleCRLF(b.br) {
		return errors.New("http: suspiciously long trailer after chunked body")
	}
	hdr, err := textproto.NewReader(b.br).ReadMIMEHeader()
	if err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return err
	}
	if b.res.Trailer == nil {
		b.res.Trailer = http.Header(hdr)
	} else {
		for k, vv := range hdr {
			b.res.Trailer[k] = vv
		}
	}
	return nil
}

func upcomingDoubleCRLF(r *bufio.Reader) bool {
	for n := 4; ; n++ {
		buf, err := r.Peek(n)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

func (b *wireBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	var err error
	switch {
	case b.sawEOF:
	case b.res == nil && b.closing:
	default:
		_, err = io.Copy(io.Discard, wireBodyLocked{b})
	}
	b.closed = true
	return err
}

type wireBodyLocked struct{ b *wireBody }

func (l wireBodyLocked) Read(p []byte) (int, error) {
	if l.b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return l.b.readLocked(p)
}
