package replay

import (
	"bytes"
	"html"
	"mime"
	"net/http"
	"strings"

	"github.com/mcptape/mcptape/protocol"
)

// Exchanges that carried no MCP traffic: OAuth protected-resource
// metadata, CORS preflights, health checks, a GET without a session, a
// body that was no JSON-RPC. They are answered as recorded, by method and
// path, the closest facts first (credentials, Origin, the session header
// named or not); a path the recording never saw gets what the recorded
// server answered a path it did not know, else 404.

// recX is a recorded exchange and its session.
type recX struct {
	rs *recSession
	x  *xRef
}

// plainIndex is a route's recorded exchanges that carried no MCP traffic.
type plainIndex struct {
	byPath  map[string][]recX // by "METHOD path"
	invalid []recX            // bodies that were no JSON-RPC message
	notes   map[string][]recX // notification exchanges of sessions without an id, by method
	unknown recX              // the recorded answer to a path the server did not know
}

func newPlainIndex() *plainIndex {
	return &plainIndex{byPath: map[string][]recX{}, notes: map[string][]recX{}}
}

func (px *plainIndex) add(rs *recSession, x *xRef, invalid bool) {
	if invalid {
		px.invalid = append(px.invalid, recX{rs, x})
		return
	}
	k := x.Method + " " + x.Facts.path
	px.byPath[k] = append(px.byPath[k], recX{rs, x})
}

func (px *plainIndex) addNote(rs *recSession, x *xRef, method string) {
	px.notes[method] = append(px.notes[method], recX{rs, x})
}

// closestX is the exchange of xs that answers lr: of those that named a
// session when lr does, the closest in facts, then the one that answered
// least, then the first; body, when set, prefers a recorded request body
// equal to it. It counts the answer.
func (s *Server) closestX(xs []recX, lr *liveReq, body []byte) (recX, bool) {
	live := &reqFacts{http: lr.facts}
	type candidate struct {
		recX
		dist int
		same bool
	}
	// The recorded bodies are read from the tape outside the server's
	// lock, and only the first maxBodyCompare.
	var cands []candidate
	for _, c := range xs {
		if c.x.Facts.sid != lr.facts.sid {
			continue
		}
		cd := candidate{recX: c, dist: distance(live, &reqFacts{http: c.x.Facts})}
		cd.same = body != nil && len(cands) < maxBodyCompare && bytes.Equal(s.requestBody(c), body)
		cands = append(cands, cd)
	}
	var best candidate
	bestUses := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cands {
		u := s.xUses[c.x]
		switch {
		case best.x == nil:
		case c.same != best.same:
			if !c.same {
				continue
			}
		case c.dist != best.dist:
			if c.dist > best.dist {
				continue
			}
		case u >= bestUses:
			continue
		}
		best, bestUses = c, u
	}
	if best.x == nil {
		return recX{}, false
	}
	s.xUses[best.x]++
	return best.recX, true
}

// maxBodyCompare bounds the recorded request bodies a plain request is
// compared with.
const maxBodyCompare = 64

// requestBody is what the client sent in a plain recorded exchange (its
// body as stored, which keeps the first MaxPlainBody bytes, redacted).
func (s *Server) requestBody(c recX) []byte {
	var b []byte
	for _, ref := range c.rs.bodies[c.x.ID] {
		if ref.Direction == protocol.ClientToServer {
			if m := c.rs.message(ref); m != nil {
				b = append(b, m.Raw...)
			}
		}
	}
	return b
}

// servePlain answers lr (body: what a POST carried) as the recording
// answered the closest exchange of the same method and path that carried
// no MCP traffic; a path it never saw, as the recorded server answered a
// path it did not know. It reports whether it answered.
func (s *Server) servePlain(w http.ResponseWriter, lr *liveReq, body []byte) bool {
	px := s.plain[lr.route]
	if px == nil {
		return false
	}
	c, ok := s.closestX(px.byPath[lr.r.Method+" "+lr.path], lr, body)
	if ok {
		return s.writeExchange(w, lr, c.rs, c.x, c.rs.bodies[c.x.ID], lr.r.Header.Get(protocol.HeaderSessionID))
	}
	if lr.r.Method != http.MethodGet || s.mcpPath(lr.route, lr.path) {
		return false
	}
	if c, ok = s.unknownPath(lr); !ok {
		return false
	}
	x := c.rs.exchange(c.x)
	b, ok := bodyOf(c.rs, c.rs.bodies[c.x.ID], 0, nil)
	if x == nil || !ok {
		return false
	}
	// The server's page for a path it did not know names the path (as
	// Express's "Cannot GET /favicon.ico" does): it names the live one.
	rec := []byte(c.x.Facts.path)
	live := lr.path
	if mt, _, _ := mime.ParseMediaType(x.ResponseHeader.Get("Content-Type")); mt == "text/html" {
		rec, live = []byte(html.EscapeString(c.x.Facts.path)), html.EscapeString(lr.path)
	}
	b = bytes.ReplaceAll(b, rec, []byte(live))
	sizeAs(w.Header(), x, b)
	s.writeHeader(w, lr, c.rs, x, "")
	_, _ = w.Write(b)
	return true
}

// servePlainNote answers a notification POST of a client without a
// session (or naming one the server does not know) as the route's
// recorded ones were answered.
func (s *Server) servePlainNote(w http.ResponseWriter, lr *liveReq, method string) bool {
	px := s.plain[lr.route]
	if px == nil {
		return false
	}
	c, ok := s.closestX(px.notes[method], lr, nil)
	if !ok {
		return false
	}
	return s.writeExchange(w, lr, c.rs, c.x, c.rs.bodies[c.x.ID], lr.r.Header.Get(protocol.HeaderSessionID))
}

// serveInvalid answers a body that is no JSON-RPC message as the recorded
// server answered one: the same bytes if recorded, else the closest.
func (s *Server) serveInvalid(w http.ResponseWriter, lr *liveReq, body []byte) bool {
	px := s.plain[lr.route]
	if px == nil {
		return false
	}
	c, ok := s.closestX(px.invalid, lr, body)
	if !ok {
		return false
	}
	return s.writeExchange(w, lr, c.rs, c.x, c.rs.bodies[c.x.ID], lr.r.Header.Get(protocol.HeaderSessionID))
}

// unknownPath is the recorded answer to a GET of a path the recorded
// server did not know: a 404 to a path no MCP session used, the first.
func (s *Server) unknownPath(lr *liveReq) (recX, bool) {
	px := s.plain[lr.route]
	if px == nil || px.unknown.x == nil {
		return recX{}, false
	}
	return px.unknown, true
}

// findUnknown notes, for each route, its recorded answer to a path the
// server did not know (see unknownPath), once every session is indexed.
func (s *Server) findUnknown() {
	for route, px := range s.plain {
		for k, xs := range px.byPath {
			if !strings.HasPrefix(k, "GET ") {
				continue
			}
			for _, c := range xs {
				if c.x.Status == http.StatusNotFound && !s.mcpPath(route, c.x.Facts.path) && (px.unknown.x == nil || c.x.ID < px.unknown.x.ID) {
					px.unknown = c
				}
			}
		}
	}
}

// notFound answers a path the recording never saw, and no 404 of the
// recorded server for one: 404.
func (s *Server) notFound(w http.ResponseWriter, lr *liveReq) {
	http.Error(w, "404 page not found: the recording holds no answer for "+lr.r.Method+" "+lr.path, http.StatusNotFound)
}

// mcpPath reports whether path is the MCP endpoint of a recorded session
// on route.
func (s *Server) mcpPath(route, path string) bool { return s.endpoints[route+"\x00"+path] }
