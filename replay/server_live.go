package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// live is the replay state of one live client: a legacy session (by the
// Mcp-Session-Id the server minted), or a 2026-07-28 client (by its
// fingerprint, from its server/discover or first request on).
type live struct {
	// rs is the recorded session it was given (a legacy session, the
	// connection of a stdio client that began with initialize); nil for
	// a client without a session, answered from every recorded session.
	rs      *recSession
	last    *recSession // the recorded session it was answered from last
	id      string      // the minted session id (legacy)
	mu      sync.Mutex
	use     usage                // what it was answered with so far
	taken   map[*recSession]bool // the recorded sessions it was answered from
	onTake  func(*recSession)    // called (l.mu not held) when it is first answered from a recorded session
	noteAt  map[string]int       // by notification method, how many recorded notification exchanges answered it
	asked   map[string]uint64    // the replayed server→client requests awaiting its answer: by id, their recorded seq
	seen    map[uint64]time.Time // recorded requests matched so far, and when
	changed chan struct{}        // closed and replaced when seen grows
	nextID  int64
	waiting map[string]chan *protocol.Message
	done    chan struct{}
	ended   bool
	drain   chan struct{}               // closed by DELETE: deliver what was recorded before it, at once
	noInput chan struct{}               // closed when the client can send nothing more (a stdio client's input ended)
	gets    []chan struct{}             // one per standalone GET stream, closed when its recorded messages are out
	streams map[chan string]*openStream // open GET and listen streams
	pending []string                    // list_changed kinds no open stream took yet
	// underway counts, per recorded call being answered on a stdio
	// connection (by its request's seq), the messages of its stream out so
	// far: what the server sent on its own after them waits for them.
	underway map[uint64]int
	// own is, on a stdio connection, how far the replay of what each
	// recorded session sent on its own has come.
	own map[*recSession]*ownState
}

// ownState is how far the replay of what a recorded session sent on its
// own (rs.get) has come on a stdio connection.
type ownState struct {
	sent    int    // messages out
	blocked uint64 // the recorded request its next message waits to see live; 0: none
	done    bool
}

// openStream is a live stream that list_changed faults can use.
type openStream struct {
	// listenID is the subscriptions/listen request's id, which tags each
	// notification; nil on a standalone GET stream.
	listenID json.RawMessage
	// kinds are the list_changed kinds it takes ("tools", …); nil means all.
	kinds map[string]bool
}

func (o *openStream) takes(kind string) bool { return o.kinds == nil || o.kinds[kind] }

// listenStream is the stream of a live request the recording never
// answered: a subscriptions/listen stream takes the list_changed kinds it
// opted into (all of them when it names none); any other takes none.
func listenStream(m *protocol.Message) *openStream {
	st := &openStream{kinds: map[string]bool{}}
	if m.Method != protocol.MethodSubscriptionsListen {
		return st
	}
	st.listenID = m.ID
	n, _, _, ok := protocol.Member(m.Params, "notifications")
	if !ok {
		st.kinds = nil
		return st
	}
	var v map[string]any
	_ = json.Unmarshal(n, &v)
	for kind, member := range map[string]string{"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"} {
		st.kinds[kind] = v[member] == true
	}
	return st
}

func newLive(rs *recSession) *live {
	return &live{rs: rs, use: newUsage(), taken: map[*recSession]bool{}, noteAt: map[string]int{}, asked: map[string]uint64{},
		seen: map[uint64]time.Time{}, changed: make(chan struct{}),
		waiting: map[string]chan *protocol.Message{}, done: make(chan struct{}), drain: make(chan struct{}), noInput: make(chan struct{}), streams: map[chan string]*openStream{}, underway: map[uint64]int{}, own: map[*recSession]*ownState{}}
}

// markSeen notes that the recorded request seq was matched live, now.
func (l *live) markSeen(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[seq]; !ok {
		l.seen[seq] = time.Now()
		l.wake()
	}
}

// seenAt is when the recorded request seq was matched live.
func (l *live) seenAt(seq uint64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.seen[seq]
	return at, ok
}

// draining reports whether the client's DELETE asks for the rest of what
// was recorded before it.
func (l *live) draining() bool {
	select {
	case <-l.drain:
		return true
	default:
		return false
	}
}

// maxDrain bounds how long a DELETE waits for the standalone GET stream to
// deliver what was recorded before the recorded DELETE.
const maxDrain = 2 * time.Second

// endAfterDrain ends the session once its GET streams delivered what was
// recorded before the DELETE, waiting at most maxDrain.
func (l *live) endAfterDrain() {
	l.mu.Lock()
	if !l.draining() {
		close(l.drain)
	}
	gets := append([]chan struct{}(nil), l.gets...)
	l.mu.Unlock()
	t := time.NewTimer(maxDrain)
	defer t.Stop()
	for _, g := range gets {
		select {
		case <-g:
		case <-t.C:
		}
	}
	l.end()
}

// waitTrigger waits until the recorded request that preceded m has been
// seen live, so that notifications a call caused follow it on replay too.
// A nil drain never ends the wait; the GET stream passes l.drain.
func (l *live) waitTrigger(ctx context.Context, trigger uint64, limit time.Duration, drain <-chan struct{}) {
	if trigger == 0 {
		return
	}
	l.waitUntil(ctx, limit, drain, func() bool {
		_, ok := l.seen[trigger]
		return ok
	})
}

// waitUntil waits, at most limit, until ok (called with l.mu held) holds,
// rechecking it whenever changed is closed; a nil drain never ends the
// wait.
func (l *live) waitUntil(ctx context.Context, limit time.Duration, drain <-chan struct{}, ok func() bool) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		done, ch := ok(), l.changed
		l.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-drain:
			return
		case <-deadline.C:
			return
		}
	}
}

// wake tells the waiters of changed that something changed; l.mu held.
func (l *live) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// begin notes that recorded call c's stream is being replayed on a stdio
// connection, where everything goes out on one pipe in its recorded order.
func (l *live) begin(c *call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.underway[c.req.Seq] = 0
}

// sent notes that n messages of call c's stream are out, if c was begun.
func (l *live) sent(c *call, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.underway[c.req.Seq]; ok {
		l.underway[c.req.Seq] = n
		l.wake()
	}
}

// finished notes that call c's stream is over, whatever its end.
func (l *live) finished(c *call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.underway[c.req.Seq]; ok {
		delete(l.underway, c.req.Seq)
		l.wake()
	}
}

// waitStream waits, at most limit, until the messages of call c's stream
// recorded before seq are out, when c's stream is under way; so that on
// one pipe a notification the server sent on its own after a call's
// response follows that response on replay too, however the two timers
// fall.
func (l *live) waitStream(ctx context.Context, c *call, seq uint64, limit time.Duration) {
	if c == nil {
		return
	}
	want, _ := slices.BinarySearchFunc(c.stream, seq, func(m *msgRef, seq uint64) int { return cmp.Compare(m.Seq, seq) })
	if want == 0 {
		return
	}
	l.waitUntil(ctx, limit, nil, func() bool {
		n, ok := l.underway[c.req.Seq]
		return !ok || n >= want
	})
}

// startOwn notes that what rs sent on its own is being replayed to l.
func (l *live) startOwn(rs *recSession) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.own[rs] == nil {
		l.own[rs] = &ownState{}
	}
}

// ownAt notes how far the replay of what rs sent on its own has come.
func (l *live) ownAt(rs *recSession, sent int, blocked uint64, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.own[rs]
	if st == nil {
		return
	}
	st.sent, st.blocked, st.done = sent, blocked, done
	l.wake()
}

// waitOwn waits, at most limit, until what rs sent on its own before seq
// is out, so that on one pipe a call's message follows what the server
// sent unasked before it in the recording; unless that replay waits for a
// request not seen yet (it would wait for this one).
func (l *live) waitOwn(ctx context.Context, rs *recSession, seq uint64, limit time.Duration) {
	due, _ := slices.BinarySearchFunc(rs.get, seq, func(m *msgRef, seq uint64) int { return cmp.Compare(m.Seq, seq) })
	if due == 0 {
		return
	}
	l.waitUntil(ctx, limit, nil, func() bool {
		st := l.own[rs]
		if st == nil || st.done || st.sent >= due {
			return true
		}
		_, seen := l.seen[st.blocked]
		return st.blocked != 0 && !seen
	})
}

// inputEnded notes that the client can send nothing more: no answer to a
// replayed request will come.
func (l *live) inputEnded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.noInput:
	default:
		close(l.noInput)
	}
}

func (l *live) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended = true
		close(l.done)
	}
}

// afterResponse sends the notifications of listChanged faults on the live
// client's open streams that take them: the standalone GET stream
// (legacy), the subscriptions/listen streams that opted into that kind
// (2026-07-28). One that no open stream takes waits for the next to open.
func (s *Server) afterResponse(l *live, kinds ...string) {
	for _, kind := range kinds {
		sent := false
		l.mu.Lock()
		for ch, st := range l.streams {
			if !st.takes(kind) {
				continue
			}
			select {
			case ch <- kind:
				sent = true
			default:
			}
		}
		if !sent {
			l.pending = append(l.pending, kind)
		}
		l.mu.Unlock()
		if !sent {
			s.log.Warn("listChanged fault: the client has no open stream for the notification yet; it is sent when one opens. "+
				"Open the standalone GET stream (2025-era sessions) or a subscriptions/listen with "+kind+"ListChanged (2026-07-28) before the request the fault matches",
				"method", "notifications/"+kind+"/list_changed")
		}
	}
}

// hold keeps a stream open until the client or the server ends it,
// writing the notifications that listChanged faults push to it (first any
// that waited for a stream).
func (s *Server) hold(ctx context.Context, o out, l *live, st *openStream) {
	ch := make(chan string, 8)
	var backlog []string
	l.mu.Lock()
	kept := l.pending[:0]
	for _, kind := range l.pending {
		if st.takes(kind) {
			backlog = append(backlog, kind)
		} else {
			kept = append(kept, kind)
		}
	}
	l.pending = kept
	l.streams[ch] = st
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.streams, ch)
		l.mu.Unlock()
	}()
	write := func(kind string) bool {
		note := `{"jsonrpc":"2.0","method":` + strconv.Quote("notifications/"+kind+"/list_changed")
		if len(st.listenID) > 0 {
			note += `,"params":{"_meta":{"` + protocol.MetaSubscriptionID + `":` + string(st.listenID) + `}}`
		}
		note += "}"
		return o.send(nil, []byte(note)) == nil
	}
	for _, kind := range backlog {
		if !write(kind) {
			return
		}
	}
	for {
		select {
		case kind := <-ch:
			if !write(kind) {
				return
			}
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-s.closed:
			return
		}
	}
}
