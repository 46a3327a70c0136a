package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// readHeadFast reads the head of a request of the common shape when the
// whole head is already in br's buffer, and returns the request
// http.ReadRequest returns for the same bytes; nil, with br untouched,
// for any other head (the caller reads that one with http.ReadRequest).
//
// The common shape: a token method other than CONNECT and PRI, an
// origin-form target, HTTP/1.1 or HTTP/1.0, every line ended by CRLF,
// header lines "Name: value" with a token name and a valid value (no
// folded line, no space before the colon), exactly one Host header, at
// most one Content-Length holding digits only, and no Transfer-Encoding.
// Within that shape net/http's parser has no choice to make that this
// one makes otherwise: what is left out is what it refuses, repairs
// (duplicate Content-Lengths, folded lines) or reads with rules of their
// own (CONNECT's authority, absolute targets, chunked bodies).
//
// What it saves is net/http's line-by-line reads and copies: the head is
// one string here, the request's strings are cut from it, and the
// header's values share one slice as net/http's do.
func readHeadFast(br *bufio.Reader) *http.Request {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		return nil
	}
	raw := buf[:end+2] // the request line and the header lines, each with its CRLF
	// A CR or LF on its own ends a line for net/http (or is refused by it):
	// every one must be part of a CRLF here, so that the lines are the same.
	lines := 0
	for i, c := range raw {
		switch c {
		case '\r':
			if i+1 >= len(raw) || raw[i+1] != '\n' {
				return nil
			}
			lines++
		case '\n':
			if i == 0 || raw[i-1] != '\r' {
				return nil
			}
		}
	}
	if lines < 2 { // the request line and the Host header at least
		return nil
	}
	head := string(raw)

	// The request line: method SP target SP version.
	eol := indexCRLF(head, 0)
	line := head[:eol]
	sp := 0
	for sp < len(line) && isTokenByte[line[sp]] {
		sp++
	}
	if sp == 0 || sp >= len(line) || line[sp] != ' ' {
		return nil
	}
	method := line[:sp]
	if method == http.MethodConnect || method == "PRI" {
		return nil
	}
	rest := line[sp+1:]
	sp = 0
	for sp < len(rest) && rest[sp] > ' ' && rest[sp] != 0x7f {
		sp++
	}
	if sp == 0 || sp >= len(rest) || rest[sp] != ' ' || rest[0] != '/' {
		return nil
	}
	target, proto := rest[:sp], rest[sp+1:]
	var minor int
	switch proto {
	case "HTTP/1.1":
		minor = 1
	case "HTTP/1.0":
		minor = 0
	default:
		return nil
	}
	u, err := url.ParseRequestURI(target)
	if err != nil || u.Host != "" {
		return nil
	}

	// The header: one []string cut into each key's values, as
	// textproto's reader does (a key's first value in a slice of its own
	// capacity, so that a second one is appended elsewhere).
	hdr := make(http.Header, lines-1)
	strs := make([]string, lines-1)
	var host, cl string
	hosts, cls := 0, 0
	for pos := eol + 2; pos < len(head); {
		eol := indexCRLF(head, pos)
		line := head[pos:eol]
		pos = eol + 2
		colon := 0
		for colon < len(line) && isTokenByte[line[colon]] {
			colon++
		}
		if colon == 0 || colon >= len(line) || line[colon] != ':' {
			return nil // a folded line, a space before the colon, a bad name
		}
		v := line[colon+1:]
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
				return nil
			}
		}
		v = trimSPHT(v)
		key := textproto.CanonicalMIMEHeaderKey(line[:colon])
		switch key {
		case "Host":
			host = v
			hosts++
			continue // (http.ReadRequest drops it from the header)
		case "Content-Length":
			cl = v
			cls++
		case "Transfer-Encoding":
			return nil
		}
		if vv := hdr[key]; vv != nil {
			hdr[key] = append(vv, v)
		} else {
			vv, strs = strs[:1:1], strs[1:]
			vv[0] = v
			hdr[key] = vv
		}
	}
	if hosts != 1 || cls > 1 {
		return nil
	}
	var n int64
	if cls == 1 {
		if cl == "" || len(cl) > 18 { // (18 digits cannot overflow an int64)
			return nil
		}
		for i := 0; i < len(cl); i++ {
			c := cl[i]
			if c < '0' || c > '9' {
				return nil
			}
			n = n*10 + int64(c-'0')
		}
	}
	if pv, ok := hdr["Pragma"]; ok && len(pv) > 0 && pv[0] == "no-cache" {
		if _, ok := hdr["Cache-Control"]; !ok {
			hdr["Cache-Control"] = []string{"no-cache"}
		}
	}
	conn := hdr["Connection"]
	closing := httpguts.HeaderValuesContainsToken(conn, "close")
	if minor == 0 && !closing {
		closing = !httpguts.HeaderValuesContainsToken(conn, "keep-alive")
	}

	_, _ = br.Discard(end + 4)
	req := &http.Request{
		Method:        method,
		URL:           u,
		Proto:         proto,
		ProtoMajor:    1,
		ProtoMinor:    minor,
		Header:        hdr,
		ContentLength: n,
		Close:         closing,
		Host:          host,
		RequestURI:    target,
		Body:          http.NoBody,
	}
	if n > 0 {
		b := &clBody{closing: closing}
		b.src = io.LimitedReader{R: br, N: n}
		req.Body = b
	}
	return req
}

var crlfcrlf = []byte("\r\n\r\n")

// indexCRLF is where the line starting at from ends (head's lines all end
// with a CRLF).
func indexCRLF(head string, from int) int {
	for i := from; ; i++ {
		if head[i] == '\r' {
			return i
		}
	}
}

func trimSPHT(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// isTokenByte says which bytes make up a token (a method, a header name).
var isTokenByte = func() (t [256]bool) {
	for c := range 128 {
		t[c] = httpguts.IsTokenRune(rune(c))
	}
	return t
}()

// clBody is a body of a declared length, read as net/http reads one it
// framed by its Content-Length: an io.ErrUnexpectedEOF for one cut short,
// io.EOF with the last bytes, http.ErrBodyReadAfterClose after Close,
// and a Close that reads the rest unless the connection is closing.
type clBody struct {
	src     io.LimitedReader
	closing bool

	mu     sync.Mutex
	sawEOF bool
	closed bool
}

func (b *clBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *clBody) readLocked(p []byte) (int, error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	n, err := b.src.Read(p)
	if err == io.EOF {
		b.sawEOF = true
		if b.src.N > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil && n > 0 && b.src.N == 0 {
		err = io.EOF
		b.sawEOF = true
	}
	return n, err
}

func (b *clBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	var err error
	if !b.sawEOF && !b.closing {
		_, err = io.Copy(io.Discard, clBodyLocked{b})
	}
	b.closed = true
	return err
}

// clBodyLocked reads a clBody whose mutex is held.
type clBodyLocked struct{ b *clBody }

func (l clBodyLocked) Read(p []byte) (int, error) {
	if l.b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return l.b.readLocked(p)
}
