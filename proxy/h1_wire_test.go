package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// checkWrite holds writeRequest to req.Write: for a request mk builds, it
// either declines, writing nothing, or writes exactly Write's bytes. It
// reports whether it wrote.
func checkWrite(t testing.TB, mk func() *http.Request) bool {
	t.Helper()
	var got bytes.Buffer
	bw := bufio.NewWriterSize(&got, 4<<10)
	r := mk()
	ok := writeRequest(bw, r, httptrace.ContextClientTrace(r.Context()))
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if !ok {
		if got.Len() > 0 {
			t.Fatalf("declined after writing %q", got.Bytes())
		}
		return false
	}
	var want bytes.Buffer
	if err := mk().Write(&want); err != nil {
		t.Fatalf("wrote %q where Write fails: %v", got.Bytes(), err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("wrote\n%q\nWrite writes\n%q", got.Bytes(), want.Bytes())
	}
	return true
}

type reqShape struct {
	method, host, target string
	header               http.Header
	body                 string
	kind                 int // 0 nil, 1 NoBody, 2 bytes.Reader, 3 bytes.Buffer, 4 strings.Reader, 5 a reader of its own, 6 length off by one
	close                bool
	te                   []string
	trailer              http.Header
	trace                bool
}

func (s reqShape) build() *http.Request {
	u, err := url.Parse(s.target)
	if err != nil {
		panic(err)
	}
	r := &http.Request{Method: s.method, URL: u, Host: s.host, Header: s.header.Clone(),
		Close: s.close, TransferEncoding: s.te, Trailer: s.trailer}
	if s.header == nil {
		r.Header = nil
	}
	n := int64(len(s.body))
	switch s.kind {
	case 1:
		r.Body = http.NoBody
	case 2:
		r.Body = io.NopCloser(bytes.NewReader([]byte(s.body)))
	case 3:
		r.Body = io.NopCloser(bytes.NewBufferString(s.body))
	case 4:
		r.Body = io.NopCloser(strings.NewReader(s.body))
	case 5:
		r.Body = io.NopCloser(iotest.OneByteReader(strings.NewReader(s.body)))
	case 6:
		r.Body = io.NopCloser(strings.NewReader(s.body))
		n++
	}
	if s.kind != 0 {
		r.ContentLength = n
		body := s.body
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	}
	if s.trace {
		r = r.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{}))
	}
	return r
}

func TestRequestHeadWriter(t *testing.T) {
	json := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	proxyHeader := http.Header{"Accept": {"application/json, text/event-stream"}, "Content-Type": {"application/json"},
		"Mcp-Session-Id": {"abc"}, "Mcp-Protocol-Version": {"2025-06-18"}, "User-Agent": {""}}
	writes := []reqShape{
		{method: "POST", host: "127.0.0.1:8080", target: "http://127.0.0.1:8080/mcp", header: proxyHeader, body: json, kind: 2},
		{method: "POST", host: "127.0.0.1:8080", target: "http://127.0.0.1:8080/mcp", header: proxyHeader, body: json, kind: 3},
		{method: "POST", host: "127.0.0.1:8080", target: "http://127.0.0.1:8080/mcp", header: proxyHeader, body: json, kind: 4},
		{method: "POST", host: "up", target: "http://up/mcp", header: proxyHeader},
		{method: "POST", host: "up", target: "http://up/mcp", header: proxyHeader, kind: 1},
		{method: "PUT", host: "up", target: "http://up/", kind: 1},
		{method: "PATCH", host: "up", target: "http://up/"},
		{method: "GET", host: "up", target: "http://up/mcp", header: proxyHeader},
		{method: "GET", host: "up", target: "http://up/mcp", header: proxyHeader, kind: 1},
		{method: "DELETE", host: "up", target: "http://up/mcp", header: http.Header{}},
		{method: "", host: "", target: "http://up", header: nil},
		{method: "get", host: "[::1]:80", target: "http://[::1]:80/a%2Fb?x=1&y=%20", header: http.Header{"X": {" a ", "\tb\t", ""}}},
		{method: "GET", target: "http://up/p?", header: http.Header{"User-Agent": {"  me  "}}},
		{method: "GET", target: "http://up/p", header: http.Header{"User-Agent": {"   "}}},
		{method: "GET", target: "http://up/p", header: http.Header{"User-Agent": {}}},
		{method: "GET", target: "http://up/p", header: http.Header{"User-Agent": {"a", "b"}}},
		{method: "GET", target: "http://up/caf%C3%A9/x", header: http.Header{"Host": {"other"}, "Content-Length": {"9"},
			"Transfer-Encoding": {"chunked"}, "Trailer": {"X"}, "content-length": {"7"}, "x-lower": {"v"}, "Empty": {}}},
		{method: "GET", target: "http://up/%7Efoo", header: http.Header{"Zz": {"1"}, "Aa": {"2"}, "A": {"3"}, "B-": {"é"}}},
		{method: "OPTIONS", target: "http://up/*"},
		{method: "POST", host: "up", target: "http://up/", body: "x", kind: 2},
		{method: "POST", host: "up", target: "http://up/", body: strings.Repeat("y", 3000), kind: 2},
	}
	for i, s := range writes {
		if !checkWrite(t, s.build) {
			t.Errorf("%d: declined %+v", i, s)
		}
	}
	declines := []reqShape{
		{method: "CONNECT", target: "http://up:80"},
		{method: "BAD METHOD", target: "http://up/"},
		{method: "G\r\nET", target: "http://up/"},
		{method: "POST", target: "http://up/", body: "abc", kind: 5},
		{method: "POST", target: "http://up/", body: "abc", kind: 6},
		{method: "POST", target: "http://up/", body: strings.Repeat("y", 5000), kind: 2},
		{method: "POST", target: "http://up/", body: "abc", kind: 2, close: true},
		{method: "POST", target: "http://up/", body: "abc", kind: 2, te: []string{"chunked"}},
		{method: "POST", target: "http://up/", body: "abc", kind: 2, trailer: http.Header{"X": nil}},
		{method: "POST", target: "http://up/", body: "abc", kind: 2, trace: true},
		{method: "GET", host: "bücher.example", target: "http://up/"},
		{method: "GET", host: "[fe80::1%en0]:80", target: "http://up/"},
		{method: "GET", host: "a b", target: "http://up/"},
		{method: "GET", host: "a/b", target: "http://up/"},
		{method: "GET", target: "mailto:x@y"},
		{method: "GET", target: "http://up/?a b"},
		{method: "GET", target: "http://up/", header: http.Header{"X": {"a\r\nEvil: 1"}}},
		{method: "GET", target: "http://up/", header: http.Header{"X": {"a\x00"}}},
		{method: "GET", target: "http://up/", header: http.Header{"Bad Key": {"a"}}},
		{method: "GET", target: "http://up/", header: http.Header{"Bad\r\nKey": {"a"}}},
		{method: "GET", target: "http://up/", header: http.Header{"User-Agent": {"x\ny"}}},
		{method: "GET", target: "http://up/", header: http.Header{"X": {strings.Repeat("v", 5000)}}},
	}
	for i, s := range declines {
		if checkWrite(t, s.build) {
			t.Errorf("%d: wrote %+v", i, s)
		}
	}
	// A request with a body of unknown length, and one whose URL has
	// control bytes in its path, are Write's.
	checkWrite(t, func() *http.Request {
		r, _ := http.NewRequest("POST", "http://up/", io.MultiReader(strings.NewReader("abc")))
		return r
	})
	checkWrite(t, func() *http.Request {
		return &http.Request{Method: "GET", URL: &url.URL{Path: "/a\x01b", RawPath: "/a\x01b"}, Header: http.Header{}}
	})
	checkWrite(t, func() *http.Request {
		return &http.Request{Method: "GET", URL: &url.URL{Path: "/a b", RawQuery: "q"}, Header: http.Header{}}
	})
	checkWrite(t, func() *http.Request {
		return &http.Request{Method: "GET", URL: &url.URL{Path: "/", RawQuery: "a\x7f"}, Header: http.Header{}}
	})
	checkWrite(t, func() *http.Request {
		return &http.Request{Method: "GET", URL: &url.URL{Path: "/a/b", RawPath: "/a%2Fb", ForceQuery: true}, Header: http.Header{}}
	})
}

// FuzzRequestHeadWriter builds requests from the fuzzer's methods, hosts,
// URLs, header lines and bodies: writeRequest either declines or writes
// exactly Write's bytes.
func FuzzRequestHeadWriter(f *testing.F) {
	f.Add("POST", "127.0.0.1:8080", "http://127.0.0.1:8080/mcp", "/mcp", "", "", "Content-Type: application/json\nUser-Agent:\nMcp-Session-Id: x", []byte(`{"a":1}`), uint8(2))
	f.Add("GET", "", "http://up/a%2Fb?x", "/a/b", "/a%2Fb", "x=1", "User-Agent:  me \nX: a\nx: b", []byte{}, uint8(0))
	f.Add("", "[::1]", "/", "", "", "", "Host: h\nContent-Length: 3\nA: \t", []byte("abc"), uint8(3))
	f.Add("DELETE", "h", "http://h/", "/\x00", "", "a b", "Te: trailers", []byte("abc"), uint8(6))
	f.Fuzz(func(t *testing.T, method, host, rawURL, path, rawPath, rawQuery, header string, body []byte, kind uint8) {
		u, err := url.Parse(rawURL)
		if err != nil {
			u = &url.URL{}
		}
		if kind&8 != 0 {
			u.Path, u.RawPath, u.RawQuery = path, rawPath, rawQuery
		}
		u.ForceQuery = kind&16 != 0
		h := http.Header{}
		for line := range strings.SplitSeq(header, "\n") {
			k, v, _ := strings.Cut(line, ":")
			if kind&32 != 0 {
				h.Add(k, v) // canonical
			} else {
				h[k] = append(h[k], v)
			}
		}
		s := reqShape{method: method, host: host, body: string(body), kind: int(kind & 7), close: kind&64 != 0}
		if s.kind == 7 {
			s.kind = 2
			s.te = []string{"chunked"}
		}
		checkWrite(t, func() *http.Request {
			r := s.build0(u)
			r.Header = h.Clone()
			return r
		})
	})
}

// build0 is build with a URL of the caller's.
func (s reqShape) build0(u *url.URL) *http.Request {
	s.target = "http://x/"
	r := s.build()
	uu := *u
	r.URL = &uu
	return r
}

// readTrace is the reads of a body through a small buffer, to its end.
func readTrace(b io.ReadCloser) string {
	var out strings.Builder
	p := make([]byte, 7)
	for i := 0; i < 1<<16; i++ {
		n, err := b.Read(p)
		fmt.Fprintf(&out, "%q %v|", p[:n], err)
		if err != nil {
			break
		}
	}
	fmt.Fprintf(&out, "close %v|", b.Close())
	n, err := b.Read(p)
	fmt.Fprintf(&out, "after %d %v", n, err)
	return out.String()
}

// checkRead holds readResponse to http.ReadResponse for the response in
// data, whole in the reader's buffer: it declines, consuming nothing, or
// gives the same Response, whose body reads the same, and leaves the
// same bytes after it. It reports whether it read.
func checkRead(t testing.TB, data []byte, method string) bool {
	t.Helper()
	fill := func() *bufio.Reader {
		br := bufio.NewReaderSize(bytes.NewReader(data), len(data)+16)
		br.Peek(len(data))
		return br
	}
	req := &http.Request{Method: method}
	br1, br2 := fill(), fill()
	res1, ok := readResponse(br1, req)
	if !ok {
		if br1.Buffered() != len(data) {
			t.Fatalf("declined after consuming %d bytes", len(data)-br1.Buffered())
		}
		return false
	}
	res2, err := http.ReadResponse(br2, req)
	if err != nil {
		t.Fatalf("read %q where ReadResponse fails: %v", data, err)
	}
	type fields struct {
		Status                 string
		StatusCode             int
		Proto                  string
		ProtoMajor, ProtoMinor int
		Header                 http.Header
		ContentLength          int64
		TransferEncoding       []string
		Close, Uncompressed    bool
		Trailer                http.Header
		Request                *http.Request
		NoBody                 bool
		Rest                   int
	}
	of := func(r *http.Response, br *bufio.Reader) fields {
		return fields{r.Status, r.StatusCode, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Header, r.ContentLength, r.TransferEncoding,
			r.Close, r.Uncompressed, r.Trailer, r.Request, r.Body == http.NoBody, br.Buffered()}
	}
	if f1, f2 := of(res1, br1), of(res2, br2); !reflect.DeepEqual(f1, f2) {
		t.Fatalf("for %q:\nread       %+v\nReadResponse %+v", data, f1, f2)
	}
	if b1, b2 := readTrace(res1.Body), readTrace(res2.Body); b1 != b2 {
		t.Fatalf("for %q: the body reads\n%s\nReadResponse's\n%s", data, b1, b2)
	}
	if f1, f2 := of(res1, br1), of(res2, br2); !reflect.DeepEqual(f1, f2) {
		t.Fatalf("for %q, after the body:\nread       %+v\nReadResponse %+v", data, f1, f2)
	}
	return true
}

func TestResponseHeadReader(t *testing.T) {
	type shape struct {
		head, method string
		fast         bool
	}
	shapes := []shape{
		{"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\nhello", "POST", true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", "POST", true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello, and more", "POST", true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 007\r\n\r\nhello, and more", "POST", true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "POST", true},
		{"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nMcp-Session-Id: s\r\n\r\n", "POST", true},
		{"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "POST", true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\nx-t: 2\r\n\r\nrest", "GET", true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n", "GET", true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n", "GET", true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", "GET", true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", "GET", true},
		{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "GET", true},
		{"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nX: y\r\n\r\nto the end", "GET", true},
		{"HTTP/1.1 200 OK\r\nX: y\r\n\r\nto the end", "GET", true},
		{"HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx", "GET", true},
		{"HTTP/1.1 200 \r\nContent-Length: 1\r\n\r\nx", "GET", true},
		{"HTTP/1.1 599 Whatever \xff it is\r\nContent-Length: 1\r\n\r\nx", "GET", true},
		{"HTTP/1.1 000 zero\r\nContent-Length: 1\r\n\r\nx", "GET", true},
		{"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", "GET", true},
		{"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nContent-Type: x\r\n\r\n", "GET", true},
		{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", "GET", true},
		{"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nraw", "GET", true},
		{"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n", "GET", true},
		{"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nCache-Control: max-age=1\r\nContent-Length: 0\r\n\r\n", "GET", true},
		{"HTTP/1.1 200 OK\r\nTrailer: X\r\nContent-Length: 0\r\n\r\n", "GET", true},
		{"HTTP/1.1 200 OK\r\nset-cookie: a\r\nSET-COOKIE: b\r\nx-Weird-KEY: \t v \t \r\nE:\r\n\r\n", "GET", true},
		{"HTTP/1.1 200 OK\r\nX: a\"b\\c\x80\xff\r\nContent-Length: 0\r\n\r\n", "GET", true},

		// Hostile or rare: ReadResponse's.
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n0\r\n\r\n", "GET", false},
		{"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\nContent-Length: 0\n\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nX: a\r\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\n Content-Length: 5\r\n\r\nhello", "GET", false},
		{"HTTP/1.1 200 OK\r\nX: a\r\n  folded\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\n: novalue\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nBad\x7fKey: 1\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nÜ: 1\r\n\r\n", "GET", false},
		{"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 +20 OK\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200\tOK\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r", "GET", false},
		{"HTTP/1.1 200 OK", "GET", false},
		{"", "GET", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "HEAD", false},
	}
	for i, s := range shapes {
		if got := checkRead(t, []byte(s.head), s.method); got != s.fast {
			t.Errorf("%d: %q: read %v, want %v", i, s.head, got, s.fast)
		}
	}

	// A head that has not arrived whole is ReadResponse's.
	br := bufio.NewReader(iotest.OneByteReader(strings.NewReader("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")))
	br.Peek(1)
	if _, ok := readResponse(br, nil); ok || br.Buffered() != 1 {
		t.Errorf("read a head not yet whole in the buffer")
	}
}

// FuzzResponseHeadReader holds readResponse to http.ReadResponse for the
// fuzzer's bytes: it declines, or builds the same Response whose body
// reads the same bytes and errors.
func FuzzResponseHeadReader(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nA: b\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nConnection: close\r\nPragma: no-cache\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX: y\r\n\r\nrest",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		m := "POST"
		if head {
			m = "HEAD"
		}
		checkRead(t, data, m)
	})
}

// TestH1HeadBound: a response head over the transport's bound ends the
// round trip with net/http's error, whether its start is in the buffer or
// not; one within it is read.
func TestH1HeadBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	heads := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, <-heads)
				io.Copy(io.Discard, br)
			}()
		}
	}()
	h := newH1Transport(&http.Transport{MaxResponseHeaderBytes: 1024})
	defer h.CloseIdleConnections()
	for _, tc := range []struct {
		head, err string
	}{
		{"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("v", 2000) + "\r\nContent-Length: 2\r\n\r\nok", "net/http: server response headers exceeded 1024 bytes; aborted"},
		{"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("v", 900) + "\r\nContent-Length: 2\r\n\r\nok", ""},
	} {
		heads <- tc.head
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/", strings.NewReader("{}"))
		res, err := h.RoundTrip(req)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("error %v, want %q", err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		if err != nil || string(b) != "ok" {
			t.Errorf("body %q, %v", b, err)
		}
	}
}

// benchRequest is a request as the relay builds it for an echo call.
func benchRequest() *http.Request {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	u, _ := url.Parse("http://127.0.0.1:8080/mcp")
	r := &http.Request{Method: "POST", URL: u, Host: u.Host, ContentLength: int64(len(body)), Header: http.Header{
		"Accept": {"application/json, text/event-stream"}, "Content-Type": {"application/json"},
		"Mcp-Session-Id": {"6f1c0a4e-3b0e-4f8e-9d61-1a2b3c4d5e6f"}, "Mcp-Protocol-Version": {"2025-06-18"}, "User-Agent": {""}}}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r
}

// BenchmarkRequestHead writes an echo call's request: own is
// writeRequest, net/http is Request.Write.
func BenchmarkRequestHead(b *testing.B) {
	op := func(own bool) func() {
		r := benchRequest()
		rd := bytes.NewReader(nil)
		body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
		r.Body = io.NopCloser(rd)
		bw := bufio.NewWriterSize(io.Discard, 4<<10)
		return func() {
			rd.Reset(body)
			if own {
				if !writeRequest(bw, r, nil) {
					b.Fatal("declined")
				}
			} else if err := r.Write(bw); err != nil {
				b.Fatal(err)
			}
			bw.Flush()
		}
	}
	own, ref := op(true), op(false)
	ownAgainstNetHTTP(b, "writing a request with its body in memory", own, ref)
}

// ownAgainstNetHTTP runs own, one of the proxy's own head readers and
// writer at work, and ref, net/http's way to do the same, as the
// sub-benchmarks own and net/http. Their target: own makes fewer
// allocations than ref (that is what the own ones are for). Allocation
// counts do not move with the machine's load, so a miss is a real one.
func ownAgainstNetHTTP(b *testing.B, what string, own, ref func()) {
	b.Helper()
	o, r := testing.AllocsPerRun(100, own), testing.AllocsPerRun(100, ref)
	b.Logf("%s: %.0f allocations, net/http's %.0f", what, o, r)
	if o >= r {
		b.Errorf("target missed: %s makes %.0f allocations, no fewer than net/http's %.0f", what, o, r)
	}
	for _, bc := range []struct {
		name string
		run  func()
	}{{"own", own}, {"net/http", ref}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.run()
			}
		})
	}
}

// BenchmarkResponseHead reads an echo call's response head: own is
// readResponse, net/http is ReadResponse.
func BenchmarkResponseHead(b *testing.B) {
	data := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: 6f1c0a4e-3b0e-4f8e-9d61-1a2b3c4d5e6f\r\n" +
		"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 77\r\n\r\n" +
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}]}}`)
	op := func(own bool) func() {
		rd := bytes.NewReader(data)
		br := bufio.NewReaderSize(rd, 32<<10)
		req := benchRequest()
		return func() {
			rd.Reset(data)
			br.Reset(rd)
			br.Peek(1)
			res, ok := (*http.Response)(nil), false
			if own {
				if res, ok = readResponse(br, req); !ok {
					b.Fatal("declined")
				}
			}
			if !ok {
				var err error
				if res, err = http.ReadResponse(br, req); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := io.Copy(io.Discard, res.Body); err != nil {
				b.Fatal(err)
			}
		}
	}
	own, ref := op(true), op(false)
	// (the body read to its end counts on both sides)
	ownAgainstNetHTTP(b, "reading a response head and its small body", own, ref)
}
