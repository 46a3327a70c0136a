package replay

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// liveStream is a long-lived stream replayed in the background: a
// subscriptions/listen request (or another the recorded server never
// answered), or the standalone GET stream.
type liveStream struct {
	cr     *CallResult
	rec    *capture.Message // nil for GET
	x      *capture.Exchange
	want   int // the messages the recorded stream carried
	body   []byte
	id     json.RawMessage
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	doc     callDoc
	count   int
	changed chan struct{}
	closed  bool
}

func (r *sessionRun) startStream(ctx context.Context, rec *capture.Message, x *capture.Exchange) {
	cr := &CallResult{Method: http.MethodGet, Name: "(standalone stream)"}
	var recStream []*capture.Message
	if rec != nil {
		cr = &CallResult{Seq: rec.Seq, Method: rec.Method, Name: rec.Name}
		recStream = r.plan.streamOf([]*capture.Message{rec})
	} else {
		recStream = r.plan.standaloneStream()
	}
	r.addCall(cr)
	cr.Rounds = 1
	s := &liveStream{cr: cr, rec: rec, x: x, want: len(recStream), done: make(chan struct{}), changed: make(chan struct{})}
	if rec != nil {
		// The id now, in step order, so that ids (and the subscription
		// ids 2026-07-28 servers derive from them) are the same each run.
		var err error
		if s.body, s.id, err = r.withID(rec.Raw, rec); err != nil {
			cr.fail("%v", err)
			close(s.done)
			return
		}
	}
	ctx, s.cancel = context.WithCancel(ctx)
	key := uint64(0)
	if rec != nil {
		key = rec.Seq
	}
	r.mu.Lock()
	r.streams[key] = s
	r.mu.Unlock()
	go func() {
		defer close(s.done)
		start := time.Now()
		err := r.runStream(ctx, s, recStream)
		s.mu.Lock()
		defer s.mu.Unlock()
		cr.Duration = time.Since(start)
		if err != nil && !s.closed && ctx.Err() == nil {
			cr.fail("%v", err)
		}
	}()
}

func (r *sessionRun) runStream(ctx context.Context, s *liveStream, recStream []*capture.Message) error {
	var res *http.Response
	var err error
	id := s.id
	if s.rec != nil {
		m := protocol.Decode(s.body)
		s.cr.note(protocol.ClientToServer, &m)
		res, err = r.post(ctx, s.body, r.headers(&m, s.x))
	} else {
		res, err = r.get(ctx, "")
		if err == nil {
			s.cr.noteHTTP(http.MethodGet, res.StatusCode)
		}
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.doc.status = res.StatusCode
	s.mu.Unlock()
	bg := newBackgroundAnswers(ctx)
	defer bg.stop()
	var final bool
	_, err = r.readAll(ctx, res, func(sm *protocol.Message) bool {
		s.cr.note(protocol.ServerToClient, sm)
		s.mu.Lock()
		if sm.Kind.IsResponse() {
			if id != nil && protocol.IDKey(sm.ID) == protocol.IDKey(id) {
				s.doc.final, final = sm, true
			}
		} else {
			s.doc.add(sm)
		}
		s.count++
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
		if sm.Kind == protocol.KindRequest {
			r.answerRequest(ctx, s.cr, sm, recStream, bg)
		}
		return final
	}, nil)
	var he *httpError
	if errors.As(err, &he) {
		return nil // a refusal without a message: the statuses are compared
	}
	return err
}

// wait waits until the stream has carried what it did in the recording,
// it ended, or limit passed.
func (s *liveStream) wait(limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		s.mu.Lock()
		n, ch := s.count, s.changed
		s.mu.Unlock()
		if n >= s.want {
			return
		}
		select {
		case <-ch:
		case <-s.done:
			return
		case <-t.C:
			return
		}
	}
}

// close ends the stream (on 2026-07-28 closing it is the cancellation)
// and compares what it carried with the recording.
func (s *liveStream) close(r *sessionRun) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
	rec := &callDoc{}
	if s.x != nil {
		rec.status = s.x.Status
	}
	if s.rec != nil {
		rec = r.plan.recordedDoc([]*capture.Message{s.rec})
	} else {
		for _, m := range r.plan.standaloneStream() {
			if !m.Kind.IsResponse() {
				rec.add(decoded(m))
			}
		}
	}
	s.mu.Lock()
	live := s.doc
	s.mu.Unlock()
	r.compare(s.cr, rec, &live)
}

func (r *sessionRun) waitStreams() {
	r.mu.Lock()
	streams := slices.Collect(maps.Values(r.streams))
	r.mu.Unlock()
	deadline := time.Now().Add(r.c.opts.StreamWait)
	for _, s := range streams {
		s.wait(max(time.Until(deadline), 0))
	}
}

func (r *sessionRun) closeStreams() {
	r.mu.Lock()
	keys := slices.Sorted(maps.Keys(r.streams))
	r.mu.Unlock()
	for _, k := range keys {
		r.mu.Lock()
		s := r.streams[k]
		r.mu.Unlock()
		s.close(r)
	}
}
