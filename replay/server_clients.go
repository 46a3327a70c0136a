package replay

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/mcptape/mcptape/protocol"
)

// Live clients and what answers them.
//
// A legacy session (its initialize answered from a recorded session whose
// server gave it a session id) is one live client, known by the id the
// replay server minted, answered from that recorded session's calls. A
// request that names a session its client ended is answered from what
// the recorded session got after its DELETE; one that names a session
// the server never gave, from what the recording's server said to such.
// Every other request — 2026-07-28 clients, a go-sdk stateless server's
// clients, a request without a session — comes from a client known by its
// fingerprint, answered from every recorded call that named no session:
// the one whose facts are closest (see distance), and among equals the
// first that client has not had yet.

// maxSessions, maxClients and maxEnded bound the live sessions, the
// clients without a session and the ended sessions the server remembers;
// past them the oldest is forgotten.
const (
	maxSessions = 10000
	maxClients  = 4096
	maxEnded    = 1024
)

// addSession remembers live session l by its id, forgetting (and ending)
// the oldest past maxSessions; s.mu is held.
func (s *Server) addSession(l *live) {
	for len(s.legacy) >= maxSessions && len(s.legacyAt) > 0 {
		id := s.legacyAt[0]
		s.legacyAt = s.legacyAt[1:]
		if old := s.legacy[id]; old != nil {
			old.end()
			delete(s.legacy, id)
			s.log.Warn("the replay server forgot its oldest live session: it holds at most this many", "sessions", maxSessions)
		}
	}
	if len(s.legacyAt) > 2*len(s.legacy)+64 {
		kept := s.legacyAt[:0]
		for _, id := range s.legacyAt {
			if s.legacy[id] != nil {
				kept = append(kept, id)
			}
		}
		s.legacyAt = kept
	}
	s.legacy[l.id] = l
	s.legacyAt = append(s.legacyAt, l.id)
}

// fingerprint tells clients without a session apart, as the recorder
// does: remote host, endpoint path, clientInfo and capabilities.
func fingerprint(remote, path string, p *protocol.Params) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	var info protocol.Implementation
	if p.ClientInfo != nil {
		info = *p.ClientInfo
	}
	return host + "\x00" + path + "\x00" + info.Name + "\x00" + info.Version + "\x00" + canonicalJSON(p.ClientCapabilities)
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

// clientFor is the client without a session of fingerprint fp. A client
// that sends a handshake (initialize or server/discover) that pools
// answered it with every time already starts over: a program run again.
func (s *Server) clientFor(fp string, m *protocol.Message, key string, f *reqFacts, pools []*pool) *live {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.clients[fp]
	if l != nil && (m.Method == protocol.MethodDiscover || m.Method == protocol.MethodInitialize) {
		l.mu.Lock()
		rank := s.peek(&l.use, pools, m, key, f)
		l.mu.Unlock()
		if rank == matchUsed {
			l.end()
			delete(s.clients, fp)
			l = nil
		}
	}
	if l == nil {
		if len(s.clients) >= maxClients {
			for k, old := range s.clients { // any one: a bound, not an order
				old.end()
				delete(s.clients, k)
				break
			}
		}
		l = newLive(nil)
		s.clients[fp] = l
	}
	return l
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

// draw notes that live client l is answered from rs.
func (s *Server) draw(l *live, rs *recSession) {
	l.mu.Lock()
	first := !l.taken[rs]
	l.taken[rs] = true
	l.mu.Unlock()
	if first && l.onTake != nil {
		l.onTake(rs)
	}
}

// chooseInit is the recorded initialize that answers a live one: of the
// route's, the one whose params are closest, then whose facts are, then
// of the session given to the fewest live clients, then the first.
func (s *Server) chooseInit(pools []*pool, m *protocol.Message, f *reqFacts) (c *call, exact bool) {
	var best ranked
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pools {
		if p == nil {
			continue
		}
		for _, c := range p.byMethod[protocol.MethodInitialize] {
			r := ranked{c: c, dist: distance(f, c.facts), uses: s.uses[c.rs]}
			if !s.matcher.Match(m.Method, m.Params, c.params()) {
				r.diff = 1 + len(s.matcher.Diff(m.Method, m.Params, c.params()))
			}
			if r.better(best) {
				best = r
			}
		}
	}
	return best.c, best.c != nil && best.diff == 0
}

// resolve finds the recorded call of pools that answers live request m of
// client l (see choose; a handshake that matches none gets the closest,
// answered as recorded, a strict replay noting the difference). It counts
// the request served and marks the call seen; bind, when set, is called
// with the call before that (the legacy SSE stream learns the live
// request's id there). Nil is a miss.
func (s *Server) resolve(l *live, pools []*pool, m *protocol.Message, p *protocol.Params, key string, f *reqFacts, bind func(*call)) *call {
	handshake := m.Method == protocol.MethodInitialize || m.Method == protocol.MethodDiscover
	l.mu.Lock()
	c, extra := s.choose(&l.use, pools, m, key, f)
	exact := c != nil
	if c == nil && handshake {
		c = s.closestHandshake(&l.use, pools, m, f)
	}
	l.mu.Unlock()
	if c == nil {
		return nil
	}
	s.served(l, c, m, p, exact, extra, bind)
	return c
}

// served reports live request m answered by recorded call c (exact: its
// params matched; extra: it answered this client before) and marks it
// seen.
func (s *Server) served(l *live, c *call, m *protocol.Message, p *protocol.Params, exact, extra bool, bind func(*call)) {
	switch {
	case !exact:
		// The handshake is answered as recorded whoever the client says
		// it is; the recorded protocolVersion is the one negotiated.
		s.fail(true, "the client's %s differs from the recording (answered as recorded): %s", m.Method,
			strings.Join(s.matcher.Diff(m.Method, m.Params, c.params()), "; "))
	case m.Method == protocol.MethodDiscover:
		if d := handshakeMetaDiff(m.Params, c.params()); len(d) > 0 {
			s.fail(true, "the client's server/discover differs from the recording (answered as recorded): %s", strings.Join(d, "; "))
		}
	}
	if extra {
		s.fail(true, "%s %s was called more often than recorded; the last recorded answer was replayed", m.Method, p.Name)
	} else if l.rs == nil && exact {
		// A client without a session has no session to take: a recorded
		// answer it gets after another client (or itself, begun again)
		// had it is the reuse a strict replay reports.
		s.mu.Lock()
		s.given[c]++
		n := s.given[c]
		s.mu.Unlock()
		if n > 1 {
			what := m.Method
			if p.Name != "" {
				what += " " + p.Name
			}
			s.fail(true, "recorded %s (seq %d in recorded session %s) is replayed again (%d times): a client without a session, or one that began anew, had it already",
				what, c.req.Seq, c.rs.s.ID, n)
		}
	}
	s.draw(l, c.rs)
	l.mu.Lock()
	l.last = c.rs
	l.mu.Unlock()
	s.mu.Lock()
	s.report.Served++
	s.mu.Unlock()
	if bind != nil {
		bind(c)
	}
	l.markSeen(c.req.Seq)
	s.log.Debug("replay", "method", m.Method, "name", p.Name, "recorded", c.req.Seq, "session", c.rs.s.ID)
	s.checkInputResponses(c, m, p)
}

// keyAndFacts are what a live request m is matched by: the default
// matcher's key ("" with a custom matcher: method and canonical params),
// and its facts (lr nil: it came over stdio).
func (s *Server) keyAndFacts(m *protocol.Message, lr *liveReq) (string, *reqFacts) {
	key, meta := s.matcher.keyAndMeta(m.Method, m.Params)
	f := &reqFacts{later: meta}
	if lr != nil {
		f.http = lr.facts
	}
	return key, f
}

// sessionState is what a live request's Mcp-Session-Id names.
type sessionState uint8

const (
	sessionNone    sessionState = iota // it names none
	sessionLive                        // a live session
	sessionEnded                       // a session its client ended (DELETE)
	sessionUnknown                     // one the server never gave (or forgot)
)

// sessionOf is the live session a request's Mcp-Session-Id names and its
// state; for an ended one, the client its later requests belong to.
func (s *Server) sessionOf(sid string) (*live, sessionState) {
	if sid == "" {
		return nil, sessionNone
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.legacy[sid]; l != nil {
		return l, sessionLive
	}
	if l := s.ended[sid]; l != nil {
		return l, sessionEnded
	}
	return nil, sessionUnknown
}

// endSession ends live session l (its client sent DELETE): its later
// requests are answered from what its recorded session got after its
// DELETE.
func (s *Server) endSession(l *live) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.legacy[l.id] != l {
		return
	}
	delete(s.legacy, l.id)
	after := newLive(l.rs)
	after.id = l.id
	after.taken[l.rs] = true
	if len(s.endedAt) >= maxEnded {
		delete(s.ended, s.endedAt[0])
		s.endedAt = s.endedAt[1:]
	}
	s.ended[l.id] = after
	s.endedAt = append(s.endedAt, l.id)
}

// poolsOf are where the answers to a request of client l in session state
// st are, on route.
func (s *Server) poolsOf(l *live, st sessionState, route string) []*pool {
	switch st {
	case sessionLive:
		return []*pool{l.rs.pool}
	case sessionEnded:
		return []*pool{l.rs.after, s.stray[route]}
	case sessionUnknown:
		return []*pool{s.stray[route]}
	}
	return []*pool{s.free[route]}
}
