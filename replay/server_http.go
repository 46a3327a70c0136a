package replay

import (
	"context"
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

// maxBody bounds a request body the replay server reads.
const maxBody = 64 << 20

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.opts.AllowAnyHost && !protocol.HostAllowed(r) {
		msg := fmt.Sprintf("mcptape replay: refused: Host %q is not a loopback name, but the request arrived on a loopback address (DNS rebinding protection; run with --allow-any-host to turn it off)", r.Host)
		s.log.Warn(msg)
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	lr := s.liveRequest(r)
	if s.serveLegacySSE(w, lr) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, lr)
	case http.MethodGet:
		s.get(w, lr)
	case http.MethodDelete:
		s.deleteSession(w, lr)
	default:
		s.serveOther(w, lr, "mcptape replay: method not allowed")
	}
}

// serveOther answers a request that no MCP session takes as the recording
// answered its like (see servePlain); the recording holding none, an MCP
// endpoint answers 405 (why says why) and any other path 404.
func (s *Server) serveOther(w http.ResponseWriter, lr *liveReq, why string) {
	switch {
	case s.servePlain(w, lr, nil):
	case s.mcpPath(lr.route, lr.path):
		http.Error(w, why, http.StatusMethodNotAllowed)
	default:
		s.notFound(w, lr)
	}
}

// liveRequest reads what matching needs of r: its route and facts.
func (s *Server) liveRequest(r *http.Request) *liveReq {
	route, path, prefixed := s.splitRoute(r.URL.Path)
	f := factsOf(path, r.Header)
	return &liveReq{r: r, route: route, path: path, prefixed: prefixed, facts: &f}
}

// post answers a POST: a JSON-RPC message as the recording answered its
// like, anything else as a plain HTTP exchange.
func (s *Server) post(w http.ResponseWriter, lr *liveReq) {
	r := lr.r
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	m := protocol.Decode(body)
	sid := r.Header.Get(protocol.HeaderSessionID)
	if m.Kind == protocol.KindInvalid {
		// No JSON-RPC: an OAuth registration or token request (plain HTTP,
		// when it names no MCP header), else what the recorded server
		// said to a body it could not read.
		if sid == "" && !strings.Contains(r.Header.Get("Accept"), protocol.ContentTypeSSE) && s.servePlain(w, lr, body) {
			return
		}
		if s.serveInvalid(w, lr, body) {
			return
		}
		writeJSONError(w, http.StatusBadRequest, nil, -32700, "mcptape replay: "+m.Problem)
		return
	}
	l, st := s.sessionOf(sid)
	p, _ := protocol.ParseParams(m.Params)
	switch m.Kind {
	case protocol.KindResult, protocol.KindError:
		if st != sessionLive {
			s.unknownSession(w, lr, m.ID, st)
			return
		}
		s.writeAnswered(w, lr, l, s.deliver(l, &m))
		return
	case protocol.KindNotification:
		s.writeNoted(w, lr, l, st, &m, &p)
		return
	}
	key, f := s.keyAndFacts(&m, lr)
	var c *call
	if st == sessionNone && m.Method == protocol.MethodInitialize {
		l, c = s.open(lr, &m, &p, key, f)
	} else {
		if st == sessionNone || st == sessionUnknown {
			prefix := ""
			if st == sessionUnknown {
				prefix = "stray\x00"
			}
			l = s.clientFor(prefix+fingerprint(r.RemoteAddr, lr.path, &p), &m, key, f, s.poolsOf(nil, st, lr.route))
		}
		c = s.resolve(l, s.poolsOf(l, st, lr.route), &m, &p, key, f, nil)
	}
	if c == nil {
		switch {
		case st == sessionUnknown || st == sessionEnded:
			s.unknownSession(w, lr, m.ID, st)
		case m.Method == protocol.MethodPing:
			writeJSONBody(w, http.StatusOK, responseWithID([]byte(pingResult), m.ID))
		default:
			writeJSONBody(w, http.StatusOK, s.noteMiss(l, &m, f, s.poolsOf(l, st, lr.route)))
		}
		return
	}
	s.answer(w, lr, l, c, &m, &p)
}

// open answers a live initialize that names no session: with the closest
// recorded one (see chooseInit). When its server gave that session an id,
// the client gets a session of its own, answered from that recorded
// session; otherwise it is a client without a session.
func (s *Server) open(lr *liveReq, m *protocol.Message, p *protocol.Params, key string, f *reqFacts) (*live, *call) {
	c, exact := s.chooseInit([]*pool{s.free[lr.route]}, m, f)
	if c == nil {
		return s.clientFor(fingerprint(lr.r.RemoteAddr, lr.path, p), m, key, f, nil), nil
	}
	var l *live
	if c.rs.sid {
		l = newLive(c.rs)
		l.id = newSessionID()
		l.taken[c.rs] = true
		s.mu.Lock()
		s.addSession(l)
		s.take(c.rs)
		s.mu.Unlock()
	} else {
		l = s.clientFor(fingerprint(lr.r.RemoteAddr, lr.path, p), m, key, f, []*pool{s.free[lr.route]})
	}
	s.served(l, c, m, p, exact, false, nil)
	return l, c
}

// liveSID is the session id a response to lr carries where the recorded
// one carried the recorded session's: the live session's, else the one
// the request named.
func liveSID(l *live, lr *liveReq) string {
	if l != nil && l.id != "" {
		return l.id
	}
	return lr.r.Header.Get(protocol.HeaderSessionID)
}

// answer replays a recorded call's response to a live request: its
// recorded status and headers, then its body: the recorded JSON (the
// response with the live id, other messages as they were), or its SSE
// stream paced as recorded.
func (s *Server) answer(w http.ResponseWriter, lr *liveReq, l *live, c *call, m *protocol.Message, p *protocol.Params) {
	r := lr.r
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
	var x *capture.Exchange
	if c.x != nil {
		if x = c.rs.exchange(c.x); x == nil {
			writeJSONError(w, http.StatusOK, m.ID, -32603, "mcptape replay: the recorded answer could not be read from the tape (the file changed or went away while the replay ran); restart the replay with the tape as it was recorded")
			return
		}
	}
	if x == nil || x.ResponseBody == capture.BodySSE {
		status := http.StatusOK
		if x != nil {
			h.Set("Content-Type", protocol.ContentTypeSSE) // unless recorded otherwise
			s.copyHeaders(h, lr, c.rs, x, liveSID(l, lr))
			status = cmpStatus(x.Status)
			if m.Method == protocol.MethodInitialize && l.id != "" {
				h.Set(protocol.HeaderSessionID, l.id)
			}
		} else {
			// A recording without HTTP (stdio): a stream, as a server
			// would send it.
			h.Set("Content-Type", protocol.ContentTypeSSE)
			h.Set("Cache-Control", "no-cache")
			if m.Method == protocol.MethodInitialize && l.id != "" {
				h.Set(protocol.HeaderSessionID, l.id)
			}
		}
		w.WriteHeader(status)
		flush(w)
		switch s.replayStream(r.Context(), sseOut{w}, l, c, m, p, &fp, arrived) {
		case streamCut:
			panic(http.ErrAbortHandler)
		case streamOpen:
			// A stream that never answers (subscriptions/listen): hold it
			// open until the client closes it.
			s.hold(r.Context(), sseOut{w}, l, listenStream(m))
		}
		return
	}
	if x.Status == 0 || x.Synthesized || (x.ResponseBody == capture.BodyJSON && !hasServerMessage(c.stream)) {
		writeJSONBody(w, http.StatusOK, s.noteUnanswered(l, c, m, p))
		return
	}
	body, ok := bodyOf(c.rs, c.stream, c.req.Seq, m.ID)
	if !ok {
		writeJSONError(w, http.StatusOK, m.ID, -32603, "mcptape replay: the recorded answer could not be read from the tape (the file changed or went away while the replay ran); restart the replay with the tape as it was recorded")
		return
	}
	s.copyHeaders(h, lr, c.rs, x, liveSID(l, lr))
	if m.Method == protocol.MethodInitialize && l.id != "" {
		h.Set(protocol.HeaderSessionID, l.id)
	}
	sizeAs(h, x, body)
	writeStatus(w, x, cmpStatus(x.Status))
	_, _ = w.Write(body)
	flush(w)
	s.afterResponse(l, fp.listChanged...)
}

func cmpStatus(status int) int {
	if status == 0 {
		return http.StatusOK
	}
	return status
}

// hasServerMessage reports whether a recorded exchange's messages hold one
// the server sent.
func hasServerMessage(msgs []*msgRef) bool {
	for _, m := range msgs {
		if m.Direction == protocol.ServerToClient && m.Kind != protocol.KindStderr {
			return true
		}
	}
	return false
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

func (o sseOut) settle(ctx context.Context, written time.Time) {
	sleepUntil(ctx, written.Add(settleGap))
}

func (o sseOut) frame(sm *capture.Message) error {
	if _, err := o.w.Write(sm.Raw); err != nil {
		return err
	}
	flush(o.w)
	return nil
}

// writeAnswered answers a POST that carried the client's answer to a
// replayed server→client request (the recorded request seq; 0: none
// known) as the recorded server answered its recorded answer.
func (s *Server) writeAnswered(w http.ResponseWriter, lr *liveReq, l *live, seq uint64) {
	if ref := l.rs.answers[seq]; seq != 0 && ref != nil && l.rs.xs[ref.ExchangeID] != nil {
		if s.writeExchange(w, lr, l.rs, l.rs.xs[ref.ExchangeID], l.rs.bodies[ref.ExchangeID], liveSID(l, lr)) {
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// writeNoted answers a POST that carried notifications as the recorded
// server answered such a POST: the session's recorded ones of that
// method in turn, else any of its session's, else the route's.
func (s *Server) writeNoted(w http.ResponseWriter, lr *liveReq, l *live, st sessionState, m *protocol.Message, p *protocol.Params) {
	switch st {
	case sessionLive, sessionEnded:
		if x := l.noteExchange(m.Method); x != nil && s.writeExchange(w, lr, l.rs, x, l.rs.bodies[x.ID], liveSID(l, lr)) {
			return
		}
	case sessionUnknown:
		if s.servePlainNote(w, lr, m.Method) {
			return
		}
		s.unknownSession(w, lr, nil, st)
		return
	default:
		if s.servePlainNote(w, lr, m.Method) {
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// noteExchange is the recorded exchange that answers live session l's
// next notification POST of method: its session's of that method in
// turn (the last again after them), else any of its session's; nil when
// the session recorded none.
func (l *live) noteExchange(method string) *xRef {
	xs := l.rs.notes[method]
	if len(xs) == 0 {
		for _, list := range l.rs.notes {
			xs = list
			break
		}
	}
	if len(xs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i := min(l.noteAt[method], len(xs)-1)
	l.noteAt[method]++
	return xs[i]
}

// unknownSession answers a request that names a session the replay
// server does not know (or whose client ended it) and that the recording
// holds no answer to: 404, as the specification asks of a server.
func (s *Server) unknownSession(w http.ResponseWriter, lr *liveReq, id json.RawMessage, st sessionState) {
	msg := "mcptape replay: session not found (it ended, or the replay server restarted)"
	if st == sessionNone {
		msg = "mcptape replay: session not found"
	}
	writeJSONError(w, http.StatusNotFound, id, -32001, msg)
}

// get answers a GET: a session's standalone stream (or whatever its
// recorded GET got), else as a plain HTTP exchange.
func (s *Server) get(w http.ResponseWriter, lr *liveReq) {
	l, st := s.sessionOf(lr.r.Header.Get(protocol.HeaderSessionID))
	switch st {
	case sessionLive:
		if l.rs.getX != nil || len(l.rs.get) > 0 {
			s.getStream(w, lr, l)
			return
		}
		if x := sidExchange(l.rs.sidX, http.MethodGet); x != nil && s.writeExchange(w, lr, l.rs, x, l.rs.bodies[x.ID], l.id) {
			return
		}
		http.Error(w, "mcptape replay: the recording has no standalone GET stream", http.StatusMethodNotAllowed)
		return
	case sessionEnded:
		if x := sidExchange(l.rs.afterX, http.MethodGet); x != nil && s.writeExchange(w, lr, l.rs, x, l.rs.bodies[x.ID], l.id) {
			return
		}
		fallthrough
	case sessionUnknown:
		if !s.servePlain(w, lr, nil) {
			s.unknownSession(w, lr, nil, st)
		}
		return
	}
	s.serveOther(w, lr, "mcptape replay: the recorded server has no stream for requests without a session")
}

// sidExchange is the first of xs of method.
func sidExchange(xs []*xRef, method string) *xRef {
	for _, x := range xs {
		if x.Method == method {
			return x
		}
	}
	return nil
}

// getStream replays a legacy session's standalone GET stream.
func (s *Server) getStream(w http.ResponseWriter, lr *liveReq, l *live) {
	r := lr.r
	start := l.rs.s.Start
	w.Header().Set("Content-Type", protocol.ContentTypeSSE)
	if l.rs.getX != nil {
		start = l.rs.getX.Start
		if x := l.rs.exchange(l.rs.getX); x != nil {
			s.copyHeaders(w.Header(), lr, l.rs, x, l.id)
		}
	}
	w.WriteHeader(http.StatusOK)
	flush(w)
	out := make(chan struct{}) // closed when the recorded messages are out
	l.mu.Lock()
	l.gets = append(l.gets, out)
	l.mu.Unlock()
	defer closeOnce(out)
	pc := &pacer{prevRec: start, prevLive: time.Now()}
	own := &call{rs: l.rs}
	for _, sm := range l.rs.get {
		trigger := l.rs.trigger(sm.Seq)
		if !l.draining() && !s.pace(r.Context(), l, l.rs, pc, sm, trigger, l.drain) {
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
		if !s.emit(r.Context(), sseOut{w}, l, own, sm, &protocol.Message{}, &protocol.Params{}) {
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

// deleteSession answers a DELETE: as the recorded session's DELETE was
// answered, the session then ending (its later requests get what the
// recorded ones after its DELETE got).
func (s *Server) deleteSession(w http.ResponseWriter, lr *liveReq) {
	l, st := s.sessionOf(lr.r.Header.Get(protocol.HeaderSessionID))
	switch st {
	case sessionLive:
		// The session lives on while its GET stream delivers what was
		// recorded before the DELETE (and the client may answer a
		// request there).
		l.endAfterDrain()
		s.endSession(l)
		if l.rs.delete != nil && s.writeExchange(w, lr, l.rs, l.rs.delete, l.rs.bodies[l.rs.delete.ID], l.id) {
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	case sessionEnded:
		if x := sidExchange(l.rs.afterX, http.MethodDelete); x != nil && s.writeExchange(w, lr, l.rs, x, l.rs.bodies[x.ID], l.id) {
			return
		}
	}
	if !s.servePlain(w, lr, nil) {
		http.Error(w, "mcptape replay: session not found", http.StatusNotFound)
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
