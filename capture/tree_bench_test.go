package capture_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
)

// BenchmarkSessionTree100k measures what `mcptape show --tree` does for a
// session of 100,000 messages on a Badger store on disk: read the session,
// build its tree, print it. The target is under 2 s.
func BenchmarkSessionTree100k(b *testing.B) {
	store, err := badgerstore.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	rec, err := capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{
		NewSessionID: func(time.Time) string { return "big" },
	})
	if err != nil {
		b.Fatal(err)
	}
	// 20,000 calls of 5 messages: the call, a sampling request on its
	// stream, a progress notification, the client's answer, the result.
	const calls = 20000
	h := http.Header{"Content-Type": {"text/event-stream"}}
	post := func(body string) *capture.Tap {
		req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(""))
		req.RemoteAddr = "127.0.0.1:1"
		req.Header.Set("Mcp-Session-Id", "s")
		return rec.Begin(capture.RequestFrom(req, []byte(body), true))
	}
	for i := 0; i < calls; i++ {
		t := post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"weather","arguments":{"city":"Paris"},"_meta":{"progressToken":%d}}}`, i, i))
		t.Response(200, h, false)
		t.ResponseBody([]byte(fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%d,\"progress\":1}}\n\n", i)))
		t.ResponseBody([]byte(fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[],\"maxTokens\":9}}\n\n", i)))
		a := post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"role":"assistant","content":{"type":"text","text":"sunny"},"model":"m"}}`, i))
		a.Response(202, http.Header{}, false)
		a.End("", false)
		t.ResponseBody([]byte(fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"Paris is sunny\"}]}}\n\n", i)))
		t.End("", false)
	}
	if err := rec.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	s, err := store.Session(context.Background(), "big")
	if err != nil || s.Messages != 5*calls {
		b.Fatalf("session: %v, %d messages", err, s.Messages)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr, err := capture.SessionTree(context.Background(), store, "big")
		if err != nil {
			b.Fatal(err)
		}
		tr.WriteText(io.Discard, nil)
		if len(tr.Roots) != calls {
			b.Fatalf("%d roots, want %d", len(tr.Roots), calls)
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "ms/tree")
	if per > treeTarget {
		b.Errorf("show --tree of a 100k-message session took %v, over the %v target", per.Round(time.Millisecond), treeTarget)
	}
}

// treeTarget is the bound on `show --tree` of a 100k-message session.
const treeTarget = 2 * time.Second
