package replay

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// recSession is a recorded session prepared for replay: summaries of its
// messages and exchanges (a tape's index), their bytes read when replayed.
type recSession struct {
	s        *capture.Session
	ld       loader
	onErr    func(error) // a record the tape could not give
	route    string      // the route it was recorded on (`record --route`), "" for the single upstream
	msgs     []msgRef    // every message, in seq order
	calls    []*call     // every client request, in order
	byMethod map[string][]*call
	get      []*msgRef          // what the server sent on its own: the standalone GET streams
	getX     *xRef              // the standalone GET stream
	delete   *xRef              // the first DELETE
	answers  map[uint64]*msgRef // server→client request seq → the client's answer
	xs       map[uint64]*xRef   // its exchanges by id
	// sid says that its server gave it a session id (its initialize's
	// exchange was followed by requests that carried one), or that it was
	// recorded over stdio or the legacy SSE transport: a live initialize
	// answered from it opens a session of its own.
	sid bool
	sse bool // recorded over the legacy HTTP+SSE transport
	// pool holds the calls that carried its session id, answered to the
	// live session given it; after, those that came after its DELETE.
	pool, after *pool
	// notes are its exchanges that carried only notifications, by the
	// first one's method; sidX its GETs and DELETEs that named its
	// session, and afterX those after its DELETE.
	notes        map[string][]*xRef
	sidX, afterX []*xRef
	// bodies are the messages of its exchanges that carried no request
	// (plain HTTP, refusals, 202s), by exchange.
	bodies map[uint64][]*msgRef
	// plain are its exchanges that carried no MCP traffic (OAuth metadata,
	// CORS preflights, health checks, a GET without a session), and
	// invalid those whose body was no JSON-RPC message; both are indexed
	// by the server (then dropped here).
	plain, invalid []*xRef
}

// call is one recorded client request and what answered it.
type call struct {
	rs     *recSession
	req    *msgRef
	x      *xRef
	stream []*msgRef // s2c messages of its exchange, after it, in order
	method string
	facts  *reqFacts  // what its request said beyond method and params
	class  *callClass // the calls a live request cannot tell from it (default matcher)
}

// params are the recorded request's params, read from the tape (nil when
// it cannot be read; the replay server logs why).
func (c *call) params() json.RawMessage {
	m := c.rs.message(c.req)
	if m == nil {
		return nil
	}
	return paramsOf(m.Raw)
}

// message reads a recorded message's record; nil, logged, when the tape
// cannot be read.
func (rs *recSession) message(r *msgRef) *capture.Message {
	if r == nil {
		return nil
	}
	m, err := rs.ld.message(r)
	if err != nil {
		rs.onErr(err)
		return nil
	}
	return m
}

// exchange reads a recorded exchange's record; nil, logged, when the tape
// cannot be read.
func (rs *recSession) exchange(r *xRef) *capture.Exchange {
	if r == nil {
		return nil
	}
	x, err := rs.ld.exchange(r)
	if err != nil {
		rs.onErr(err)
		return nil
	}
	return x
}

// msg is the recorded message seq of the session; nil when it holds none.
func (rs *recSession) msg(seq uint64) *msgRef {
	i, ok := slices.BinarySearchFunc(rs.msgs, seq, func(r msgRef, seq uint64) int { return cmp.Compare(r.Seq, seq) })
	if !ok {
		return nil
	}
	return &rs.msgs[i]
}

// trigger is the recorded client request a server message waits for: the
// last that came before it.
func (rs *recSession) trigger(seq uint64) uint64 {
	i, _ := slices.BinarySearchFunc(rs.calls, seq, func(c *call, seq uint64) int { return cmp.Compare(c.req.Seq, seq) })
	if i == 0 {
		return 0
	}
	return rs.calls[i-1].req.Seq
}

// callAt is the recorded call whose request is seq, or nil.
func (rs *recSession) callAt(seq uint64) *call {
	i, ok := slices.BinarySearchFunc(rs.calls, seq, func(c *call, seq uint64) int { return cmp.Compare(c.req.Seq, seq) })
	if !ok {
		return nil
	}
	return rs.calls[i]
}

// afterDelete reports whether exchange x came after the session's DELETE.
func (rs *recSession) afterDelete(x *xRef) bool {
	return x != nil && rs.delete != nil && x.ID > rs.delete.ID
}

// xUse is what the client sent in one recorded exchange.
type xUse struct {
	request, invalid bool
	note             string // the first notification's method
	answer           bool
}

func prepare(ix *sessionIndex, s *capture.Session, ld loader, onErr func(error)) *recSession {
	rs := &recSession{s: s, ld: ld, onErr: onErr, route: s.Route, msgs: ix.ms, byMethod: map[string][]*call{}, answers: map[uint64]*msgRef{},
		xs: make(map[uint64]*xRef, len(ix.xs)), notes: map[string][]*xRef{}, bodies: map[uint64][]*msgRef{}}
	for i := range ix.xs {
		rs.xs[ix.xs[i].ID] = &ix.xs[i]
	}
	byX := map[uint64]*call{}
	bySeq := map[uint64]*call{}
	uses := map[uint64]*xUse{}
	// A stdio session's one "exchange" is the server's process: its
	// messages belong where their links say, as if it had none.
	stdio := s.Leg == capture.LegStdio
	for i := range ix.ms {
		m := &ix.ms[i]
		x := rs.xs[m.ExchangeID]
		if stdio {
			x = nil
		}
		if x != nil && m.Direction == protocol.ClientToServer {
			u := uses[x.ID]
			if u == nil {
				u = &xUse{}
				uses[x.ID] = u
			}
			switch {
			case m.Kind == protocol.KindRequest:
				u.request = true
			case m.Kind == protocol.KindNotification && u.note == "":
				u.note = m.Method
			case m.Kind.IsResponse():
				u.answer = true
			case m.Kind == protocol.KindInvalid:
				u.invalid = true
			}
		}
		switch {
		case m.Direction == protocol.ClientToServer && m.Kind == protocol.KindRequest:
			c := &call{rs: rs, req: m, x: x, method: m.Method}
			rs.calls = append(rs.calls, c)
			rs.byMethod[m.Method] = append(rs.byMethod[m.Method], c)
			if byX[m.ExchangeID] == nil {
				byX[m.ExchangeID] = c
			}
			bySeq[m.Seq] = c
		case m.Direction == protocol.ClientToServer && m.Kind.IsResponse():
			if m.Links.Request != 0 {
				rs.answers[m.Links.Request] = m
			}
			if x != nil {
				rs.bodies[x.ID] = append(rs.bodies[x.ID], m)
			}
		case m.Direction == protocol.ClientToServer:
			if x != nil && byX[x.ID] == nil {
				rs.bodies[x.ID] = append(rs.bodies[x.ID], m)
			}
		case m.Direction == protocol.ServerToClient:
			if x != nil && x.Method == http.MethodGet && x.ResponseBody == capture.BodySSE {
				rs.get = append(rs.get, m)
				rs.getX = x
				continue
			}
			if x != nil {
				if c := byX[m.ExchangeID]; c != nil {
					c.stream = append(c.stream, m)
				} else {
					rs.bodies[x.ID] = append(rs.bodies[x.ID], m)
				}
				continue
			}
			// No HTTP exchange (a stdio recording): a message belongs to the
			// call its links name — the request it answers or reports on,
			// or the call whose stream carried a server→client request;
			// the rest the server sent on its own, as on a GET stream.
			c := bySeq[m.Links.Request]
			if c == nil {
				c = bySeq[m.Links.Parent]
			}
			if c != nil {
				c.stream = append(c.stream, m)
			} else {
				rs.get = append(rs.get, m)
			}
		}
	}
	for i := range ix.xs {
		x := &ix.xs[i]
		if x.Method == http.MethodDelete && rs.delete == nil {
			rs.delete = x
		}
		if x.Method == http.MethodGet && rs.getX == nil && x.ResponseBody == capture.BodySSE {
			rs.getX = x
		}
	}
	rs.sse = !stdio && rs.sseEndpoint()
	rs.sid = len(rs.byMethod[protocol.MethodInitialize]) > 0 && (stdio || s.Key != "" || rs.sse || !rs.stateless())
	if stdio {
		return rs
	}
	for i := range ix.xs {
		x := &ix.xs[i]
		switch u := uses[x.ID]; {
		case u != nil && u.note != "" && !u.request:
			rs.notes[u.note] = append(rs.notes[u.note], x)
		case u != nil && u.invalid && !u.request:
			rs.invalid = append(rs.invalid, x)
		case u != nil && (u.request || u.answer || u.note != ""):
		case (rs.sid || x.Facts.sid) && (x.Method == http.MethodGet || x.Method == http.MethodDelete):
			if rs.afterDelete(x) {
				rs.afterX = append(rs.afterX, x)
			} else {
				rs.sidX = append(rs.sidX, x)
			}
		case x.Method == http.MethodGet && x.ResponseBody == capture.BodySSE && rs.sse:
			// The legacy SSE transport's stream: the session itself.
		default:
			rs.plain = append(rs.plain, x)
		}
	}
	return rs
}

// stateless reports whether the session's server gave it no session id:
// its initialize's response, recorded with its headers, named none, and no
// request of the session named one. (A tape made by hand, without
// headers, is taken to have had one.)
func (rs *recSession) stateless() bool {
	init := rs.byMethod[protocol.MethodInitialize][0]
	if init.x == nil {
		return false
	}
	for _, x := range rs.xs {
		if x.Facts.sid {
			return false
		}
	}
	x := rs.exchange(init.x)
	return x != nil && len(x.ResponseHeader) > 0 && x.ResponseHeader.Get(protocol.HeaderSessionID) == ""
}

// sseEndpoint reports whether the session was recorded over the legacy
// HTTP+SSE transport: its GET stream's first events hold an endpoint.
func (rs *recSession) sseEndpoint() bool {
	ref, _ := rs.endpointOf()
	return ref != nil
}

func paramsOf(raw []byte) json.RawMessage {
	v, _, _, _ := protocol.Member(raw, "params")
	return v
}
