package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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
	rs      *recSession
	id      string // the minted session id (legacy)
	mu      sync.Mutex
	used    map[*call]bool       // with a custom matcher
	cursor  map[string]int       // by match key: the next recorded call to replay
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
	return &live{rs: rs, used: map[*call]bool{}, cursor: map[string]int{}, seen: map[uint64]time.Time{}, changed: make(chan struct{}),
		waiting: map[string]chan *protocol.Message{}, done: make(chan struct{}), drain: make(chan struct{}), noInput: make(chan struct{}), streams: map[chan string]*openStream{}, underway: map[uint64]int{}}
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

// handshakeCall is the recorded call that answers a live initialize or
// server/discover matching none: the first of that method not replayed
// yet, else the last.
func (l *live) handshakeCall(method string) *call {
	list := l.rs.byMethod[method]
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range list {
		if _, ok := l.seen[c.req.Seq]; !ok {
			return c
		}
	}
	if len(list) > 0 {
		return list[len(list)-1]
	}
	return nil
}

// matchKey is what the default matcher compares: method and canonical
// params. Empty with a custom matcher.
func (s *Server) matchKey(m *protocol.Message) string {
	if s.matcher.custom != nil {
		return ""
	}
	return s.matcher.key(m.Method, m.Params)
}

// sessionOf is the live legacy session a request names by its
// Mcp-Session-Id; nil when it names none, or one the server does not know.
func (s *Server) sessionOf(r *http.Request) *live {
	sid := r.Header.Get(protocol.HeaderSessionID)
	if sid == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.legacy[sid]
}

// liveFor finds the live client a request of params p belongs to, opening
// one for a legacy initialize or a 2026-07-28 client it does not know yet
// (or one that starts over with server/discover).
//
// A new live client gets a recorded session of its own: of those that fit
// (an initialize for initialize; the era otherwise) and preferring the
// request's path, the one whose handshake is closest — initialize's params
// (legacy), or clientInfo and capabilities and whether the request is
// recorded (2026-07-28) — the first not yet given to a live client among
// equals. When all of those are taken they are reused, least used first,
// then in recorded order; strict mode reports each reuse.
func (s *Server) liveFor(r *http.Request, m *protocol.Message, p *protocol.Params, key string) *live {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sid := r.Header.Get(protocol.HeaderSessionID); sid != "" {
		return s.legacy[sid]
	}
	if m.Method == protocol.MethodInitialize {
		rs := s.pickInitialize(r.URL.Path, m)
		if rs == nil {
			return nil
		}
		l := newLive(rs)
		l.id = newSessionID()
		s.legacy[l.id] = l
		s.take(rs)
		return l
	}
	fits := s.fits(m, p.Modern || r.Header.Get(protocol.HeaderProtocolVersion) >= protocol.FirstModern)
	fp := fingerprint(r, p)
	var rs *recSession
	if m.Method == protocol.MethodDiscover {
		// A client's repeated discovers (a probe, then other versions)
		// belong to the session it is being given, while that session
		// has discovers left to answer them.
		lives := s.modern[fp]
		for i := len(lives) - 1; i >= 0; i-- {
			if s.discoverCall(lives[i], m, false) != nil {
				return lives[i]
			}
		}
	} else {
		var l *live
		if l, rs = s.knownLive(fp, r.URL.Path, m, key, fits); l != nil {
			return l
		}
	}
	if rs == nil {
		rs = s.pick(r.URL.Path, fits, func(rs *recSession) int { return s.clientDistance(rs, p, m, key) })
	}
	if rs == nil {
		return nil
	}
	if rs.s.Era != protocol.EraModern {
		// A legacy session's discover probe, answered without a session
		// (its initialize takes the session), or a session of unknown era.
		return newLive(rs)
	}
	// A client that starts over replaces its state on that recorded session.
	kept := s.modern[fp][:0]
	for _, old := range s.modern[fp] {
		if old.rs == rs {
			old.end()
			continue
		}
		kept = append(kept, old)
	}
	l := newLive(rs)
	s.modern[fp] = append(kept, l)
	s.take(rs)
	return l
}

// pickInitialize is the recorded session for a new legacy client: of those
// with an initialize, the one whose initialize params are closest (see
// pick). s.mu is held.
func (s *Server) pickInitialize(path string, m *protocol.Message) *recSession {
	return s.pick(path, func(rs *recSession) bool { return len(rs.byMethod[protocol.MethodInitialize]) > 0 },
		func(rs *recSession) int {
			return len(s.matcher.Diff(m.Method, m.Params, rs.byMethod[protocol.MethodInitialize][0].params()))
		})
}

// fits reports which recorded sessions may answer a new client's first
// request m other than initialize: for server/discover, those that
// recorded one (a 2026-07-28 session, or a legacy one whose client probed
// before its initialize); otherwise those of the request's era (modern:
// the request says 2026-07-28) or of unknown era.
func (s *Server) fits(m *protocol.Message, modern bool) func(*recSession) bool {
	return func(rs *recSession) bool {
		if m.Method == protocol.MethodDiscover {
			return len(rs.byMethod[protocol.MethodDiscover]) > 0 && (rs.s.Era == protocol.EraModern || len(rs.byMethod[protocol.MethodInitialize]) > 0)
		}
		return rs.s.Era == protocol.EraModern || (!modern && rs.s.Era != protocol.EraLegacy)
	}
}

// fingerprint tells 2026-07-28 clients apart, as the recorder does: remote
// host, endpoint path, clientInfo and capabilities.
func fingerprint(r *http.Request, p *protocol.Params) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	var info protocol.Implementation
	if p.ClientInfo != nil {
		info = *p.ClientInfo
	}
	return host + "\x00" + r.URL.Path + "\x00" + info.Name + "\x00" + info.Version + "\x00" + canonicalJSON(p.ClientCapabilities)
}

// canonicalJSON is raw with sorted members and no insignificant spaces;
// absent, null and {} are all "{}".
func canonicalJSON(raw json.RawMessage) string {
	v := decodeAny(raw)
	if v == nil {
		return "{}"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// matchRank orders how well a recorded session answers a request.
type matchRank uint8

const (
	matchFresh matchRank = iota // a matching recorded call not replayed yet
	matchUsed                   // only matching calls already replayed
	matchNone                   // no matching call
)

// peek ranks how rs, as replayed so far to l (nil: not at all), answers m.
func (s *Server) peek(rs *recSession, l *live, m *protocol.Message, key string) matchRank {
	if rs.byKey != nil {
		list := rs.byKey[key]
		if len(list) == 0 {
			return matchNone
		}
		if l == nil {
			return matchFresh
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cursor[key] < len(list) {
			return matchFresh
		}
		return matchUsed
	}
	rank := matchNone
	for _, rc := range rs.byMethod[m.Method] {
		if !s.matcher.Match(m.Method, m.Params, rc.params()) {
			continue
		}
		if l == nil {
			return matchFresh
		}
		l.mu.Lock()
		used := l.used[rc]
		l.mu.Unlock()
		if !used {
			return matchFresh
		}
		rank = matchUsed
	}
	return rank
}

// knownLive finds the live client of fingerprint fp that a 2026-07-28
// request belongs to: the newest that has a matching call not yet
// replayed. Failing that, a recorded session nobody has had yet that has
// one is returned to be opened (the same client program, run again
// without server/discover); else the newest live client that matched the
// request before, or the newest. Both nil: fp is new.
func (s *Server) knownLive(fp, path string, m *protocol.Message, key string, fits func(*recSession) bool) (*live, *recSession) {
	lives := s.modern[fp]
	if len(lives) == 0 {
		return nil, nil
	}
	best, rank := lives[len(lives)-1], matchNone
	for i := len(lives) - 1; i >= 0; i-- {
		if r := s.peek(lives[i].rs, lives[i], m, key); r < rank {
			best, rank = lives[i], r
		}
	}
	if rank == matchFresh {
		return best, nil
	}
	var fresh *recSession
	for _, rs := range s.sessions {
		if s.uses[rs] == 0 && rs.s.Era == protocol.EraModern && fits(rs) && s.peek(rs, nil, m, key) == matchFresh {
			if rs.s.Path == path {
				return nil, rs
			}
			if fresh == nil {
				fresh = rs
			}
		}
	}
	if fresh != nil {
		return nil, fresh
	}
	return best, nil
}

// clientDistance is how far a 2026-07-28 request's client is from the one
// recorded in rs: whether rs has the request at all weighs most, then
// clientInfo and capabilities.
func (s *Server) clientDistance(rs *recSession, p *protocol.Params, m *protocol.Message, key string) int {
	d := 0
	if s.peek(rs, nil, m, key) == matchNone {
		d += 4
	}
	var info protocol.Implementation
	if p.ClientInfo != nil {
		info = *p.ClientInfo
	}
	if info.Name != rs.s.Client.Name || info.Version != rs.s.Client.Version {
		d++
	}
	if canonicalJSON(p.ClientCapabilities) != canonicalJSON(rs.s.ClientCapabilities) {
		d++
	}
	if m.Method == protocol.MethodDiscover {
		// Sessions alike in client differ in what their discovers asked:
		// the protocol version above all.
		best := -1
		for _, c := range rs.byMethod[protocol.MethodDiscover] {
			if n := len(handshakeMetaDiff(m.Params, c.params())); best < 0 || n < best {
				best = n
			}
		}
		d += max(best, 0)
	}
	return d
}

// discoverCall is the recorded server/discover of l's session that
// answers a live one: of those the matcher matches, the first not yet
// replayed whose `_meta` (protocol version, clientInfo, capabilities)
// differs least from the live one's. When all have been replayed, reuse
// (strict replays report it) gives the last; without reuse it is nil.
func (s *Server) discoverCall(l *live, m *protocol.Message, reuse bool) *call {
	var best, last *call
	bestDiff := 0
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.rs.byMethod[protocol.MethodDiscover] {
		params := c.params()
		if !s.matcher.Match(m.Method, m.Params, params) {
			continue
		}
		last = c
		if _, ok := l.seen[c.req.Seq]; ok {
			continue
		}
		if d := len(handshakeMetaDiff(m.Params, params)); best == nil || d < bestDiff {
			best, bestDiff = c, d
		}
	}
	if best == nil && reuse {
		return last
	}
	return best
}

// pick chooses the recorded session for a new live client (see liveFor):
// among those that fit, one recorded on the same path, then the least
// distant, then the least used, then the first.
func (s *Server) pick(path string, fits func(*recSession) bool, distance func(*recSession) int) *recSession {
	var best *recSession
	var bestSame bool
	var bestDist, bestUses int
	for _, rs := range s.sessions {
		if !fits(rs) {
			continue
		}
		same, d, u := rs.s.Path == path, distance(rs), s.uses[rs]
		switch {
		case best == nil:
		case same != bestSame:
			if !same {
				continue
			}
		case d != bestDist:
			if d > bestDist {
				continue
			}
		case u >= bestUses:
			continue
		}
		best, bestSame, bestDist, bestUses = rs, same, d, u
	}
	return best
}

// take gives rs to a new live client; s.mu is held.
func (s *Server) take(rs *recSession) {
	s.uses[rs]++
	n := s.uses[rs]
	if n == 1 {
		return
	}
	msg := fmt.Sprintf("recorded session %s is replayed again, to a live client %d: every recorded session that fits its handshake as well was already taken", rs.s.ID, n)
	if s.opts.Strict {
		s.report.Failures = append(s.report.Failures, msg)
		s.log.Warn(msg)
		return
	}
	s.log.Info(msg)
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
