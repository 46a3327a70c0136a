package replay

import (
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
// that opens a session (when the tape has one) and the POSTs that name
// one. It reports whether it answered.
func (s *Server) serveLegacySSE(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Method == http.MethodGet && r.Header.Get(protocol.HeaderSessionID) == "":
		s.mu.Lock()
		rs := s.pick(r.URL.Path, func(rs *recSession) bool { ref, _ := rs.endpointOf(); return ref != nil }, func(*recSession) int { return 0 })
		if rs == nil {
			s.mu.Unlock()
			return false
		}
		s.take(rs)
		l := &sseLive{live: newLive(rs), o: &lockedOut{o: sseOut{w}}, ids: map[uint64]json.RawMessage{}, tokens: map[uint64]json.RawMessage{}}
		l.id = newSessionID()
		if s.sse == nil {
			s.sse = map[string]*sseLive{}
		}
		s.sse[l.id] = l
		s.mu.Unlock()
		s.sseStream(w, r, l)
		return true
	case r.Method == http.MethodPost && r.Header.Get(protocol.HeaderSessionID) == "" && sseSessionID(r) != "":
		s.mu.Lock()
		l := s.sse[sseSessionID(r)]
		s.mu.Unlock()
		if l == nil {
			return false // not ours: a Streamable HTTP server may use the query too
		}
		s.ssePost(w, r, l)
		return true
	}
	return false
}

// endpointURL is the recorded endpoint with the live session's id: a
// path and query, which the client resolves against the stream's URL.
func endpointURL(recorded, sid string) string {
	u, err := url.Parse(strings.TrimSpace(recorded))
	if err != nil {
		return "/message?sessionId=" + url.QueryEscape(sid)
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

// sseStream replays a legacy SSE session's stream.
func (s *Server) sseStream(w http.ResponseWriter, r *http.Request, l *sseLive) {
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
		copyHeaders(w.Header(), x.ResponseHeader)
	}
	w.Header().Set("Content-Type", protocol.ContentTypeSSE)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if l.o.frame(&capture.Message{Raw: []byte("event: endpoint\ndata: " + endpointURL(data, l.id) + "\n\n")}) != nil {
		return
	}
	pc := &pacer{prevRec: ep.Time, prevLive: time.Now()}
	for _, ref := range rs.get {
		if ref == ep {
			continue
		}
		if !s.pace(r.Context(), l.live, pc, ref, rs.trigger(ref.Seq), nil) {
			return
		}
		// Each message goes as part of the call it belongs to: a response
		// with its live request's id, progress with its live token.
		c, m, p := &call{}, &protocol.Message{}, &protocol.Params{}
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
	}
	s.hold(r.Context(), l.o, l.live, &openStream{})
}

// ssePost takes a message the client POSTed to a legacy SSE session: 202,
// and its answer on the stream.
func (s *Server) ssePost(w http.ResponseWriter, r *http.Request, l *sseLive) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	m := protocol.Decode(body)
	if m.Kind == protocol.KindInvalid {
		writeJSONError(w, http.StatusBadRequest, nil, -32700, "mcptape replay: "+m.Problem)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, "Accepted")
	switch m.Kind {
	case protocol.KindResult, protocol.KindError:
		s.deliver(l.live, &m)
		return
	case protocol.KindNotification:
		return
	}
	p, _ := protocol.ParseParams(m.Params)
	key := s.matchKey(&m)
	c := s.resolveThen(l.live, &m, &p, key, func(c *call) {
		l.mu.Lock()
		l.ids[c.req.Seq] = append(json.RawMessage(nil), m.ID...)
		if len(p.ProgressToken) > 0 {
			l.tokens[c.req.Seq] = append(json.RawMessage(nil), p.ProgressToken...)
		}
		l.mu.Unlock()
	})
	if c != nil {
		return
	}
	answer := responseWithID([]byte(pingResult), m.ID)
	if m.Method != protocol.MethodPing {
		answer = s.noteMiss(l.live, &m, key)
	}
	_ = l.o.send(nil, answer)
}
