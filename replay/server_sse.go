package replay

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// The legacy HTTP+SSE transport (2024-11-05) on replay.
//
// A recorded session of that transport opened with a GET stream whose
// first event, endpoint, named the URL the client POSTs its messages to
// (with the session's id in its query); every answer came on that stream.
// The replay server does the same: a GET without a session id opens a
// recorded legacy SSE session, its endpoint event naming the recorded
// path with a session id of its own; each POST to it is answered 202 and
// matched like any request, and the stream replays the recorded events in
// order, each once the live request that preceded it in the recording has
// come, the responses carrying the live ids and progress the live tokens.

// sseLive is a live client of a replayed legacy SSE session.
type sseLive struct {
	*live
	o      *lockedOut
	ids    map[uint64]json.RawMessage // recorded request seq → the live request's id
	tokens map[uint64]json.RawMessage // recorded request seq → the live progress token
}

// lockedOut is an SSE stream two goroutines write: the stream's replay,
// and the POSTs whose misses are answered on it.
type lockedOut struct {
	mu   sync.Mutex
	o    sseOut
	gone bool
}

func (o *lockedOut) send(sm *capture.Message, data []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone {
		return io.ErrClosedPipe
	}
	return o.o.send(sm, data)
}

func (o *lockedOut) frame(sm *capture.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone {
		return io.ErrClosedPipe
	}
	return o.o.frame(sm)
}

func (o *lockedOut) settle(ctx context.Context, written time.Time) { o.o.settle(ctx, written) }

func (o *lockedOut) close() {
	o.mu.Lock()
	o.gone = true
	o.mu.Unlock()
}

// maxEndpointLook bounds the GET stream's leading frames read looking for
// the endpoint event.
const maxEndpointLook = 4

// endpointOf is the endpoint event of a recorded legacy SSE session and
// its data (the URL), or nil for a session of another transport.
func (rs *recSession) endpointOf() (*msgRef, string) {
	n := 0
	for _, ref := range rs.get {
		if ref.Kind != protocol.KindFrame {
			continue
		}
		if n++; n > maxEndpointLook {
			break
		}
		if m := rs.message(ref); m != nil && m.SSE != nil && m.SSE.Type == "endpoint" {
			return ref, sseData(m)
		}
	}
	return nil, ""
}

// sseData is an SSE block's data line.
func sseData(m *capture.Message) string {
	raw := string(m.Raw)
	if m.SSE != nil && len(m.SSE.Whole) > 0 {
		raw = string(m.SSE.Whole)
	}
	for _, line := range strings.Split(raw, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:"); ok {
			return strings.TrimPrefix(v, " ")
		}
	}
	return strings.TrimSpace(raw)
}

// sseSessionID is the legacy SSE session a request's query names.
func sseSessionID(r *http.Request) string {
	q := r.URL.Query()
	if v := q.Get("sessionId"); v != "" {
		return v
	}
	return q.Get("session_id")
}

// serveLegacySSE serves the requests of the legacy SSE transport: the GET
// that opens a session, on the path a recorded one was opened on, and the
// POSTs that name one. It reports whether it answered.
func (s *Server) serveLegacySSE(w http.ResponseWriter, lr *liveReq) bool {
	r := lr.r
	switch {
	case r.Method == http.MethodGet && r.Header.Get(protocol.HeaderSessionID) == "":
		s.mu.Lock()
		var rs *recSession
		for _, c := range s.sessions {
			if c.route == lr.route && c.getX != nil && c.getX.Facts.path == lr.path && c.sse && (rs == nil || s.uses[c] < s.uses[rs]) {
				rs = c
			}
		}
		if rs == nil {
			s.mu.Unlock()
			return false
		}
		s.take(rs)
		l := &sseLive{live: newLive(rs), o: &lockedOut{o: sseOut{w}}, ids: map[uint64]json.RawMessage{}, tokens: map[uint64]json.RawMessage{}}
		l.id = newSessionID()
		l.taken[rs] = true
		if s.sse == nil {
			s.sse = map[string]*sseLive{}
		}
		s.sse[l.id] = l
		s.mu.Unlock()
		s.sseStream(w, lr, l)
		return true
	case r.Method == http.MethodPost && r.Header.Get(protocol.HeaderSessionID) == "" && sseSessionID(r) != "":
		s.mu.Lock()
		l := s.sse[sseSessionID(r)]
		s.mu.Unlock()
		if l == nil {
			return false // not ours: a Streamable HTTP server may use the query too
		}
		s.ssePost(w, lr, l)
		return true
	}
	return false
}

// endpointURL is the recorded endpoint with the live session's id: a
// path and query, which the client resolves against the stream's URL;
// an absolute path goes under prefix (the route's, when the client named
// it), as the recorder rewrote it.
func endpointURL(recorded, sid, prefix string) string {
	u, err := url.Parse(strings.TrimSpace(recorded))
	if err != nil {
		return prefix + "/message?sessionId=" + url.QueryEscape(sid)
	}
	if strings.HasPrefix(u.Path, "/") {
		u.Path = prefix + u.Path
		u.RawPath = ""
	}
	q := u.Query()
	key := "sessionId"
	if q.Get(key) == "" && q.Get("session_id") != "" {
		key = "session_id"
	}
	q.Set(key, sid)
	u.RawQuery = q.Encode()
	u.Scheme, u.Host, u.User = "", "", nil
	return u.String()
}

// prefixOf is the route prefix the client of lr named ("" for none).
func prefixOf(lr *liveReq) string {
	_, _, prefix := front(lr)
	return prefix
}

// sseStream replays a legacy SSE session's stream.
func (s *Server) sseStream(w http.ResponseWriter, lr *liveReq, l *sseLive) {
	r := lr.r
	defer func() {
		l.o.close()
		s.mu.Lock()
		delete(s.sse, l.id)
		s.mu.Unlock()
		l.end()
	}()
	rs := l.rs
	ep, data := rs.endpointOf()
	if x := rs.exchange(rs.getX); x != nil {
		s.copyHeaders(w.Header(), lr, rs, x, "")
	} else {
		w.Header().Set("Content-Type", protocol.ContentTypeSSE)
	}
	w.WriteHeader(http.StatusOK)
	if l.o.frame(&capture.Message{Raw: []byte("event: endpoint\ndata: " + endpointURL(data, l.id, prefixOf(lr)) + "\n\n")}) != nil {
		return
	}
	pc := &pacer{prevRec: ep.Time, prevLive: time.Now()}
	var st settler
	for _, ref := range rs.get {
		if ref == ep {
			continue
		}
		if !s.pace(r.Context(), l.live, rs, pc, ref, rs.trigger(ref.Seq), nil) {
			return
		}
		st.before(r.Context(), l.o, ref)
		// Each message goes as part of the call it belongs to: a response
		// with its live request's id, progress with its live token.
		c, m, p := &call{rs: rs}, &protocol.Message{}, &protocol.Params{}
		if req := ref.Links.Request; req != 0 {
			l.mu.Lock()
			id, ok := l.ids[req]
			p.ProgressToken = l.tokens[req]
			l.mu.Unlock()
			if !ok && ref.Kind.IsResponse() {
				continue // its request never came live
			}
			c.req, m.ID = &msgRef{Seq: req}, id
		}
		if !s.emit(r.Context(), l.o, l.live, c, ref, m, p) {
			return
		}
		st.after(ref)
	}
	s.hold(r.Context(), l.o, l.live, &openStream{})
}

// ssePost takes a message the client POSTed to a legacy SSE session:
// answered as the recorded POST of its like was (202), its answer on the
// stream.
func (s *Server) ssePost(w http.ResponseWriter, lr *liveReq, l *sseLive) {
	body, err := io.ReadAll(io.LimitReader(lr.r.Body, maxBody))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	m := protocol.Decode(body)
	if m.Kind == protocol.KindInvalid {
		writeJSONError(w, http.StatusBadRequest, nil, -32700, "mcptape replay: "+m.Problem)
		return
	}
	switch m.Kind {
	case protocol.KindResult, protocol.KindError:
		seq := s.deliver(l.live, &m)
		if ref := l.rs.answers[seq]; seq != 0 && ref != nil && l.rs.xs[ref.ExchangeID] != nil &&
			s.writeExchange(w, lr, l.rs, l.rs.xs[ref.ExchangeID], l.rs.bodies[ref.ExchangeID], "") {
			return
		}
		accepted(w)
		return
	case protocol.KindNotification:
		if x := l.noteExchange(m.Method); x != nil && s.writeExchange(w, lr, l.rs, x, l.rs.bodies[x.ID], "") {
			return
		}
		accepted(w)
		return
	}
	p, _ := protocol.ParseParams(m.Params)
	key, f := s.keyAndFacts(&m, lr)
	pools := []*pool{l.rs.pool}
	c := s.resolve(l.live, pools, &m, &p, key, f, func(c *call) {
		l.mu.Lock()
		l.ids[c.req.Seq] = append(json.RawMessage(nil), m.ID...)
		if len(p.ProgressToken) > 0 {
			l.tokens[c.req.Seq] = append(json.RawMessage(nil), p.ProgressToken...)
		}
		l.mu.Unlock()
	})
	if c != nil {
		if c.x == nil || !s.writeExchange(w, lr, c.rs, c.x, c.stream, "") {
			accepted(w)
		}
		return
	}
	accepted(w)
	answer := responseWithID([]byte(pingResult), m.ID)
	if m.Method != protocol.MethodPing {
		answer = s.noteMiss(l.live, &m, f, pools)
	}
	_ = l.o.send(nil, answer)
}

// accepted is a legacy SSE POST's 202 when the recording holds none to
// replay.
func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, "Accepted")
}
