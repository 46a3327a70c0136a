package dashboard

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// summaryIndex holds, per session, what the method and tool filters need
// beyond the session record: the methods and tools it used. It is computed
// from the message index (no raw bytes) on first use, warmed in the
// background for the newest sessions when the dashboard starts, and
// recomputed when a session's record shows more messages or a later end.
// It keeps a few interned names per session, so it stays small for a store
// of months.
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

	methods []string // sorted, interned
	tools   []string
}

// hasMethod reports whether the session used a method that starts with m:
// "tools" finds tools/call and tools/list, "sampling" the sampling requests
// of legacy sessions and of 2026-07-28 rounds alike.
func (s *sessionSummary) hasMethod(m string) bool {
	i, _ := slices.BinarySearch(s.methods, m)
	return i < len(s.methods) && strings.HasPrefix(s.methods[i], m)
}

func (s *sessionSummary) hasTool(t string) bool {
	_, ok := slices.BinarySearch(s.tools, t)
	return ok
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
	methods, tools := map[string]bool{}, map[string]bool{}
	// The requests inside 2026-07-28 rounds are in the input_required
	// results that a retry followed: their seqs are noted on the way.
	answer := map[uint64]uint64{} // client request → its response
	var retried []uint64
	for m, err := range ix.store.Messages(ctx, s.ID, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return nil, err
		}
		if m.Kind.IsResponse() && m.Direction == protocol.ServerToClient && m.Links.Request != 0 {
			answer[m.Links.Request] = m.Seq
		}
		if m.Kind != protocol.KindRequest && m.Kind != protocol.KindNotification {
			continue
		}
		methods[m.Method] = true
		if m.Method == protocol.MethodToolsCall && m.Name != "" {
			tools[m.Name] = true
		}
		if m.Direction == protocol.ClientToServer && m.Links.Previous != 0 && len(retried) < maxRoundReads {
			retried = append(retried, m.Links.Previous)
		}
	}
	for _, req := range retried {
		res, err := ix.store.Message(ctx, answer[req])
		if err != nil {
			continue
		}
		var env struct {
			Result struct {
				InputRequests map[string]struct {
					Method string `json:"method"`
				} `json:"inputRequests"`
			} `json:"result"`
		}
		if json.Unmarshal(res.Raw, &env) == nil {
			for _, r := range env.Result.InputRequests {
				if r.Method != "" && len(r.Method) <= 200 {
					methods[r.Method] = true
				}
			}
		}
	}
	sum = &sessionSummary{messages: s.Messages, end: s.End, methods: ix.names(methods), tools: ix.names(tools)}
	ix.mu.Lock()
	ix.sessions[s.ID] = sum
	ix.mu.Unlock()
	return sum, nil
}

// maxRoundReads bounds the input_required results read per session for
// the methods of the requests inside rounds.
const maxRoundReads = 5000

// names is the set as a sorted slice of interned strings: thousands of
// sessions share a few names.
func (ix *summaryIndex) names(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	ix.mu.Lock()
	for n := range set {
		if v, ok := ix.intern[n]; ok {
			n = v
		} else if len(ix.intern) < 10000 {
			ix.intern[n] = n
		}
		out = append(out, n)
	}
	ix.mu.Unlock()
	slices.Sort(out)
	return out
}

// forget drops a deleted session.
func (ix *summaryIndex) forget(id string) {
	ix.mu.Lock()
	delete(ix.sessions, id)
	ix.mu.Unlock()
}

// warmSessions is how many of the newest sessions warm computes.
const warmSessions = 2000

// warm computes the summaries of the newest sessions, so that the first
// filtered listing is as fast as the next.
func (ix *summaryIndex) warm(ctx context.Context) {
	var recent []*capture.Session
	for s, err := range ix.store.Sessions(ctx, capture.SessionQuery{Limit: warmSessions}) {
		if err != nil {
			return
		}
		recent = append(recent, s)
	}
	for _, s := range recent {
		if ctx.Err() != nil {
			return
		}
		_, _ = ix.get(ctx, s)
	}
}
