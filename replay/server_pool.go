package replay

import (
	"github.com/mcptape/mcptape/protocol"
)

// pool is recorded calls a live request may be answered by, grouped so
// that choosing one looks at the few classes of requests alike in method
// and params, not at every call.
type pool struct {
	byKey    map[string][]*callClass // default matcher: match key → classes, by first call
	byMethod map[string][]*call      // every call, by method, in recorded order
	classOf  map[classKey]*callClass // while building
}

// callClass is the recorded calls a live request cannot tell apart: the
// same method and params (as the matcher keys them) and the same facts.
// They answer in recorded order.
type callClass struct {
	facts *reqFacts
	calls []*call
}

type classKey struct {
	key   string
	facts *reqFacts
}

func newPool() *pool {
	return &pool{byKey: map[string][]*callClass{}, byMethod: map[string][]*call{}, classOf: map[classKey]*callClass{}}
}

// add puts c, of match key key ("" with a custom matcher), in the pool.
func (p *pool) add(c *call, key string) {
	p.byMethod[c.method] = append(p.byMethod[c.method], c)
	if key == "" {
		return
	}
	k := classKey{key, c.facts}
	cl := p.classOf[k]
	if cl == nil {
		cl = &callClass{facts: c.facts}
		p.classOf[k] = cl
		p.byKey[key] = append(p.byKey[key], cl)
	}
	cl.calls = append(cl.calls, c)
	c.class = cl
}

// usage is what one live client was answered with so far.
type usage struct {
	next map[*callClass]int // by class, how many of its calls it had
	used map[*call]int      // calls it had otherwise (a custom matcher, a handshake that matched none)
}

func newUsage() usage { return usage{next: map[*callClass]int{}, used: map[*call]int{}} }

// ranked is a candidate call and how well it answers: the lower dist
// (see distance), then the fewer times it answered this client already,
// then the earlier recorded, the better.
type ranked struct {
	c    *call
	diff int // handshakes that match none: how many params paths differ
	dist int
	uses int
}

func (a ranked) better(b ranked) bool {
	switch {
	case b.c == nil:
		return true
	case a.diff != b.diff:
		return a.diff < b.diff
	case a.dist != b.dist:
		return a.dist < b.dist
	case a.uses != b.uses:
		return a.uses < b.uses
	}
	return a.c.req.Seq < b.c.req.Seq
}

// choose finds the recorded call of pools that answers live request m
// (match key key, facts f) for a client that was answered as u says, and
// counts it in u. extra reports that every call alike was given to the
// client already: the last of them answers again. Nil is no match.
func (s *Server) choose(u *usage, pools []*pool, m *protocol.Message, key string, f *reqFacts) (c *call, extra bool) {
	var best ranked
	if s.matcher.custom == nil {
		// One class alike in params needs no distance (nor the live
		// request's _meta read).
		classes := 0
		for _, p := range pools {
			if p != nil {
				classes += len(p.byKey[key])
			}
		}
		for _, p := range pools {
			if p == nil {
				continue
			}
			for _, cl := range p.byKey[key] {
				n := u.next[cl]
				r := ranked{c: cl.calls[min(n, len(cl.calls)-1)], uses: max(0, n-len(cl.calls)+1)}
				if classes > 1 {
					r.dist = distance(f, cl.facts)
				}
				if r.better(best) {
					best = r
				}
			}
		}
		if best.c != nil {
			u.next[best.c.class]++
		}
		return best.c, best.uses > 0
	}
	var last *call
	for _, p := range pools {
		if p == nil {
			continue
		}
		for _, c := range p.byMethod[m.Method] {
			if !s.matcher.Match(m.Method, m.Params, c.params()) {
				continue
			}
			r := ranked{c: c, dist: distance(f, c.facts), uses: u.used[c]}
			if r.better(best) {
				best = r
			}
			last = c
		}
	}
	if best.c == nil {
		return nil, false
	}
	if best.uses > 0 {
		best.c = last // as the default matcher: the last alike answers again
	}
	u.used[best.c]++
	return best.c, best.uses > 0
}

// closestHandshake is the recorded initialize or server/discover of pools
// closest to a live one that matches none: the handshake is answered as
// recorded whoever the client says it is.
func (s *Server) closestHandshake(u *usage, pools []*pool, m *protocol.Message, f *reqFacts) *call {
	var best ranked
	for _, p := range pools {
		if p == nil {
			continue
		}
		for _, c := range p.byMethod[m.Method] {
			r := ranked{c: c, diff: len(s.matcher.Diff(m.Method, m.Params, c.params())), dist: distance(f, c.facts), uses: u.used[c]}
			if r.better(best) {
				best = r
			}
		}
	}
	if best.c != nil {
		u.used[best.c]++
	}
	return best.c
}

// peek ranks how pools answer m (facts f) for a client that was answered
// as u says, without counting it: whether the closest recorded requests
// alike hold one it has not had.
func (s *Server) peek(u *usage, pools []*pool, m *protocol.Message, key string, f *reqFacts) matchRank {
	rank, best := matchNone, -1
	note := func(d int, fresh bool) {
		r := matchUsed
		if fresh {
			r = matchFresh
		}
		switch {
		case best < 0 || d < best:
			best, rank = d, r
		case d == best:
			rank = min(rank, r)
		}
	}
	for _, p := range pools {
		if p == nil {
			continue
		}
		if s.matcher.custom == nil {
			for _, cl := range p.byKey[key] {
				note(distance(f, cl.facts), u.next[cl] < len(cl.calls))
			}
			continue
		}
		for _, c := range p.byMethod[m.Method] {
			if s.matcher.Match(m.Method, m.Params, c.params()) {
				note(distance(f, c.facts), u.used[c] == 0)
			}
		}
	}
	return rank
}

// matchRank orders how well a pool answers a request.
type matchRank uint8

const (
	matchFresh matchRank = iota // a matching recorded call not replayed yet
	matchUsed                   // only matching calls already replayed
	matchNone                   // no matching call
)
