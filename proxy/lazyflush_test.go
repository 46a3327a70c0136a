package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/proxy"
)

// TestLargeChunkFramingNotHeld: after a large write to a chunked stream
// the proxy may put its flush off, but a client that reads each chunk
// whole, closing CRLF included, before handing it on (as Python's urllib3
// does) still gets a large SSE event at once while the upstream then goes
// quiet; and the bytes that reach it are the upstream's, chunk for chunk.
func TestLargeChunkFramingNotHeld(t *testing.T) {
	const pause = 3 * time.Second
	event := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" +
		strings.Repeat("x", 190<<10) + "\"}]}}\n\n"
	last := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"late\"}}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(event))
		w.(http.Flusher).Flush()
		select {
		case <-time.After(pause):
		case <-r.Context().Done():
			return
		}
		w.Write([]byte(last))
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	rec, err := capture.NewRecorder(context.Background(), memstore.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	p, _ := proxy.New(&proxy.Options{Upstream: u, Recorder: rec})
	f := serveProxy(t, p)
	defer f.Close()
	pu, _ := url.Parse(f.URL)
	c, err := net.DialTimeout("tcp", pu.Host, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", pu.Host, len(body), body)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TransferEncoding) == 0 || res.TransferEncoding[0] != "chunked" {
		t.Fatalf("the response is not chunked (%v): the test needs it", res.TransferEncoding)
	}
	// Read the chunks off the connection itself, each whole with its CRLF,
	// as a strict client does.
	start := time.Now()
	var got strings.Builder
	for !strings.HasSuffix(got.String(), "\n\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d bytes of the event: %v", got.Len(), err)
		}
		n, err := strconv.ParseInt(strings.TrimRight(line, "\r\n"), 16, 64)
		if err != nil || n == 0 {
			t.Fatalf("chunk size line %q after %d bytes: %v", line, got.Len(), err)
		}
		chunk := make([]byte, n+2)
		if _, err := io.ReadFull(br, chunk); err != nil {
			t.Fatal(err)
		}
		if string(chunk[n:]) != "\r\n" {
			t.Fatalf("chunk of %d bytes ends %q", n, chunk[n:])
		}
		got.Write(chunk[:n])
	}
	if took := time.Since(start); took > pause/3 {
		t.Errorf("the large event's last chunk came whole after %v; the upstream paused for %v after sending it", took.Round(time.Millisecond), pause)
	}
	if got.String() != event {
		t.Errorf("the event differs: got %d bytes, want %d", got.Len(), len(event))
	}
}
