package replay

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mcptape/mcptape/protocol"
)

// ErrNoMatch is the sentinel every miss wraps: a live request that no
// recorded request of the session its client was given matches. The replay
// server answers such a request with a JSON-RPC error (code
// [CodeNoMatch]) and keeps the miss, a *[MissError], in
// [ServerReport].Misses: errors.Is(miss, ErrNoMatch) holds.
var ErrNoMatch = errors.New("no recorded request matches")

// MissError explains a miss: what the live request was, which recorded
// session its client was given, the closest recorded request of that
// session and the fields that differ, and the other recorded sessions that
// do hold a match. It wraps [ErrNoMatch].
type MissError struct {
	// Method and Name are the live request's method and tool, prompt or
	// resource ("" when it names none).
	Method string
	Name   string
	// Session is the id of the recorded session the client was given;
	// empty when no recorded session fits the request (its era, or a
	// legacy request with no session and no initialize).
	Session string
	// Closest is the request of Session that differs from the live one in
	// the fewest fields; nil when Session holds no request of Method.
	Closest *Candidate
	// Methods are the request methods Session holds, in order, when
	// Closest is nil.
	Methods []string
	// MatchedIn lists the other recorded sessions that hold a request
	// matching the live one, in tape order: the client would have had its
	// answer there.
	MatchedIn []string
}

// Candidate is a recorded request a miss came closest to.
type Candidate struct {
	// Seq is the recorded request's sequence number in the tape.
	Seq uint64 `json:"seq"`
	// Method and Name are the recorded request's.
	Method string `json:"method"`
	Name   string `json:"name,omitempty"`
	// Diff lists the params paths that differ, each with both values
	// ("params.arguments.text: live \"x\", recorded \"y\""); the matcher's
	// ignored paths are left out. Empty with a custom MatcherFunc, which
	// says only yes or no.
	Diff []string `json:"diff,omitempty"`
}

// Unwrap returns ErrNoMatch.
func (e *MissError) Unwrap() error { return ErrNoMatch }

func (e *MissError) Error() string {
	var b strings.Builder
	b.WriteString("no recorded " + e.Method)
	if e.Name != "" {
		b.WriteString(" " + e.Name)
	}
	b.WriteString(" matches this request")
	if e.Session == "" {
		b.WriteString(": the tape holds no session for this request")
	} else {
		fmt.Fprintf(&b, " in recorded session %s (the one this client was given): ", e.Session)
		switch c := e.Closest; {
		case c == nil:
			fmt.Fprintf(&b, "it has no %s request at all (it has: %s)", e.Method, strings.Join(e.Methods, ", "))
		default:
			name := c.Name // the recorded request's, not the live one's
			if name != "" {
				name = " " + name
			}
			fmt.Fprintf(&b, "the closest recorded request is seq %d (%s%s)", c.Seq, c.Method, name)
			if len(c.Diff) > 0 {
				b.WriteString("; it differs in " + strings.Join(c.Diff, "; "))
			}
		}
	}
	switch len(e.MatchedIn) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "; recorded session %s holds a match", e.MatchedIn[0])
	default:
		fmt.Fprintf(&b, "; recorded sessions %s hold a match", strings.Join(e.MatchedIn, ", "))
	}
	return b.String()
}

// missData is a miss as the JSON-RPC error's data member, for tools that
// read it.
func (e *MissError) data() json.RawMessage {
	b, _ := json.Marshal(struct {
		Session   string     `json:"session,omitempty"`
		Closest   *Candidate `json:"closest,omitempty"`
		MatchedIn []string   `json:"matchedIn,omitempty"`
	}{e.Session, e.Closest, e.MatchedIn})
	return b
}

// explainMiss builds the MissError of live request m of client l (nil:
// none): the recorded session it was given, or the one it was answered
// from last; else, of those pools hold, the one of the closest request.
func (s *Server) explainMiss(l *live, m *protocol.Message, f *reqFacts, pools []*pool) *MissError {
	p, _ := protocol.ParseParams(m.Params)
	e := &MissError{Method: m.Method, Name: p.Name}
	var given *recSession
	if l != nil {
		l.mu.Lock()
		given = cmp.Or(l.rs, l.last)
		l.mu.Unlock()
	}
	if given == nil {
		var best *Candidate
		for _, pl := range pools {
			if pl == nil {
				continue
			}
			for _, c := range pl.byMethod[m.Method] {
				if cand := s.closest(c.rs, m); cand != nil && (best == nil || len(cand.Diff) < len(best.Diff)) {
					best, given = cand, c.rs
				}
			}
		}
	}
	if given == nil {
		// No request of its method: the session of the request most like
		// the client's, whatever its method.
		bestDist := 0
		for _, pl := range pools {
			if pl == nil {
				continue
			}
			for method, calls := range pl.byMethod {
				if method == protocol.MethodInitialize || method == protocol.MethodDiscover {
					continue // a session's handshake does not make it the client's
				}
				for _, c := range calls {
					if d := distance(f, c.facts); given == nil || d < bestDist || d == bestDist && c.rs == s.earlier(c.rs, given) {
						given, bestDist = c.rs, d
					}
				}
			}
		}
	}
	if given != nil {
		e.Session = given.s.ID
		e.Closest = s.closest(given, m)
		if e.Closest == nil {
			e.Methods = given.methods()
		}
	}
	for _, rs := range s.sessions {
		if rs != given && s.holds(rs, m) {
			e.MatchedIn = append(e.MatchedIn, rs.s.ID)
		}
	}
	return e
}

// earlier is whichever of a and b comes first in the tape.
func (s *Server) earlier(a, b *recSession) *recSession {
	for _, rs := range s.sessions {
		if rs == a || rs == b {
			return rs
		}
	}
	return a
}

// holds reports whether rs recorded a request that matches m.
func (s *Server) holds(rs *recSession, m *protocol.Message) bool {
	for _, c := range rs.byMethod[m.Method] {
		if s.matcher.Match(m.Method, m.Params, c.params()) {
			return true
		}
	}
	return false
}

// closest is the recorded request of rs with m's method that differs in
// the fewest fields; nil when rs has none.
func (s *Server) closest(rs *recSession, m *protocol.Message) *Candidate {
	var best *call
	var bestDiff []string
	for _, rc := range rs.byMethod[m.Method] {
		d := s.matcher.Diff(m.Method, m.Params, rc.params())
		if best == nil || len(d) < len(bestDiff) {
			best, bestDiff = rc, d
		}
	}
	if best == nil {
		return nil
	}
	if s.matcher.custom != nil {
		bestDiff = nil // the Diff of the default rules would not be why
	}
	return &Candidate{Seq: best.req.Seq, Method: best.method, Name: best.req.Name, Diff: bestDiff}
}

// methods lists the request methods of rs in recorded order, each once.
func (rs *recSession) methods() []string {
	var out []string
	for _, c := range rs.calls {
		if !slices.Contains(out, c.method) {
			out = append(out, c.method)
		}
	}
	return out
}
