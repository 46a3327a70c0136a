package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

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
// come, the responses carrying the live ids.

// sseLive is a live client of a replayed legacy SSE session.
type sseLive struct {
	*live
	wmu    sync.Mutex // the stream's writer: its loop, and POSTs pushing misses
	w      http.ResponseWriter
	open   bool
	ids    map[uint64]json.RawMessage // recorded request seq → the live request's id
	tokens map[string]json.RawMessage // recorded progress token → the live one
}

// endpointOf is the endpoint event of a recorded legacy SSE session, or
// nil for a session of another transport.
func (rs *recSession) endpointOf() *capture.Message {
	for _, m := range rs.get {
		if m.SSE != nil && m.SSE.Type == "endpoint" {
			return m
		}
	}
	return nil
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
		rs := s.pick(r.URL.Path, func(rs *recSession) bool { return rs.endpointOf() != nil }, func(*recSession) int { return 0 })
		if rs == nil {
			s.mu.Unlock()
			return false
		}
		s.take(rs)
		l := &sseLive{live: newLive(rs), w: w, open: true, ids: map[uint64]json.RawMessage{}, tokens: map[string]json.RawMessage{}}
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
		l.wmu.Lock()
		l.open = false
		l.wmu.Unlock()
		s.mu.Lock()
		delete(s.sse, l.id)
		s.mu.Unlock()
		l.end()
	}()
	rs := l.rs
	ep := rs.endpointOf()
	copyHeaders(w.Header(), rs.getX.ResponseHeader)
	w.Header().Set("Content-Type", protocol.ContentTypeSSE)
	w.Header().Set("Cache-Control", "no-cache")
	l.wmu.Lock()
	w.WriteHeader(http.StatusOK)
	_, err := io.WriteString(w, "event: endpoint\ndata: "+endpointURL(sseData(ep), l.id)+"\n\n")
	flush(w)
	l.wmu.Unlock()
	if err != nil {
		return
	}
	prev := ep.Time
	for _, sm := range rs.get {
		if sm == ep {
			continue
		}
		trigger := rs.triggers[sm.Seq]
		l.waitTrigger(r.Context(), trigger, s.opts.MaxGap+s.opts.AnswerTimeout)
		// The recorded pause counts from the later of the last event and
		// the request that set this one off: the client's own pace is not
		// replayed on top of it.
		if t := rs.bySeq[trigger]; t != nil && t.Time.After(prev) {
			prev = t.Time
		}
		if !s.pace(r.Context(), l.live, prev, sm.Time) {
			return
		}
		prev = sm.Time
		if !s.sseEmit(r, l, sm) {
			return
		}
	}
	select {
	case <-r.Context().Done():
	case <-l.done:
	case <-s.closed:
	}
}

// sseData is an endpoint event's data: the recorded block's data line.
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

// write sends one block on the live stream.
func (l *sseLive) write(b []byte) bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if !l.open {
		return false
	}
	if _, err := l.w.Write(b); err != nil {
		return false
	}
	flush(l.w)
	return true
}

// sseEmit writes one recorded stream message for the live client: a
// response with the live request's id (one whose request never came live
// is left out), a progress notification with the live token, a
// server→client request with a fresh id, whose answer it waits for.
func (s *Server) sseEmit(r *http.Request, l *sseLive, sm *capture.Message) bool {
	if sm.Kind == protocol.KindFrame || sm.Kind == protocol.KindInvalid {
		return l.write(sm.Raw)
	}
	data := sm.Raw
	var ask string
	l.mu.Lock()
	switch {
	case sm.Kind.IsResponse():
		id, ok := l.ids[sm.Links.Request]
		if !ok {
			l.mu.Unlock()
			return true
		}
		data = responseWithID(data, id)
	case sm.Kind == protocol.KindRequest:
		id := l.nextID
		l.nextID++
		idRaw := []byte(strconv.FormatInt(id, 10))
		data = responseWithID(data, idRaw)
		ask = string(idRaw)
	case sm.Method == protocol.MethodProgress:
		rec, _, _, _ := protocol.Member(paramsOf(sm.Raw), "progressToken")
		if tok := l.tokens[string(rec)]; len(tok) > 0 {
			if out, ok := protocol.SetMember(data, tok, "params", "progressToken"); ok {
				data = out
			}
		}
	}
	var ch chan *protocol.Message
	if ask != "" {
		ch = make(chan *protocol.Message, 1)
		l.waiting[ask] = ch
	}
	l.mu.Unlock()
	if !l.write(frame(sm, data)) {
		return false
	}
	if ch == nil {
		return true
	}
	return s.awaitAnswer(r.Context(), l.live, sm, ask, ch)
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
	accepted := func() {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "Accepted")
	}
	switch m.Kind {
	case protocol.KindInvalid:
		writeJSONError(w, http.StatusBadRequest, nil, -32700, "mcptape replay: "+m.Problem)
		return
	case protocol.KindResult, protocol.KindError:
		l.mu.Lock()
		ch := l.waiting[m.IDKey()]
		delete(l.waiting, m.IDKey())
		l.mu.Unlock()
		if ch == nil {
			s.fail(true, "the client answered id %s, which the replay server did not ask", m.ID)
		} else {
			c := m
			c.Raw = append([]byte(nil), m.Raw...)
			ch <- &c
		}
		accepted()
		return
	case protocol.KindNotification:
		accepted()
		return
	}
	p, _ := protocol.ParseParams(m.Params)
	key := s.matchKey(&m)
	c, extra := s.match(l.live, &m, key)
	if c == nil && m.Method == protocol.MethodInitialize {
		if c = l.handshakeCall(m.Method); c != nil {
			s.fail(true, "the client's %s differs from the recording (answered as recorded): %s", m.Method,
				strings.Join(s.matcher.Diff(m.Method, m.Params, c.params), "; "))
		}
	}
	accepted()
	if c == nil {
		var answer []byte
		if m.Method == protocol.MethodPing {
			answer = responseWithID([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`), m.ID)
		} else {
			msg := s.noteMiss(&m, s.closest(l.rs, &m))
			answer, _ = json.Marshal(struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   RPCError        `json:"error"`
			}{"2.0", idOrNull(m.ID), RPCError{Code: CodeNoMatch, Message: msg}})
		}
		l.write(fmt.Appendf(nil, "event: message\ndata: %s\n\n", answer))
		return
	}
	if extra {
		s.fail(true, "%s %s was called more often than recorded; the last recorded answer was replayed", m.Method, p.Name)
	}
	s.mu.Lock()
	s.report.Served++
	s.mu.Unlock()
	l.mu.Lock()
	l.ids[c.req.Seq] = append(json.RawMessage(nil), m.ID...)
	if rp, _ := protocol.ParseParams(c.params); len(p.ProgressToken) > 0 && len(rp.ProgressToken) > 0 {
		l.tokens[string(rp.ProgressToken)] = append(json.RawMessage(nil), p.ProgressToken...)
	}
	l.mu.Unlock()
	s.log.Debug("replay", "method", m.Method, "name", p.Name, "recorded", c.req.Seq, "transport", "sse")
	s.checkInputResponses(c, &m, &p)
	// Mark it seen last: the stream then replays its answer.
	l.markSeen(c.req.Seq)
}
