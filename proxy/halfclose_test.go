package proxy_test

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A client that half-closes its connection once its request is sent
// (shutdown(SHUT_WR), as `nc -N` and some HTTP/1.0 clients do) can still
// read: it gets the upstream's answer or the proxy's 502, never an empty
// 200 that nobody sent; and the record says what it got.
func TestHalfClosedClient(t *testing.T) {
	r := newRig(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		time.Sleep(50 * time.Millisecond) // the client's FIN arrives first
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}), nil)
	c := rawConn(t, hostOf(r.px.URL))
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	resp := string(got)
	status := 0
	if len(resp) >= 12 && strings.HasPrefix(resp, "HTTP/1.1 ") {
		status = func() int { n, _ := strconv.Atoi(resp[9:12]); return n }()
	}
	switch {
	case status == http.StatusOK && strings.Contains(resp, `"result"`):
	case status == http.StatusBadGateway && strings.Contains(resp, `"message":"mcptape: `):
	default:
		t.Fatalf("the half-closed client read %q; want the upstream's answer or the proxy's 502", resp)
	}
	xs := r.ended(t, 1)
	if xs[0].Status != status {
		t.Errorf("recorded status %d, the client got %d", xs[0].Status, status)
	}
	if status == http.StatusBadGateway && (!xs[0].Synthesized || xs[0].Error == "") {
		t.Errorf("exchange %+v: want the proxy's 502 recorded with why", xs[0])
	}
}
