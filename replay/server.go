package replay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Timing says how the replay server paces what it replays.
type Timing uint8

const (
	// TimingRecorded waits between replayed events as long as the recording
	// did (capped at MaxGap).
	TimingRecorded Timing = iota
	// TimingFast sends everything as soon as it may.
	TimingFast
)

func (t Timing) String() string {
	if t == TimingFast {
		return "fast"
	}
	return "recorded"
}

// ParseTiming reads "recorded" or "fast".
func ParseTiming(s string) (Timing, error) {
	switch s {
	case "recorded", "":
		return TimingRecorded, nil
	case "fast":
		return TimingFast, nil
	}
	return 0, fmt.Errorf("timing %q: want recorded or fast", s)
}

// CodeNoMatch is the JSON-RPC error code of a live request the replay
// server cannot match to a recorded one (-32010, in the range JSON-RPC
// leaves to implementations).
const CodeNoMatch = -32010

// ErrNoMatch is wrapped by a miss in a ServerReport.
var ErrNoMatch = errors.New("no recorded request matches")

// ServerOptions configures a replay server. Nil means defaults; every
// field's zero value is documented.
type ServerOptions struct {
	// Matcher decides which recorded request a live one stands for. Nil
	// means NewMatcher().
	Matcher *Matcher
	// Timing paces replayed SSE events; the zero value is TimingRecorded.
	Timing Timing
	// MaxGap caps one recorded pause under TimingRecorded. Zero means 5s.
	MaxGap time.Duration
	// Strict makes every difference a failure in the Report: a miss, an
	// answer to a replayed server→client request (or MRTR input request)
	// that differs from the recorded one beyond the matcher's ignore
	// rules, a repeated call beyond those recorded, a handshake that
	// differs from the recording (answered all the same), a recorded
	// session replayed to a second live client.
	Strict bool
	// AnswerTimeout bounds the wait for the client's answer to a replayed
	// server→client request. Zero means 30s.
	AnswerTimeout time.Duration
	// Faults are injected into matching requests, after the tape's own
	// annotations and the profile's faults. Nil means none beyond those.
	Faults []Annotation
	// Profile's faults are injected too. Nil means none.
	Profile *Profile
	// Logger receives one line per replayed request. Nil discards.
	Logger *slog.Logger
}

// Server is a recorded MCP server: an http.Handler that answers live
// clients from a tape over Streamable HTTP, on both eras.
type Server struct {
	opts     ServerOptions
	matcher  *Matcher
	log      *slog.Logger
	sessions []*recSession
	faults   []Annotation

	mu     sync.Mutex
	legacy map[string]*live    // by the session id we minted
	sse    map[string]*sseLive // legacy HTTP+SSE sessions, by the session id we minted (server_sse.go)
	modern map[string][]*live  // 2026-07-28 clients by fingerprint, oldest first
	uses   map[*recSession]int // how many live clients each recorded session was given to
	report ServerReport
	closed chan struct{}
	once   sync.Once
}

// ServerReport is what a replay server saw: the requests it served, and
// what went wrong.
type ServerReport struct {
	// Served counts live requests answered from the tape.
	Served int
	// Misses are live requests that matched no recorded one.
	Misses []string
	// Failures are the differences Strict makes failures (misses included).
	Failures []string
}

// OK reports whether nothing failed.
func (r *ServerReport) OK() bool { return len(r.Failures) == 0 }

// NewServerHandler returns a replay server for tape.
func NewServerHandler(tape *Tape, opts *ServerOptions) (*Server, error) {
	s := &Server{legacy: map[string]*live{}, modern: map[string][]*live{}, uses: map[*recSession]int{}, closed: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	s.matcher = s.opts.Matcher
	if s.matcher == nil {
		s.matcher = NewMatcher()
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.MaxGap <= 0 {
		s.opts.MaxGap = 5 * time.Second
	}
	if s.opts.AnswerTimeout <= 0 {
		s.opts.AnswerTimeout = 30 * time.Second
	}
	s.faults = append(s.faults, tape.Annotations...)
	if s.opts.Profile != nil {
		s.faults = append(s.faults, s.opts.Profile.Faults...)
	}
	s.faults = append(s.faults, s.opts.Faults...)
	for i := range s.faults {
		if err := s.faults[i].check(); err != nil {
			return nil, fmt.Errorf("fault %d: %w", i, err)
		}
	}
	for _, ts := range tape.Sessions {
		rs := prepare(ts)
		if s.matcher.custom == nil {
			rs.byKey = map[string][]*call{}
			for _, c := range rs.calls {
				k := c.method + "\x00" + s.matcher.canonical(c.method, c.params)
				rs.byKey[k] = append(rs.byKey[k], c)
			}
		}
		s.sessions = append(s.sessions, rs)
	}
	if len(s.sessions) == 0 {
		return nil, errors.New("the tape holds no sessions")
	}
	return s, nil
}

// Report returns a copy of what the server saw so far. A nil Server (a
// [TestServer] that records) has seen nothing.
func (s *Server) Report() ServerReport {
	if s == nil {
		return ServerReport{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.Misses = append([]string(nil), r.Misses...)
	r.Failures = append([]string(nil), r.Failures...)
	return r
}

// Close ends every open stream (GET and listen streams wait for it). On a
// nil Server it does nothing.
func (s *Server) Close() {
	if s != nil {
		s.once.Do(func() { close(s.closed) })
	}
}

func (s *Server) fail(strictOnly bool, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !strictOnly || s.opts.Strict {
		s.report.Failures = append(s.report.Failures, msg)
	}
	s.log.Warn(msg)
}

// recSession is a recorded session prepared for replay.
type recSession struct {
	s        *capture.Session
	calls    []*call
	byMethod map[string][]*call
	bySeq    map[uint64]*capture.Message
	xs       map[uint64]*capture.Exchange
	byKey    map[string][]*call // method + canonical params → calls, in order
	get      []*capture.Message // messages of the standalone GET streams
	getX     *capture.Exchange
	delete   *capture.Exchange
	triggers map[uint64]uint64           // message seq → the client request it waits for
	answers  map[uint64]*capture.Message // server→client request seq → the client's answer
}

// call is one recorded client request and what answered it.
type call struct {
	req    *capture.Message
	x      *capture.Exchange
	stream []*capture.Message // s2c messages of its exchange, after it, in order
	method string
	params json.RawMessage
}

func prepare(ts *TapeSession) *recSession {
	rs := &recSession{s: ts.Session, byMethod: map[string][]*call{}, bySeq: map[uint64]*capture.Message{},
		xs: map[uint64]*capture.Exchange{}, triggers: map[uint64]uint64{}, answers: map[uint64]*capture.Message{}}
	for _, x := range ts.Exchanges {
		rs.xs[x.ID] = x
	}
	byX := map[uint64]*call{}
	var lastReq uint64
	for _, m := range ts.Messages {
		rs.bySeq[m.Seq] = m
		x := rs.xs[m.ExchangeID]
		switch {
		case m.Direction == protocol.ClientToServer && m.Kind == protocol.KindRequest:
			c := &call{req: m, x: x, method: m.Method, params: paramsOf(m.Raw)}
			rs.calls = append(rs.calls, c)
			rs.byMethod[m.Method] = append(rs.byMethod[m.Method], c)
			if byX[m.ExchangeID] == nil {
				byX[m.ExchangeID] = c
			}
			lastReq = m.Seq
		case m.Direction == protocol.ClientToServer && m.Kind.IsResponse():
			if m.Links.Request != 0 {
				rs.answers[m.Links.Request] = m
			}
		case m.Direction == protocol.ServerToClient:
			rs.triggers[m.Seq] = lastReq
			if x != nil && x.Method == http.MethodGet {
				rs.get = append(rs.get, m)
				rs.getX = x
				continue
			}
			if c := byX[m.ExchangeID]; c != nil {
				c.stream = append(c.stream, m)
			}
		}
		if x != nil && x.Method == http.MethodDelete && rs.delete == nil {
			rs.delete = x
		}
	}
	for _, x := range ts.Exchanges {
		if x.Method == http.MethodDelete && rs.delete == nil {
			rs.delete = x
		}
		if x.Method == http.MethodGet && rs.getX == nil && x.ResponseBody == capture.BodySSE {
			rs.getX = x
		}
	}
	return rs
}

func paramsOf(raw []byte) json.RawMessage {
	v, _, _, _ := protocol.Member(raw, "params")
	return v
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
		s.clientAnswer(w, r, &m)
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
		s.miss(w, &m, "the tape holds no session for this request")
		return
	}
	c, extra := s.match(l, &m, key)
	if c == nil && (m.Method == protocol.MethodInitialize || m.Method == protocol.MethodDiscover) {
		// The handshake is answered as recorded whoever the client says
		// it is; the recorded protocolVersion is the one negotiated.
		if c = l.handshakeCall(m.Method); c != nil {
			s.fail(true, "the client's %s differs from the recording (answered as recorded): %s", m.Method,
				strings.Join(s.matcher.Diff(m.Method, m.Params, c.params), "; "))
		}
	} else if c != nil && m.Method == protocol.MethodDiscover {
		if d := handshakeMetaDiff(m.Params, c.params); len(d) > 0 {
			s.fail(true, "the client's server/discover differs from the recording (answered as recorded): %s", strings.Join(d, "; "))
		}
	}
	if c == nil {
		if m.Method == protocol.MethodPing {
			writeJSONBody(w, http.StatusOK, responseWithID([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`), m.ID))
			return
		}
		s.miss(w, &m, s.closest(l.rs, &m))
		return
	}
	if extra {
		s.fail(true, "%s %s was called more often than recorded; the last recorded answer was replayed", m.Method, p.Name)
	}
	s.mu.Lock()
	s.report.Served++
	s.mu.Unlock()
	l.markSeen(c.req.Seq)
	s.log.Debug("replay", "method", m.Method, "name", p.Name, "recorded", c.req.Seq)
	s.checkInputResponses(c, &m, &p)
	s.answer(w, r, l, c, &m, &p)
}

// match finds the recorded call for a live request: the first unused one
// that matches, else (extra) the last one that matched.
func (s *Server) match(l *live, m *protocol.Message, key string) (c *call, extra bool) {
	if l.rs.byKey != nil {
		list := l.rs.byKey[key]
		if len(list) == 0 {
			return nil, false
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		i := l.cursor[key]
		if i < len(list) {
			l.cursor[key] = i + 1
			return list[i], false
		}
		return list[len(list)-1], true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var last *call
	for _, rc := range l.rs.byMethod[m.Method] {
		if !s.matcher.Match(m.Method, m.Params, rc.params) {
			continue
		}
		if !l.used[rc] {
			l.used[rc] = true
			return rc, false
		}
		last = rc
	}
	if last != nil {
		return last, true
	}
	return nil, false
}

// closest explains a miss: the recorded request of the same method that
// differs in the fewest fields (named by its tool, prompt or resource).
func (s *Server) closest(rs *recSession, m *protocol.Message) string {
	var best *call
	var bestDiff []string
	for _, rc := range rs.byMethod[m.Method] {
		d := s.matcher.Diff(m.Method, m.Params, rc.params)
		if best == nil || len(d) < len(bestDiff) {
			best, bestDiff = rc, d
		}
	}
	if best == nil {
		methods := make([]string, 0, len(rs.byMethod))
		for k := range rs.byMethod {
			methods = append(methods, k)
		}
		sort.Strings(methods)
		return fmt.Sprintf("the recording has no %s request at all (it has: %s)", m.Method, strings.Join(methods, ", "))
	}
	name := best.req.Name // the recorded request's, not the live one's
	if name != "" {
		name = " " + name
	}
	return fmt.Sprintf("the closest recorded request is seq %d (%s%s); it differs in %s", best.req.Seq, best.method, name, strings.Join(bestDiff, "; "))
}

func (s *Server) miss(w http.ResponseWriter, m *protocol.Message, why string) {
	writeJSONError(w, http.StatusOK, m.ID, CodeNoMatch, s.noteMiss(m, why))
}

// noteMiss reports a live request no recorded one matches, and returns
// the message that says so.
func (s *Server) noteMiss(m *protocol.Message, why string) string {
	p, _ := protocol.ParseParams(m.Params)
	msg := fmt.Sprintf("mcptape replay: no recorded %s", m.Method)
	if p.Name != "" {
		msg += " " + p.Name
	}
	msg += " matches this request: " + why
	s.mu.Lock()
	s.report.Misses = append(s.report.Misses, msg)
	s.report.Failures = append(s.report.Failures, msg)
	s.mu.Unlock()
	s.log.Warn(msg)
	return msg
}

// clientAnswer delivers a client's answer to a replayed server→client request.
func (s *Server) clientAnswer(w http.ResponseWriter, r *http.Request, m *protocol.Message) {
	l := s.sessionOf(r)
	if l == nil {
		writeJSONError(w, http.StatusNotFound, nil, -32001, "mcptape replay: session not found")
		return
	}
	l.mu.Lock()
	ch := l.waiting[m.IDKey()]
	delete(l.waiting, m.IDKey())
	l.mu.Unlock()
	if ch == nil {
		s.fail(true, "the client answered id %s, which the replay server did not ask", m.ID)
	} else {
		c := *m
		c.Raw = append([]byte(nil), m.Raw...)
		ch <- &c
	}
	w.WriteHeader(http.StatusAccepted)
}

// answer replays a recorded call's response to a live request.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, l *live, c *call, m *protocol.Message, p *protocol.Params) {
	faults := s.faultsFor(m.Method, p.Name)
	drop, listChanged := 0, []string(nil)
	for _, f := range faults {
		if f.Delay > 0 {
			select {
			case <-time.After(time.Duration(f.Delay)):
			case <-r.Context().Done():
				return
			}
		}
		switch {
		case f.Status != 0:
			w.WriteHeader(f.Status)
			return
		case f.Error != nil:
			b, _ := json.Marshal(struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *RPCError       `json:"error"`
			}{"2.0", idOrNull(m.ID), f.Error})
			writeJSONBody(w, http.StatusOK, b)
			return
		}
		if f.DropAfterEvents > 0 {
			drop = f.DropAfterEvents
		}
		if f.ListChanged != "" {
			listChanged = append(listChanged, f.ListChanged)
		}
	}
	h := w.Header()
	status := http.StatusOK
	sse := true
	if c.x != nil {
		copyHeaders(h, c.x.ResponseHeader)
		if c.x.Status != 0 {
			status = c.x.Status
		}
		sse = c.x.ResponseBody == capture.BodySSE
	}
	if m.Method == protocol.MethodInitialize && l.id != "" {
		h.Set(protocol.HeaderSessionID, l.id)
	}
	resp := s.responseOf(c)
	if !sse {
		if resp == nil {
			writeJSONError(w, http.StatusOK, m.ID, CodeNoMatch, "mcptape replay: the recorded request was never answered")
			return
		}
		h.Set("Content-Type", protocol.ContentTypeJSON)
		w.WriteHeader(status)
		_, _ = w.Write(responseWithID(resp.Raw, m.ID))
		flush(w)
		s.afterResponse(l, listChanged...)
		return
	}
	h.Set("Content-Type", protocol.ContentTypeSSE)
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	flush(w)
	prev := c.req.Time
	events := 0
	for _, sm := range c.stream {
		l.waitTrigger(r.Context(), l.rs.triggerAfter(sm, c), s.opts.MaxGap+s.opts.AnswerTimeout)
		if !s.pace(r.Context(), l, prev, sm.Time) {
			return
		}
		prev = sm.Time
		if drop > 0 && events >= drop {
			panic(http.ErrAbortHandler)
		}
		if !s.emit(w, r, l, c, sm, m, p) {
			return
		}
		events++
		if sm.Kind.IsResponse() && sm.Links.Request == c.req.Seq {
			s.afterResponse(l, listChanged...)
			return
		}
	}
	if resp == nil {
		// A stream that never answers (subscriptions/listen): hold it open
		// until the client closes it.
		s.hold(w, r, l, listenStream(m))
	}
}

// triggerAfter is the request a stream message waits for: the recorded
// request that last preceded it, unless that is the call itself.
func (rs *recSession) triggerAfter(m *capture.Message, c *call) uint64 {
	t := rs.triggers[m.Seq]
	if c != nil && t <= c.req.Seq {
		return 0
	}
	return t
}

func (s *Server) responseOf(c *call) *capture.Message {
	for _, sm := range c.stream {
		if sm.Kind.IsResponse() && sm.Links.Request == c.req.Seq {
			return sm
		}
	}
	return nil
}

// pace sleeps the recorded gap under TimingRecorded.
func (s *Server) pace(ctx context.Context, l *live, prev, next time.Time) bool {
	if s.opts.Timing == TimingFast {
		return ctx.Err() == nil
	}
	d := min(next.Sub(prev), s.opts.MaxGap)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-l.done:
		return false
	}
}

// emit writes one recorded stream message, rewritten for the live request:
// the response gets the live id, progress the live token, a subscription
// notification the live listen id, a server→client request a fresh id
// (and the server waits for the client's answer).
func (s *Server) emit(w http.ResponseWriter, r *http.Request, l *live, c *call, sm *capture.Message, m *protocol.Message, p *protocol.Params) bool {
	if sm.Kind == protocol.KindFrame || sm.Kind == protocol.KindInvalid {
		if _, err := w.Write(sm.Raw); err != nil {
			return false
		}
		flush(w)
		return true
	}
	data := sm.Raw
	var ask string
	switch {
	case sm.Kind.IsResponse() && sm.Links.Request == c.req.Seq:
		data = responseWithID(data, m.ID)
	case sm.Kind == protocol.KindRequest:
		l.mu.Lock()
		id := l.nextID
		l.nextID++
		l.mu.Unlock()
		idRaw := []byte(strconv.FormatInt(id, 10))
		data = responseWithID(data, idRaw)
		ask = string(idRaw)
	case sm.Method == protocol.MethodProgress && len(p.ProgressToken) > 0:
		if out, ok := protocol.SetMember(data, p.ProgressToken, "params", "progressToken"); ok {
			data = out
		}
	}
	if len(m.ID) > 0 && c.method == protocol.MethodSubscriptionsListen {
		if out, ok := protocol.SetMember(data, m.ID, "params", "_meta", protocol.MetaSubscriptionID); ok {
			data = out
		}
	}
	var ch chan *protocol.Message
	if ask != "" {
		ch = make(chan *protocol.Message, 1)
		l.mu.Lock()
		l.waiting[ask] = ch
		l.mu.Unlock()
	}
	if _, err := w.Write(frame(sm, data)); err != nil {
		return false
	}
	flush(w)
	if ch == nil {
		return true
	}
	return s.awaitAnswer(r.Context(), l, sm, ask, ch)
}

func (s *Server) awaitAnswer(ctx context.Context, l *live, sm *capture.Message, id string, ch chan *protocol.Message) bool {
	t := time.NewTimer(s.opts.AnswerTimeout)
	defer t.Stop()
	select {
	case ans := <-ch:
		if rec := l.rs.answers[sm.Seq]; rec != nil {
			if d := s.matcher.answerDiff(sm.Method, ans.Raw, rec.Raw); len(d) > 0 {
				s.fail(true, "the client's answer to %s differs from the recording: %s", sm.Method, strings.Join(d, "; "))
			}
		}
		return true
	case <-t.C:
		s.fail(false, "the client did not answer the replayed %s (id %s) within %s", sm.Method, id, s.opts.AnswerTimeout)
		return true
	case <-ctx.Done():
		return false
	case <-l.done:
		return false
	}
}

// checkInputResponses compares an MRTR retry's inputResponses with the
// recorded ones, under the configured ignore rules (matching set them
// aside).
func (s *Server) checkInputResponses(c *call, m *protocol.Message, p *protocol.Params) {
	if len(p.InputResponses) == 0 {
		return
	}
	rp, _ := protocol.ParseParams(c.params)
	if d := s.matcher.inputResponsesDiff(m.Method, p.InputResponses, rp.InputResponses); len(d) > 0 {
		s.fail(true, "the inputResponses of %s %s differ from the recording: %s", m.Method, p.Name, strings.Join(d, "; "))
	}
}

// frame is the SSE block for a replayed message: the recorded bytes around
// it, or a plain message event.
func frame(sm *capture.Message, data []byte) []byte {
	if sm.SSE != nil && (len(sm.SSE.Prefix) > 0 || len(sm.SSE.Suffix) > 0) {
		out := make([]byte, 0, len(sm.SSE.Prefix)+len(data)+len(sm.SSE.Suffix))
		out = append(out, sm.SSE.Prefix...)
		out = append(out, data...)
		return append(out, sm.SSE.Suffix...)
	}
	var b bytes.Buffer
	b.WriteString("event: message\n")
	if sm.SSE != nil && sm.SSE.ID != "" {
		b.WriteString("id: " + sm.SSE.ID + "\n")
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
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
	if l.rs.getX == nil {
		http.Error(w, "mcptape replay: the recording has no standalone GET stream", http.StatusMethodNotAllowed)
		return
	}
	copyHeaders(w.Header(), l.rs.getX.ResponseHeader)
	w.Header().Set("Content-Type", protocol.ContentTypeSSE)
	w.WriteHeader(http.StatusOK)
	flush(w)
	prev := l.rs.getX.Start
	for _, sm := range l.rs.get {
		l.waitTrigger(r.Context(), l.rs.triggers[sm.Seq], s.opts.MaxGap+s.opts.AnswerTimeout)
		if !s.pace(r.Context(), l, prev, sm.Time) {
			return
		}
		prev = sm.Time
		if !s.emit(w, r, l, &call{}, sm, &protocol.Message{}, &protocol.Params{}) {
			return
		}
	}
	s.hold(w, r, l, &openStream{})
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(protocol.HeaderSessionID)
	s.mu.Lock()
	l := s.legacy[sid]
	delete(s.legacy, sid)
	s.mu.Unlock()
	if l == nil {
		http.Error(w, "mcptape replay: session not found", http.StatusNotFound)
		return
	}
	l.end()
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

func responseWithID(raw []byte, id json.RawMessage) []byte {
	if out, ok := protocol.SetMember(raw, idOrNull(id), "id"); ok {
		return out
	}
	return raw
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

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
