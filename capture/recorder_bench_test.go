package capture_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
)

// BenchmarkRecorderEcho is the recorder's share of one 2026-07-28 echo call
// (request, SSE response with one event), fed through the Tap API the
// proxy uses, into an in-memory store: the cost the proxy's CPU per call
// pays for recording.
func BenchmarkRecorderEcho(b *testing.B) {
	store := memstore.New()
	rec, err := capture.NewRecorder(context.Background(), store, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}}
	req := httptest.NewRequest("POST", "http://127.0.0.1:7411/mcp", strings.NewReader(""))
	req.RemoteAddr = "127.0.0.1:50000"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`, i)
		t := rec.Begin(capture.RequestFrom(req, []byte(body), true))
		t.Response(200, h, false)
		t.ResponseBody([]byte(fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}}\n\n", i)))
		t.End("", false)
	}
	if err := rec.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	rec.Close(context.Background())
}
