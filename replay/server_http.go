package replay

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.opts.AllowAnyHost && !protocol.HostAllowed(r) {
		msg := fmt.Sprintf("mcptape replay: refused: Host %q is not a loopback name, but the request arrived on a loopback address (DNS rebinding protection; run with --allow-any-host to turn it off)", r.Host)
		s.log.Warn(msg)
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	if s.serveLegacySSE(w, r) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, r)
	case http.MethodGet:
		s.getStream(w, r)
	case http.MethodDelete:
		s.deleteSession(w, r)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	m := protocol.Decode(body)
	switch m.Kind {
	case protocol.KindInvalid:
		writeJSONError(w, http.StatusBadRequest, nil, -32700, "mcptape replay: "+m.Problem)
		return
	case protocol.KindResult, protocol.KindError:
		l := s.sessionOf(r)
		if l == nil {
			writeJSONError(w, http.StatusNotFound, nil, -32001, "mcptape replay: session not found")
			return
		}
		s.deliver(l, &m)
		w.WriteHeader(http.StatusAccepted)
		return
	case protocol.KindNotification:
		if l := s.sessionOf(r); l == nil && r.Header.Get(protocol.HeaderSessionID) != "" {
			writeJSONError(w, http.StatusNotFound, nil, -32001, "mcptape replay: session not found")
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	p, _ := protocol.ParseParams(m.Params)
	key := s.matchKey(&m)
	l := s.liveFor(r, &m, &p, key)
	if l == nil {
		if r.Header.Get(protocol.HeaderSessionID) != "" {
			writeJSONError(w, http.StatusNotFound, m.ID, -32001, "mcptape replay: session not found (it ended, or the replay server restarted)")
			return
		}
		writeJSONBody(w, http.StatusOK, s.noteMiss(nil, &m, key))
		return
	}
	c := s.resolve(l, &m, &p, key)
	if c == nil {
		if m.Method == protocol.MethodPing {
			writeJSONBody(w, http.StatusOK, responseWithID([]byte(pingResult), m.ID))
			return
		}
		writeJSONBody(w, http.StatusOK, s.noteMiss(l, &m, key))
		return
	}
	s.answer(w, r, l, c, &m, &p)
}

// answer replays a recorded call's response to a live request: its
// recorded status and headers, then its JSON body, or its SSE stream
// paced as recorded.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, l *live, c *call, m *protocol.Message, p *protocol.Params) {
	arrived := time.Now()
	fp, ok := s.planFaults(r.Context(), m.Method, p.Name)
	switch {
	case !ok:
		return
	case fp.status != 0:
		w.WriteHeader(fp.status)
		return
	case fp.err != nil:
		writeJSONBody(w, http.StatusOK, errorResponse(m.ID, fp.err))
		return
	}
	h := w.Header()
	status := http.StatusOK
	sse := true
	if c.x != nil {
		if x := l.rs.exchange(c.x); x != nil {
			copyHeaders(h, x.ResponseHeader)
		}
		if c.x.Status != 0 {
			status = c.x.Status
		}
		sse = c.x.ResponseBody == capture.BodySSE
	}
	if m.Method == protocol.MethodInitialize && l.id != "" {
		h.Set(protocol.HeaderSessionID, l.id)
	}
	if !sse {
		ref := s.responseOf(c)
		if ref == nil {
			writeJSONBody(w, http.StatusOK, s.noteUnanswered(l, c, m, p))
			return
		}
		resp := l.rs.message(ref)
		if resp == nil {
			// The tape could not give the record (the report says why).
			writeJSONError(w, http.StatusOK, m.ID, -32603, "mcptape replay: the recorded answer could not be read from the tape (the file changed or went away while the replay ran); restart the replay with the tape as it was recorded")
			return
		}
		h.Set("Content-Type", protocol.ContentTypeJSON)
		w.WriteHeader(status)
		_, _ = w.Write(responseWithID(resp.Raw, m.ID))
		flush(w)
		s.afterResponse(l, fp.listChanged...)
		return
	}
	h.Set("Content-Type", protocol.ContentTypeSSE)
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	flush(w)
	switch s.replayStream(r.Context(), sseOut{w}, l, c, m, p, &fp, arrived) {
	case streamCut:
		panic(http.ErrAbortHandler)
	case streamOpen:
		// A stream that never answers (subscriptions/listen): hold it open
		// until the client closes it.
		s.hold(r.Context(), sseOut{w}, l, listenStream(m))
	}
}

// sseOut writes replayed messages as the events of an SSE response.
type sseOut struct{ w http.ResponseWriter }

func (o sseOut) send(sm *capture.Message, data []byte) error {
	if _, err := o.w.Write(frame(sm, data)); err != nil {
		return err
	}
	flush(o.w)
	return nil
}

func (o sseOut) frame(sm *capture.Message) error {
	if _, err := o.w.Write(sm.Raw); err != nil {
		return err
	}
	flush(o.w)
	return nil
}

// getStream replays a legacy session's standalone GET stream.
func (s *Server) getStream(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	l := s.legacy[r.Header.Get(protocol.HeaderSessionID)]
	s.mu.Unlock()
	if l == nil {
		if r.Header.Get(protocol.HeaderSessionID) == "" {
			http.Error(w, "mcptape replay: the recorded server has no stream for requests without a session", http.StatusMethodNotAllowed)
			return
		}
		writeJSONError(w, http.StatusNotFound, nil, -32001, "mcptape replay: session not found")
		return
	}
	// What a stdio server sent on its own goes on the GET stream too.
	if l.rs.getX == nil && len(l.rs.get) == 0 {
		http.Error(w, "mcptape replay: the recording has no standalone GET stream", http.StatusMethodNotAllowed)
		return
	}
	start := l.rs.s.Start
	if l.rs.getX != nil {
		start = l.rs.getX.Start
		if x := l.rs.exchange(l.rs.getX); x != nil {
			copyHeaders(w.Header(), x.ResponseHeader)
		}
	}
	w.Header().Set("Content-Type", protocol.ContentTypeSSE)
	w.WriteHeader(http.StatusOK)
	flush(w)
	out := make(chan struct{}) // closed when the recorded messages are out
	l.mu.Lock()
	l.gets = append(l.gets, out)
	l.mu.Unlock()
	defer closeOnce(out)
	pc := &pacer{prevRec: start, prevLive: time.Now()}
	for _, sm := range l.rs.get {
		trigger := l.rs.trigger(sm.Seq)
		if !l.draining() && !s.pace(r.Context(), l, pc, sm, trigger, l.drain) {
			return
		}
		if l.draining() {
			// The client ended the session: what the recording carried
			// before its DELETE goes at once, if what set it off came.
			if l.rs.delete == nil || !sm.Time.Before(l.rs.delete.Start) {
				break
			}
			if _, seen := l.seenAt(trigger); trigger != 0 && !seen {
				continue
			}
		}
		if !s.emit(r.Context(), sseOut{w}, l, &call{}, sm, &protocol.Message{}, &protocol.Params{}) {
			return
		}
	}
	closeOnce(out)
	s.hold(r.Context(), sseOut{w}, l, &openStream{})
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(protocol.HeaderSessionID)
	s.mu.Lock()
	l := s.legacy[sid]
	s.mu.Unlock()
	if l == nil {
		http.Error(w, "mcptape replay: session not found", http.StatusNotFound)
		return
	}
	// The session lives on while its GET stream delivers what was recorded
	// before the DELETE (and the client may answer a request there).
	l.endAfterDrain()
	s.mu.Lock()
	if s.legacy[sid] == l {
		delete(s.legacy, sid)
	}
	s.mu.Unlock()
	status := http.StatusOK
	if l.rs.delete != nil && l.rs.delete.Status != 0 {
		status = l.rs.delete.Status
	}
	w.WriteHeader(status)
}

// copyHeaders copies recorded response headers, leaving out what belongs
// to the recorded connection or session, and redacted values.
func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Date", "Connection", "Keep-Alive", "Transfer-Encoding", "Mcp-Session-Id", "Set-Cookie", "Content-Encoding":
			continue
		}
		for _, v := range vs {
			if strings.Contains(v, capture.Redacted) {
				continue
			}
			dst.Add(k, v)
		}
	}
}

func flush(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() }

func writeJSONBody(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", protocol.ContentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeJSONError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   RPCError        `json:"error"`
	}{"2.0", idOrNull(id), RPCError{Code: code, Message: msg}})
	writeJSONBody(w, status, b)
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
