package replay_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/replay"
)

// Helpers of the exactness tests: what a client gets over HTTP, through
// the recorder and from the replay of that recording, compared whole.

// got is what a client got for one HTTP request: its status, its headers
// (but those of the connection, with session ids masked), its body.
type got struct {
	Request string
	Status  int
	Header  map[string]string
	Body    string
}

// sidMask stands for a session id in what tests compare: the replay
// mints its own.
const sidMask = "<session id>"

// connHeaders are response headers of the connection, not of the answer:
// how a body is framed (its length given, or chunked) is the connection's
// too, and varies from one response of a server to the next (the body
// itself is compared).
var connHeaders = []string{"Date", "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length"}

// send makes one request (no body for GET, OPTIONS and DELETE when body
// is "") and returns what came back, and the Mcp-Session-Id it carried.
// A text/event-stream body is read until the stream ends or holds a
// JSON-RPC response (a GET stream stays open: cut it with a short ctx).
func send(t *testing.T, ctx context.Context, method, u, body string, h map[string]string) (got, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for k, v := range h {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	var b strings.Builder
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		br := bufio.NewReader(res.Body)
		for {
			line, err := br.ReadString('\n')
			b.WriteString(line)
			if err != nil || (strings.HasPrefix(line, "data:") && (strings.Contains(line, `"result"`) || strings.Contains(line, `"error"`))) {
				break
			}
		}
	} else {
		all, _ := io.ReadAll(res.Body)
		b.Write(all)
	}
	g := got{Request: method + " " + strings.TrimPrefix(u, "http://"), Status: res.StatusCode, Header: map[string]string{}, Body: b.String()}
	if i := strings.Index(g.Request, "/"); i > 0 {
		g.Request = method + " " + g.Request[i:] // the host differs
	}
	sid := res.Header.Get("Mcp-Session-Id")
	for k, vs := range res.Header {
		if slices.Contains(connHeaders, k) {
			continue
		}
		v := strings.Join(vs, ", ")
		if k == "Mcp-Session-Id" {
			v = sidMask
		}
		g.Header[k] = v
	}
	if sid != "" {
		g.Body = strings.ReplaceAll(g.Body, sid, sidMask)
	}
	return g, sid
}

// sameAsRecorded fails t where what the replay gave differs from what
// the recording gave, exchange by exchange.
func sameAsRecorded(t *testing.T, recorded, replayed []got) {
	t.Helper()
	if d := cmp.Diff(recorded, replayed); d != "" {
		t.Errorf("the replay answered otherwise than the recorded server (-recorded +replayed):\n%s", d)
	}
}

// needPeers skips the test when the npm peers are not installed, unless
// MCPTAPE_REQUIRE_PEERS=1 makes their absence a failure.
func needPeers(t *testing.T) {
	t.Helper()
	if err := interop.Available(); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// everything starts server-everything (transport "" is Streamable HTTP)
// for the test.
func everything(t *testing.T, transport string) *interop.Everything {
	t.Helper()
	needPeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, &interop.EverythingOptions{Transport: transport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	return ev
}

// recordThenReplay runs drive against a recording proxy in front of
// upstream, stops upstream (stop), then runs drive again against the
// replay of that recording, and returns what each run got, and the
// replay server.
func recordThenReplay(t *testing.T, upstream string, stop func(), opts *replay.ServerOptions, drive func(base string) []got) (recorded, replayed []got, s *replay.Server) {
	t.Helper()
	tape := recordTape(t, upstream, func(px string) { recorded = drive(px) })
	if stop != nil {
		stop()
	}
	if opts == nil {
		opts = &replay.ServerOptions{Timing: replay.TimingFast, Strict: true}
	}
	s, hs := serve(t, tape, opts)
	replayed = drive(hs.URL)
	return recorded, replayed, s
}

// rpc is a JSON-RPC request body.
func rpc(id int, method, params string) string {
	if params == "" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, id, method)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

// legacyInit are a 2025-11-25 client's initialize params.
const legacyInit = `{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"roots":{}},"clientInfo":{"name":"exact","version":"1"}}`
