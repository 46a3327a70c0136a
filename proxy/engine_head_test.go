package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// headCases are request heads (and what follows them) of the shapes the
// fast head reader takes, and of those it must leave to net/http: fast
// says which.
var headCases = []struct {
	name string
	raw  string
	fast bool
}{
	{"get", "GET /mcp HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"post with body", "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello", true},
	{"post body then next", "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"short body", "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", true},
	{"zero length", "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", true},
	{"leading zeros", "POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 0003\r\n\r\nabcdef", true},
	{"length with spaces around", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:   3  \r\n\r\nabc", true},
	{"length with tab", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t3\t\r\n\r\nabc", true},
	{"length huge", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 999999999999999999\r\n\r\nabc", true},
	{"length 19 digits", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\nabc", false},
	{"length overflow", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\nabc", false},
	{"length plus", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", false},
	{"length minus", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -3\r\n\r\nabc", false},
	{"length inner space", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\nabc", false},
	{"length empty", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\nabc", false},
	{"length hex", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x3\r\n\r\nabc", false},
	{"length underscore", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1_0\r\n\r\nabc", false},
	{"two equal lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", false},
	{"two lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", false},
	{"length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc", false},
	{"cl and te", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false},
	{"te chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false},
	{"te on 1.0", "POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", false},
	{"te lower", "POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", false},
	{"te identity", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", false},
	{"lowercase names", "POST /mcp HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\naccept: application/json, text/event-stream\r\nmcp-session-id: abc\r\nx-weird_name: 1\r\n\r\n{}", true},
	{"mixed case names", "GET / HTTP/1.1\r\nhOsT: a\r\nCONTENT-TYPE: x\r\nx-A-b-C: y\r\n\r\n", true},
	{"repeated header", "GET / HTTP/1.1\r\nHost: a\r\nAccept: a\r\nX: 1\r\naccept: b\r\nACCEPT: c\r\n\r\n", true},
	{"empty value", "GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nY:   \r\n\r\n", true},
	{"value spaces", "GET / HTTP/1.1\r\nHost: a\r\nX:  a  b \t \r\n\r\n", true},
	{"value no space", "GET / HTTP/1.1\r\nHost:a\r\nX:b\r\n\r\n", true},
	{"value colon", "GET / HTTP/1.1\r\nHost: a:80\r\nX: b: c\r\n\r\n", true},
	{"value non-ascii", "GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9 \xff\x80\r\n\r\n", true},
	{"value nul", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", false},
	{"value del", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n", false},
	{"value ctl", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", false},
	{"value cr", "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", false},
	{"cr cr lf", "GET / HTTP/1.1\r\nHost: a\r\r\n\r\n", false},
	{"bare lf header", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", false},
	{"bare lf request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", false},
	{"bare lf end", "GET / HTTP/1.1\r\nHost: a\r\n\n\r\n\r\n", false},
	{"all bare lf", "GET / HTTP/1.1\nHost: a\n\n", false},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n", false},
	{"obs-fold tab", "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n", false},
	{"first header folded", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", false},
	{"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", false},
	{"space before colon cl", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 3\r\n\r\nabc", false},
	{"tab before colon", "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", false},
	{"no colon", "GET / HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n", false},
	{"empty name", "GET / HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n", false},
	{"bad name", "GET / HTTP/1.1\r\nHost: a\r\nX(y): v\r\n\r\n", false},
	{"non-ascii name", "GET / HTTP/1.1\r\nHost: a\r\nX\xc3\xa9: v\r\n\r\n", false},
	{"no host", "GET / HTTP/1.1\r\n\r\n", false},
	{"no host 1.0", "GET / HTTP/1.0\r\n\r\n", false},
	{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false},
	{"two hosts same", "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", false},
	{"empty host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", true},
	{"bad host", "GET / HTTP/1.1\r\nHost: a b/c\r\n\r\n", true},
	{"host with port", "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", true},
	{"absolute form", "GET http://a/mcp HTTP/1.1\r\nHost: b\r\n\r\n", false},
	{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"connect authority", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", false},
	{"connect path", "CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"pri", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", false},
	{"pri path", "PRI / HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"http 1.0", "GET / HTTP/1.0\r\nHost: a\r\n\r\n", true},
	{"http 1.0 keep-alive", "GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n", true},
	{"http 1.0 keep-alive close", "GET / HTTP/1.0\r\nHost: a\r\nConnection: Keep-Alive, close\r\n\r\n", true},
	{"http 1.0 body", "POST / HTTP/1.0\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcdef", true},
	{"http 1.0 no length", "POST / HTTP/1.0\r\nHost: a\r\n\r\nabcdef", true},
	{"connection close", "POST / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabcdef", true},
	{"connection list", "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade, CLOSE\r\nUpgrade: websocket\r\n\r\n", true},
	{"connection two lines", "GET / HTTP/1.1\r\nHost: a\r\nConnection: foo\r\nConnection: close\r\n\r\n", true},
	{"http 1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", false},
	{"http 2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", false},
	{"http 0.9", "GET / HTTP/0.9\r\nHost: a\r\n\r\n", false},
	{"http lower", "GET / http/1.1\r\nHost: a\r\n\r\n", false},
	{"version space", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", false},
	{"no version", "GET /\r\nHost: a\r\n\r\n", false},
	{"two spaces", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"space in target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"tab in target", "GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"nul in target", "GET /a\x00b HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"del in target", "GET /a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"empty target", "GET  HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"lowercase method", "get / HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"odd method", "M-SEARCH / HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"bad method", "GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"non-ascii method", "G\xc3\x89T / HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"leading crlf", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"leading space", " GET / HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"percent path", "GET /a%20b/%2F%c3%A9?q=%41&x=%zz#frag HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"bad percent path", "GET /a%zzb HTTP/1.1\r\nHost: a\r\n\r\n", false},
	{"query", "GET /mcp?sessionId=abc&x=%20y HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"double slash", "GET //evil.example/x HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"non-ascii path", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"dot segments", "GET /a/../b/./c HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"pragma", "GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n", true},
	{"pragma and cache-control", "GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\nCache-Control: max-age=1\r\n\r\n", true},
	{"pragma other", "GET / HTTP/1.1\r\nHost: a\r\nPragma: x\r\nPragma: no-cache\r\n\r\n", true},
	{"trailer header", "POST / HTTP/1.1\r\nHost: a\r\nTrailer: X\r\nContent-Length: 1\r\n\r\nz", true},
	{"expect", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz", true},
	{"head unfinished", "GET / HTTP/1.1\r\nHost: a\r\n", false},
	{"head unfinished cr", "GET / HTTP/1.1\r\nHost: a\r\n\r", false},
	{"empty", "", false},
	{"just crlfs", "\r\n\r\n", false},
	{"request line only", "GET / HTTP/1.1\r\n\r\n", false},
	{"mcp call", "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:41234\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 58\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMcp-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: 4XJ4YV6QW2\r\nAccept-Encoding: gzip\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, true},
	{"long head", "GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("v", 3900) + "\r\n\r\n", true},
	{"head past the buffer", "GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("v", 4100) + "\r\n\r\n", false},
	{"node fetch call", "POST /mcp HTTP/1.1\r\nhost: localhost:3000\r\nconnection: keep-alive\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\nmcp-session-id: 0c1d\r\nlast-event-id: 7\r\naccept-language: *\r\nsec-fetch-mode: cors\r\nuser-agent: node\r\naccept-encoding: gzip, deflate\r\ncontent-length: 2\r\n\r\n{}", true},
	{"names near the buffer", "GET / HTTP/1.1\r\nHost: a\r\nmcp-session-idx: 1\r\nmCP-sESSION-iD: 2\r\n" + strings.Repeat("x", 32) + ": 3\r\n" + strings.Repeat("y", 33) + ": 4\r\n\r\n", true},
	{"path unreserved", "GET /a-b_c.d~e/F0/%7E HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"24 header lines", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-Many: 1\r\nx-other: 2\r\n", 12) + "\r\n", true},
	{"25 header lines", "GET / HTTP/1.1\r\n" + strings.Repeat("X-Many: 1\r\n", 20) + "Host: a\r\n" + strings.Repeat("X-Many: 1\r\n", 5) + "\r\n", false},
	{"200 header lines", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-Many: 1\r\n", 200) + "\r\n", false},
	{"interleaved repeats", "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\na: 3\r\nHost: h\r\nC: 4\r\nb: 5\r\nA: 6\r\n\r\n", true},
	{"query forms", "GET /p?a=1?b=%zz&c#d HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"force query", "GET /p? HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"two question marks", "GET /p?? HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"path reserved bytes", "GET /a;b,c=d:e@f$g&h+i!j*k'l(m)n HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"path escapes", "GET /a%2fb%41 HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"path hash", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", true},
	{"path brackets", "GET /[a]{b}|c^d`e\\f\"g<h> HTTP/1.1\r\nHost: a\r\n\r\n", true},
}

func TestReadHeadFast(t *testing.T) {
	for _, tc := range headCases {
		t.Run(tc.name, func(t *testing.T) {
			if took := checkHeadFast(t, []byte(tc.raw)); took != tc.fast {
				t.Errorf("fast path took it: %v, want %v", took, tc.fast)
			}
		})
	}
}

// FuzzRequestHeadParser checks that the fast head reader either leaves
// a head to net/http, untouched, or reads the request http.ReadRequest
// reads from the same bytes: the same fields, the same body bytes and
// errors, the same Close, and the same bytes left for the next request.
//
//	go test -run '^$' -fuzz '^FuzzRequestHeadParser$' -fuzztime 60s -parallel 1 ./proxy/
func FuzzRequestHeadParser(f *testing.F) {
	for _, tc := range headCases {
		f.Add([]byte(tc.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkHeadFast(t, raw)
	})
}

// checkHeadFast compares readHeadFast with http.ReadRequest on raw, as
// the engine's reader holds it (one read of up to 4 KiB in a 4 KiB
// buffer), and reports whether the fast path took it.
func checkHeadFast(t *testing.T, raw []byte) bool {
	t.Helper()
	took := false
	// Each way of ending the body: read to its end then closed, closed
	// after a byte, closed unread.
	for _, mode := range []int{-1, 1, 0} {
		br := bufio.NewReaderSize(bytes.NewReader(raw), 4<<10)
		_, _ = br.Peek(1)
		before := br.Buffered()
		got := readHeadFast(br)
		if got == nil {
			if br.Buffered() != before {
				t.Fatalf("declined but consumed %d bytes", before-br.Buffered())
			}
			return false
		}
		took = true
		ref := bufio.NewReaderSize(bytes.NewReader(raw), 4<<10)
		want, err := http.ReadRequest(ref)
		if err != nil {
			t.Fatalf("took a head http.ReadRequest refuses (%v): %q", err, raw)
		}
		if diff := requestDiff(got, want); diff != "" {
			t.Fatalf("%s\n  input: %q", diff, raw)
		}
		g, w := endBody(got.Body, mode), endBody(want.Body, mode)
		if g != w {
			t.Fatalf("body (mode %d):\n  fast:     %s\n  net/http: %s\n  input: %q", mode, g, w, raw)
		}
		gr, _ := io.ReadAll(br)
		wr, _ := io.ReadAll(ref)
		if !bytes.Equal(gr, wr) {
			t.Fatalf("left for the next request (mode %d):\n  fast:     %q\n  net/http: %q", mode, gr, wr)
		}
	}
	return took
}

// requestDiff says how two requests read from the same bytes differ in
// anything but their body's reader.
func requestDiff(got, want *http.Request) string {
	if (got.Body == http.NoBody) != (want.Body == http.NoBody) {
		return fmt.Sprintf("Body: fast %T, net/http %T", got.Body, want.Body)
	}
	g, w := *got, *want
	g.Body, w.Body = nil, nil
	if reflect.DeepEqual(g, w) {
		return ""
	}
	var b strings.Builder
	gv, wv := reflect.ValueOf(g), reflect.ValueOf(w)
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if !f.IsExported() {
			if !reflect.DeepEqual(gv.Field(i).IsZero(), wv.Field(i).IsZero()) {
				fmt.Fprintf(&b, "%s: fast zero %v, net/http zero %v\n", f.Name, gv.Field(i).IsZero(), wv.Field(i).IsZero())
			}
			continue
		}
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			fmt.Fprintf(&b, "%s: fast %#v, net/http %#v\n", f.Name, gv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
	if b.Len() == 0 {
		return "the requests differ in a field not listed"
	}
	return b.String()
}

// endBody reads a body as mode says and tells what happened: mode -1
// reads it to its end in small reads, a mode n >= 0 reads n bytes; then
// each closes it, and reads it once more.
func endBody(rc io.ReadCloser, mode int) string {
	var b strings.Builder
	var got []byte
	var err error
	p := make([]byte, 3)
	for mode < 0 || len(got) < mode {
		size := len(p)
		if mode >= 0 {
			size = min(size, mode-len(got))
		}
		var n int
		n, err = rc.Read(p[:size])
		got = append(got, p[:n]...)
		if err != nil {
			break
		}
	}
	fmt.Fprintf(&b, "read %q, %v; ", got, err)
	n, err := rc.Read(p[:0])
	fmt.Fprintf(&b, "an empty read: %d, %v; ", n, err)
	fmt.Fprintf(&b, "close: %v; ", rc.Close())
	n, err = rc.Read(p)
	fmt.Fprintf(&b, "then: %d, %v; ", n, err)
	fmt.Fprintf(&b, "close again: %v", rc.Close())
	return b.String()
}

// BenchmarkReadHead reads a tools/call head as a Go MCP client sends it
// and one as a client using Node's fetch does, with the fast reader and
// with http.ReadRequest.
func BenchmarkReadHead(b *testing.B) {
	for _, name := range []string{"mcp call", "node fetch call"} {
		b.Run(strings.ReplaceAll(name, " ", "-"), func(b *testing.B) { benchmarkReadHead(b, name) })
	}
}

func benchmarkReadHead(b *testing.B, name string) {
	var raw []byte
	for _, tc := range headCases {
		if tc.name == name {
			raw = []byte(tc.raw)
		}
	}
	op := func(read func(*bufio.Reader) *http.Request) func() {
		rd := bytes.NewReader(raw)
		br := bufio.NewReaderSize(rd, 4<<10)
		return func() {
			rd.Reset(raw)
			br.Reset(rd)
			_, _ = br.Peek(1)
			if read(br) == nil {
				b.Fatal("not read")
			}
		}
	}
	fast := op(readHeadFast)
	ref := op(func(br *bufio.Reader) *http.Request { req, _ := http.ReadRequest(br); return req })
	ownAgainstNetHTTP(b, "reading a request head of the common shape", fast, ref)
}
