package traces_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/traces"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":              "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":             "http://127.0.0.1:4318/v1/traces",
		"https://otlp.example.com/v1/traces": "https://otlp.example.com/v1/traces",
		"http://collector:4318/otlp/traces":  "http://collector:4318/otlp/traces",
	} {
		if got, err := traces.EndpointURL(in); err != nil || got != want {
			t.Errorf("EndpointURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"127.0.0.1:4318", "grpc://collector:4317", "http://", ""} {
		if _, err := traces.EndpointURL(bad); err == nil {
			t.Errorf("EndpointURL(%q) accepted", bad)
		}
	}
}

// call is a recorded request and its answer, as the recorder hands them
// over in a batch.
func call(seq uint64, at time.Time) *capture.Batch {
	id := json.RawMessage(fmt.Sprint(seq))
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}`, seq)
	res := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}`, seq)
	return &capture.Batch{Messages: []*capture.Message{
		{Seq: seq, SessionID: "s1", Direction: protocol.ClientToServer, Kind: protocol.KindRequest, Method: "tools/call", Name: "echo", ID: id, Raw: []byte(req), Time: at},
		{Seq: seq + 1, SessionID: "s1", Direction: protocol.ServerToClient, Kind: protocol.KindResult, ID: id, Raw: []byte(res), Time: at.Add(time.Millisecond), Links: capture.Links{Request: seq}},
	}}
}

// TestCollectorStallNeverBlocks: a collector that takes every export and
// never answers holds no recorder up: OnBatch returns at once, and what
// does not fit in the queue is counted as dropped.
func TestCollectorStallNeverBlocks(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stall)
	e, err := traces.New(context.Background(), &traces.Options{Endpoint: srv.URL, QueueSize: 64, ExportTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const n = 20000
	for i := range n {
		e.OnBatch(call(uint64(2*i+1), start))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("%d OnBatch calls took %v with the collector stalled: the exporter holds the recorder up", n, d)
	}
	if st := e.Stats(); st.Dropped == 0 {
		t.Errorf("with the collector stalled, nothing was counted as dropped: %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = e.Close(ctx) // bounded by ctx whatever the collector does
	if ctx.Err() != nil && time.Since(start) > 30*time.Second {
		t.Errorf("Close did not return within its context")
	}
}

// TestUnansweredCallEndsWithItsSession: a request whose answer never
// comes is exported as unanswered when its session ends, not kept open.
func TestUnansweredCallEndsWithItsSession(t *testing.T) {
	got := make(chan []byte, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 1<<20)
		n, _ := r.Body.Read(b)
		got <- b[:n]
	}))
	defer srv.Close()
	e, err := traces.New(context.Background(), &traces.Options{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	b := call(1, at)
	b.Messages = b.Messages[:1] // the request, no answer
	e.OnBatch(b)
	e.OnBatch(&capture.Batch{Sessions: []*capture.Session{{ID: "s1", Status: capture.StatusClosed, Start: at, End: at.Add(time.Second)}}})
	fixtures.Eventually(t, 5*time.Second, func() error {
		if st := e.Stats(); st.Open != 0 || st.Exported == 0 {
			return fmt.Errorf("the unanswered call was not ended and exported with its session: %+v", st)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRetryStoredAgainJoinsItsCall: the recorder stores an MRTR retry
// that overtook the round it answers once without, then again with its
// link to that round; its span is a round of the logical call all the
// same, not a call of its own.
func TestRetryStoredAgainJoinsItsCall(t *testing.T) {
	e, spans := collector(t)
	at := time.Now()
	msg := func(seq uint64, kind protocol.Kind, dir protocol.Direction, raw string, links capture.Links, d time.Duration) *capture.Message {
		return &capture.Message{Seq: seq, SessionID: "s1", Direction: dir, Kind: kind, Method: "tools/call", Name: "ask",
			ID: json.RawMessage("1"), Raw: []byte(raw), Time: at.Add(d), Links: links}
	}
	c2s, s2c := protocol.ClientToServer, protocol.ServerToClient
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}`
	retry := msg(2, protocol.KindRequest, c2s, req, capture.Links{}, 2*time.Millisecond)
	e.OnBatch(&capture.Batch{Messages: []*capture.Message{
		msg(1, protocol.KindRequest, c2s, req, capture.Links{}, 0),
		retry,
		msg(3, protocol.KindResult, s2c, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}`, capture.Links{Request: 1}, time.Millisecond),
	}})
	again := *retry
	again.Links.Previous = 1
	e.OnBatch(&capture.Batch{Messages: []*capture.Message{
		&again,
		msg(4, protocol.KindResult, s2c, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, capture.Links{Request: 2}, 3*time.Millisecond),
	}})
	var names []string
	for _, s := range spans() {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	want := []string{"tools/call ask", "tools/call ask round 1", "tools/call ask round 2"}
	if !slices.Equal(names, want) {
		t.Errorf("spans %q, want one logical call and its two rounds %q", names, want)
	}
}

// TestAnswerBesideItsSessionsEnd: the batch that holds a call's answer may
// also hold its session's end; the call is answered, not cut by the end.
func TestAnswerBesideItsSessionsEnd(t *testing.T) {
	e, spans := collector(t)
	b := call(1, time.Now())
	res := b.Messages[1]
	b.Messages = b.Messages[:1]
	e.OnBatch(b)
	e.OnBatch(&capture.Batch{
		Sessions: []*capture.Session{{ID: "s1", Status: capture.StatusClosed, Start: res.Time, End: res.Time.Add(time.Second)}},
		Messages: []*capture.Message{res},
	})
	got := spans()
	if len(got) != 1 {
		t.Fatalf("%d spans, want 1", len(got))
	}
	for _, kv := range got[0].Attributes {
		if kv.Key == "error.type" {
			t.Errorf("the answered call's span says error.type %v", kv.Value)
		}
	}
}

// collector is an exporter sending to an OTLP receiver, and a function
// that closes the exporter and returns every span the receiver got.
func collector(t *testing.T) (*traces.Exporter, func() []*tracepb.Span) {
	t.Helper()
	got := make(chan *coltracepb.ExportTraceServiceRequest, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ex coltracepb.ExportTraceServiceRequest
		if proto.Unmarshal(b, &ex) == nil {
			got <- &ex
		}
	}))
	t.Cleanup(srv.Close)
	e, err := traces.New(context.Background(), &traces.Options{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return e, func() []*tracepb.Span {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		close(got)
		var out []*tracepb.Span
		for ex := range got {
			for _, rs := range ex.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					out = append(out, ss.Spans...)
				}
			}
		}
		return out
	}
}

// TestSkippedSessionsAreNotExported: the calls of a session left out with
// Skip (a wrap exports them itself) make no span, not even when it ends,
// while another session's calls in the same batches do; a session is left
// out only from when Skip is called.
func TestSkippedSessionsAreNotExported(t *testing.T) {
	e, spans := collector(t)
	at := time.Now()
	inSession := func(b *capture.Batch, id string) *capture.Batch {
		for _, m := range b.Messages {
			m.SessionID = id
		}
		return b
	}
	e.OnBatch(inSession(call(1, at), "wrapped")) // before Skip: exported
	e.Skip("wrapped")
	b := inSession(call(11, at), "wrapped")
	b.Messages = append(b.Messages, inSession(call(21, at), "live").Messages...)
	b.Messages = append(b.Messages, inSession(call(31, at), "wrapped").Messages[:1]...) // left unanswered
	e.OnBatch(b)
	e.OnBatch(&capture.Batch{Sessions: []*capture.Session{
		{ID: "wrapped", Status: capture.StatusClosed, Start: at, End: at.Add(time.Second)},
		{ID: "live", Status: capture.StatusClosed, Start: at, End: at.Add(time.Second)},
	}})
	var ids []string
	for _, s := range spans() {
		for _, kv := range s.Attributes {
			if kv.Key == "jsonrpc.request.id" {
				ids = append(ids, kv.Value.GetStringValue())
			}
		}
	}
	slices.Sort(ids)
	if want := []string{"1", "21"}; !slices.Equal(ids, want) {
		t.Errorf("spans of requests %q, want %q: the call before Skip and the other session's", ids, want)
	}
}
