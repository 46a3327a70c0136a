package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

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
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			break
		}
		i += j
		if i == 0 || raw[i-1] != '\r' {
			return nil
		}
		i++
		lines++
	}
	if lines < 2 || bytes.Count(raw, cr) != lines { // (lines: the request line and the Host header at least)
		return nil
	}
	head := string(raw)

	// The request line: method SP target SP version.
	eol := indexCRLF(head, 0)
	line := head[:eol]
	sp := 0
	for sp < len(line) && tokenBytes[line[sp]] {
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

	// The header lines, checked and cut, before anything is built.
	var fields [maxFastFields]field
	nf := 0
	var host, cl string
	hosts, cls := 0, 0
	for pos := eol + 2; pos < len(head); {
		eol := indexCRLF(head, pos)
		line := head[pos:eol]
		pos = eol + 2
		// The name: a token; canonical already as a client sends it
		// most of the time (textproto.CanonicalMIMEHeaderKey's check).
		colon := 0
		canon, upper := true, true
		for colon < len(line) {
			c := line[colon]
			if !tokenBytes[c] {
				break
			}
			if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
				canon = false
			}
			upper = c == '-'
			colon++
		}
		if colon == 0 || colon >= len(line) || line[colon] != ':' {
			return nil // a folded line, a space before the colon, a bad name
		}
		v := line[colon+1:]
		if !plainValue(v) {
			return nil
		}
		v = textproto.TrimString(v) // (no CR or LF is left in it to trim)
		key := line[:colon]
		if !canon {
			var kb [64]byte
			key = canonicalKey(kb[:0], key)
		}
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
		if nf == len(fields) {
			return nil
		}
		fields[nf] = field{key, v}
		nf++
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

	// The request, its URL, its header's values and its body in one
	// allocation; the values of a name in one slice, in their order, with
	// no room to grow into the next name's (as textproto cuts them).
	a := new(fastAlloc)
	u := &a.url
	if !simpleTarget(target, u) {
		pu, err := url.ParseRequestURI(target)
		if err != nil || pu.Host != "" {
			return nil
		}
		u = pu
	}
	hdr := make(http.Header, nf)
	strs := a.strs[:]
	if nf > len(strs) {
		strs = make([]string, nf)
	}
	pragma, cacheControl := "", false
	var conn []string
	for i := 0; i < nf; i++ {
		key := fields[i].key
		if key == "" {
			continue // (a name seen before: its value is in place)
		}
		k := 1
		for j := i + 1; j < nf; j++ {
			if fields[j].key == key {
				k++
			}
		}
		vv := strs[:k:k]
		strs = strs[k:]
		vv[0] = fields[i].val
		for j, m := i+1, 1; m < k; j++ {
			if fields[j].key == key {
				vv[m] = fields[j].val
				fields[j].key = ""
				m++
			}
		}
		hdr[key] = vv
		switch key {
		case "Pragma":
			pragma = vv[0]
		case "Cache-Control":
			cacheControl = true
		case "Connection":
			conn = vv
		}
	}
	if pragma == "no-cache" && !cacheControl {
		hdr["Cache-Control"] = []string{"no-cache"}
	}
	closing := httpguts.HeaderValuesContainsToken(conn, "close")
	if minor == 0 && !closing {
		closing = !httpguts.HeaderValuesContainsToken(conn, "keep-alive")
	}

	_, _ = br.Discard(end + 4)
	req := &a.req
	*req = http.Request{
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
		a.body.lr = io.LimitedReader{R: br, N: n}
		a.body.src, a.body.closing = &a.body.lr, closing
		req.Body = &a.body
	}
	return req
}

// maxFastFields is the most header lines (Host aside) a head read by
// readHeadFast may have.
const maxFastFields = 24

// field is a header line, cut.
type field struct{ key, val string }

// fastAlloc is what readHeadFast allocates for a request, in one piece.
type fastAlloc struct {
	req  http.Request
	url  url.URL
	body wireBody
	strs [12]string // (the values of a head of up to 12 lines)
}

// simpleTarget sets u to what url.ParseRequestURI makes of target when
// target's path has none of the bytes that ask more of it than a copy
// (a percent escape, a byte that the path is escaped for) and its query
// no question of its own: then the path and the raw query are the
// target's. false: u untouched.
func simpleTarget(target string, u *url.URL) bool {
	path, query, hasQuery := target, "", false
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c == '?' {
			path, query, hasQuery = target[:i], target[i+1:], true
			break
		}
		if !isPathByte[c] {
			return false
		}
	}
	if hasQuery && query == "" {
		return false // (a lone trailing "?" is ForceQuery's)
	}
	u.Path, u.RawQuery = path, query
	return true
}

var crlfcrlf, cr = []byte("\r\n\r\n"), []byte("\r")

// indexCRLF is where the line starting at from ends (head's lines all end
// with a CRLF).
func indexCRLF(head string, from int) int {
	return from + strings.IndexByte(head[from:], '\r')
}

// isPathByte says which bytes of a path url.URL keeps as they are (no
// escape to undo, none to add).
var isPathByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '/'
	}
	return t
}()
