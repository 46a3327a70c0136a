package capture

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// The exchange decoder on its own: fed an exchange's request and response
// in pieces as the proxy reports them, it hands its batcher the messages
// they carry, whole and in order, and keeps the exchange's record.

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

// decoderEnv is a batcher and a grouper, as the pipeline makes them.
func decoderEnv(t *testing.T, max int) (*batcher, *grouper) {
	t.Helper()
	n := 0
	o := &RecorderOptions{MaxMessageSize: max, IdleGap: time.Minute, Backpressure: time.Second,
		NewSessionID: func(time.Time) string { n++; return fmt.Sprintf("s%d", n) }}
	out := newBatcher(o, 0, nil, new(atomic.Int64), false, nil)
	return out, newGrouper(out)
}

// beginEvent is the evBegin of a POST to /mcp with header h.
func beginEvent(id uint64, h http.Header) event {
	return event{kind: evBegin, x: id, at: t0, begin: &beginInfo{
		Request: Request{Method: http.MethodPost, Target: "/mcp", Header: h, Remote: "127.0.0.1:40000"},
		path:    "/mcp",
	}}
}

func TestExchangeDecodesBodiesInPieces(t *testing.T) {
	out, groups := decoderEnv(t, 1<<20)
	xs := newExchange(beginEvent(7, http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}), out, groups)
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	for _, piece := range []string{req[:10], req[10:50], req[50:]} {
		xs.reqBody([]byte(piece))
	}
	xs.reqEnd(t0.Add(time.Millisecond))
	if len(out.msgs) != 1 || string(out.msgs[0].Raw) != req || out.msgs[0].Kind != protocol.KindRequest {
		t.Fatalf("after the request: %+v, want the request whole", out.msgs)
	}
	// An SSE response whose events are cut across chunks anywhere: a
	// priming event without data, then the result.
	xs.response(event{status: 200, header: http.Header{"Content-Type": {"text/event-stream"}}, at: t0.Add(2 * time.Millisecond)})
	res := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`
	stream := "id: p0\ndata:\n\nevent: message\nid: e1\ndata: " + res + "\n\n"
	for i := 0; i < len(stream); i += 7 {
		xs.respBody([]byte(stream[i:min(i+7, len(stream))]), t0.Add(3*time.Millisecond))
	}
	xs.end(event{at: t0.Add(4 * time.Millisecond)})
	if len(out.msgs) != 3 {
		t.Fatalf("%d messages, want the request, the priming frame and the result", len(out.msgs))
	}
	prime, result := out.msgs[1], out.msgs[2]
	if prime.Kind != protocol.KindFrame || prime.SSE == nil || prime.SSE.ID != "p0" {
		t.Errorf("priming event: %+v", prime)
	}
	if string(result.Raw) != res || result.SSE == nil || result.SSE.ID != "e1" || result.Links.Request != out.msgs[0].Seq {
		t.Errorf("result: raw %s sse %+v links %+v", result.Raw, result.SSE, result.Links)
	}
	if got := string(result.SSE.Prefix) + string(result.Raw) + string(result.SSE.Suffix); got != "event: message\nid: e1\ndata: "+res+"\n\n" {
		t.Errorf("the result's event does not rebuild from its parts: %q", got)
	}
	x := &xs.x
	if x.RequestBytes != int64(len(req)) || x.ResponseBytes != int64(len(stream)) || x.Events != 2 || x.Status != 200 ||
		x.ResponseBody != BodySSE || x.SessionID != xs.sess.s.ID || x.End.IsZero() {
		t.Errorf("exchange record: %+v", x)
	}
}

func TestExchangeDecodesGzipAndCutBodies(t *testing.T) {
	out, groups := decoderEnv(t, 200)
	// A gzip JSON answer whose Content-Length says when it is complete:
	// decoded then, before the exchange ends.
	xs := newExchange(beginEvent(1, http.Header{"Content-Type": {"application/json"}}), out, groups)
	xs.reqBody([]byte(`{"jsonrpc":"2.0","id":"a","method":"ping"}`))
	xs.reqEnd(t0)
	res := `{"jsonrpc":"2.0","id":"a","result":{}}`
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(res))
	zw.Close()
	xs.response(event{status: 200, at: t0, header: http.Header{"Content-Type": {"application/json"},
		"Content-Encoding": {"gzip"}, "Content-Length": {fmt.Sprint(z.Len())}}})
	xs.respBody(z.Bytes(), t0)
	if len(out.msgs) != 2 || string(out.msgs[1].Raw) != res || out.msgs[1].Links.Request != out.msgs[0].Seq {
		t.Fatalf("gzip answer: %+v", out.msgs)
	}
	xs.end(event{at: t0})

	// A request body over MaxMessageSize is stored cut, marked oversize.
	xs = newExchange(beginEvent(2, http.Header{"Content-Type": {"application/json"}}), out, groups)
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"a":"` + strings.Repeat("y", 300) + `"}}}`
	xs.reqBody([]byte(big[:150]))
	xs.reqBody([]byte(big[150:]))
	xs.reqEnd(t0)
	m := out.msgs[len(out.msgs)-1]
	if m.Kind != protocol.KindInvalid || len(m.Raw) != 200 || len(m.Findings) == 0 || m.Findings[0].Kind != FindingOversize {
		t.Errorf("oversize request: kind %v, %d bytes, findings %+v", m.Kind, len(m.Raw), m.Findings)
	}
	if xs.x.RequestBytes != int64(len(big)) {
		t.Errorf("RequestBytes %d, want the whole body's %d", xs.x.RequestBytes, len(big))
	}

	// A stream that ends in the middle of an event: kept, marked cut.
	xs.response(event{status: 200, at: t0, header: http.Header{"Content-Type": {"text/event-stream"}}})
	xs.respBody([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":2,"), t0)
	xs.end(event{at: t0, aborted: true})
	m = out.msgs[len(out.msgs)-1]
	if !xs.x.Truncated || m.Kind != protocol.KindInvalid || m.Findings[0].Kind != FindingTruncated {
		t.Errorf("cut stream: exchange truncated %v, last message %+v", xs.x.Truncated, m)
	}
}
