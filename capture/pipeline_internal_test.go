package capture

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// The loop on its own, without its goroutines: events run on their
// exchanges in the order that keeps a call's messages in order, and the
// batcher hands over what they produced as one batch.

type nowhere struct{}

func (nowhere) Write(context.Context, *Batch) error             { return nil }
func (nowhere) LastIDs(context.Context) (uint64, uint64, error) { return 0, 0, nil }

func testPipeline(t *testing.T) *pipeline {
	n := 0
	r := &Recorder{store: nowhere{}, opts: RecorderOptions{MaxMessageSize: 1 << 20, IdleGap: time.Minute, BatchSize: 2048,
		Now: func() time.Time { return t0 }, NewSessionID: func(time.Time) string { n++; return string(rune('a' + n)) }}}
	return newPipeline(r, 100)
}

func TestPipelineOrdersACallsEvents(t *testing.T) {
	p := testPipeline(t)
	b := beginEvent(1, http.Header{"Content-Type": {"application/json"}})
	p.handle(b)
	// The answer's headers and body come before the request's end (the
	// proxy reports both sides as they go): they wait for it.
	resp := event{kind: evResp, x: 1, at: t0, status: 200, header: http.Header{"Content-Type": {"application/json"}}}
	p.handle(event{kind: evRespBody, x: 1, at: t0, resp: &resp, data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)})
	p.handle(event{kind: evReqBody, x: 1, at: t0, data: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)})
	if len(p.out.msgs) != 0 {
		t.Fatalf("%d messages before the request ended", len(p.out.msgs))
	}
	p.handle(event{kind: evReqEnd, x: 1, at: t0})
	p.handle(event{kind: evEnd, x: 1, at: t0})
	if len(p.out.msgs) != 2 || p.out.msgs[0].Kind != protocol.KindRequest || p.out.msgs[1].Links.Request != p.out.msgs[0].Seq {
		t.Fatalf("messages %+v, want the request, then its answer linked to it", p.out.msgs)
	}
	if p.out.msgs[0].Seq != 101 || len(p.xs) != 0 {
		t.Errorf("first seq %d (want the store's next, 101), %d exchanges in flight after the end", p.out.msgs[0].Seq, len(p.xs))
	}

	batch := p.out.take(false, t0)
	if batch == nil || len(batch.Messages) != 2 || len(batch.Exchanges) != 1 || len(batch.Sessions) != 1 {
		t.Fatalf("batch %+v, want 2 messages with their exchange and session", batch)
	}
	if p.out.take(false, t0) != nil {
		t.Fatal("a second batch with nothing new")
	}
	// A busy session's record waits out sessionWriteInterval, unless
	// forced; messages and exchanges never wait.
	p.handle(beginEvent(2, http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}))
	p.handle(event{kind: evReqBody, x: 2, at: t0, data: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)})
	p.handle(event{kind: evReqEnd, x: 2, at: t0})
	batch = p.out.take(false, t0.Add(time.Millisecond))
	if len(batch.Messages) != 1 || len(batch.Exchanges) != 1 || len(batch.Sessions) != 0 {
		t.Errorf("batch %d messages, %d exchanges, %d sessions; want the session to wait", len(batch.Messages), len(batch.Exchanges), len(batch.Sessions))
	}
	if batch = p.out.take(true, t0.Add(time.Millisecond)); batch == nil || len(batch.Sessions) != 1 {
		t.Errorf("forced batch %+v, want the session", batch)
	}
}
