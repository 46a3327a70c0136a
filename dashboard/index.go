package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// summaryIndex holds, per session, what the session filters and the latency
// chart need beyond the session record: the methods and tools it used and
// the latency of each answered request. It is computed from the message
// index (no raw bytes) on first use, warmed in the background when the
// dashboard starts, and recomputed when a session's record shows more
// messages or a later end.
type summaryIndex struct {
	store capture.Store

	mu       sync.Mutex
	sessions map[string]*sessionSummary
	intern   map[string]string
}

type sessionSummary struct {
	// The session record this was computed for.
	messages int
	end      time.Time

	methods map[string]bool
	tools   map[string]bool
	samples []latencySample
}

// latencySample is one answered request: its method, when it was sent, and
// how long the answer took.
type latencySample struct {
	method string
	at     time.Time
	d      time.Duration
}

func newSummaryIndex(store capture.Store) *summaryIndex {
	return &summaryIndex{store: store, sessions: map[string]*sessionSummary{}, intern: map[string]string{}}
}

// get returns the summary of s, computing it if s changed since.
func (ix *summaryIndex) get(ctx context.Context, s *capture.Session) (*sessionSummary, error) {
	ix.mu.Lock()
	sum := ix.sessions[s.ID]
	ix.mu.Unlock()
	if sum != nil && sum.messages == s.Messages && sum.end.Equal(s.End) {
		return sum, nil
	}
	sum = &sessionSummary{messages: s.Messages, end: s.End, methods: map[string]bool{}, tools: map[string]bool{}}
	type pending struct {
		method string
		at     time.Time
	}
	open := map[uint64]pending{}
	for m, err := range ix.store.Messages(ctx, s.ID, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return nil, err
		}
		switch m.Kind {
		case protocol.KindRequest:
			open[m.Seq] = pending{ix.name(m.Method), m.Time}
			fallthrough
		case protocol.KindNotification:
			sum.methods[ix.name(m.Method)] = true
			if m.Method == protocol.MethodToolsCall && m.Name != "" {
				sum.tools[ix.name(m.Name)] = true
			}
		case protocol.KindResult, protocol.KindError:
			if p, ok := open[m.Links.Request]; ok && m.Links.Request != 0 {
				delete(open, m.Links.Request)
				if d := m.Time.Sub(p.at); d >= 0 {
					sum.samples = append(sum.samples, latencySample{p.method, p.at, d})
				}
			}
		}
	}
	ix.mu.Lock()
	ix.sessions[s.ID] = sum
	ix.mu.Unlock()
	return sum, nil
}

// name interns method and tool names: thousands of sessions share a few.
func (ix *summaryIndex) name(s string) string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if v, ok := ix.intern[s]; ok {
		return v
	}
	if len(ix.intern) < 10000 {
		ix.intern[s] = s
	}
	return s
}

// forget drops a deleted session.
func (ix *summaryIndex) forget(id string) {
	ix.mu.Lock()
	delete(ix.sessions, id)
	ix.mu.Unlock()
}

// warm computes every session's summary, newest first, so that the first
// filtered listing is as fast as the next.
func (ix *summaryIndex) warm(ctx context.Context) {
	var all []*capture.Session
	for s, err := range ix.store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			return
		}
		all = append(all, s)
	}
	for _, s := range all {
		if ctx.Err() != nil {
			return
		}
		_, _ = ix.get(ctx, s)
	}
}
