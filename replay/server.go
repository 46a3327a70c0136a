package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
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
	// did (capped at MaxGap): each stream message its recorded gap after
	// the later of the stream's previous event and the request that set it
	// off, counted from when that happened live.
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
// leaves to implementations): a miss, kept in [ServerReport].Misses. A
// request that does match a recorded one the recorded server never
// answered is not a miss: it gets [CodeNoAnswer].
const CodeNoMatch = -32010

// CodeNoAnswer is the JSON-RPC error code of a live request that matches a
// recorded request the recording holds no answer to (-32011): the recorded
// server never answered it, or answered with an HTTP status and no
// JSON-RPC message (a plain-text 500, a connection that broke). A strict
// server reports each as a failure: the replay cannot answer what was
// asked.
const CodeNoAnswer = -32011

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
	// Strict makes every difference a failure in the Report: a miss, a
	// request the recording holds no answer to ([CodeNoAnswer]), an
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
	// AllowAnyHost turns off the DNS-rebinding check: by default a request
	// that arrives on a loopback address must name a loopback host
	// (localhost, 127.0.0.1, [::1]) in its Host header, or it is refused
	// with 403, as the recording proxy and go-sdk's servers do.
	AllowAnyHost bool
}

// Server is a recorded MCP server: an http.Handler that answers live
// clients from a tape over Streamable HTTP, on both eras, and over stdio
// with ServeStdio.
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

	emu          sync.Mutex // guards readErrs and moreReadErrs
	readErrs     []string   // tape read errors, the first maxReadErrs
	moreReadErrs int
}

// ServerReport is what a replay server saw: the requests it served, and
// what went wrong.
type ServerReport struct {
	// Served counts live requests answered from the tape.
	Served int
	// Misses are the live requests that matched no recorded one, each
	// explained.
	Misses []*MissError
	// Failures are the differences Strict makes failures (misses included).
	Failures []string
}

// OK reports whether nothing failed.
func (r *ServerReport) OK() bool { return len(r.Failures) == 0 }

// NewServerHandler returns a replay server for tape. A tape OpenTape
// opened stays in its file, each message read when it is replayed: keep it
// open while the server runs.
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
	for i, ix := range tape.indexes() {
		ld := tape.loaderFor(i)
		rs := prepare(ix, tape.Sessions[i].Session, ld)
		rs.onErr = s.readFailed
		if s.matcher.custom == nil {
			rs.byKey = map[string][]*call{}
			for _, c := range rs.calls {
				m, err := ld.message(c.req)
				if err != nil {
					return nil, err
				}
				k := s.matcher.key(c.method, paramsOf(m.Raw))
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
	r.Misses = append([]*MissError(nil), r.Misses...)
	r.Failures = append([]string(nil), r.Failures...)
	s.emu.Lock()
	defer s.emu.Unlock()
	r.Failures = append(r.Failures, s.readErrs...)
	if s.moreReadErrs > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("reading the tape failed %d more time(s)", s.moreReadErrs))
	}
	return r
}

// maxReadErrs bounds the tape read errors a report lists one by one.
const maxReadErrs = 100

// readFailed reports a record the tape could not give (the file changed,
// or went away). It takes its own lock: it is called where s.mu may be
// held (choosing a session reads recorded params).
func (s *Server) readFailed(err error) {
	msg := "reading the tape: " + err.Error()
	s.log.Error(msg)
	s.emu.Lock()
	defer s.emu.Unlock()
	if len(s.readErrs) < maxReadErrs {
		s.readErrs = append(s.readErrs, msg)
	} else {
		s.moreReadErrs++
	}
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

// recSession is a recorded session prepared for replay: summaries of its
// messages and exchanges (a tape's index), their bytes read when replayed.
type recSession struct {
	s        *capture.Session
	ld       loader
	onErr    func(error) // a record the tape could not give
	msgs     []msgRef    // every message, in seq order
	calls    []*call     // every client request, in order
	byMethod map[string][]*call
	byKey    map[string][]*call // matchKey → calls, in order
	get      []*msgRef          // what the server sent on its own: the standalone GET streams
	getX     *xRef
	delete   *xRef
	answers  map[uint64]*msgRef // server→client request seq → the client's answer
}

// call is one recorded client request and what answered it.
type call struct {
	rs     *recSession
	req    *msgRef
	x      *xRef
	stream []*msgRef // s2c messages of its exchange, after it, in order
	method string
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

func prepare(ix *sessionIndex, s *capture.Session, ld loader) *recSession {
	rs := &recSession{s: s, ld: ld, msgs: ix.ms, byMethod: map[string][]*call{}, answers: map[uint64]*msgRef{}}
	xs := make(map[uint64]*xRef, len(ix.xs))
	for i := range ix.xs {
		xs[ix.xs[i].ID] = &ix.xs[i]
	}
	byX := map[uint64]*call{}
	bySeq := map[uint64]*call{}
	// A stdio session's one "exchange" is the server's process: its
	// messages belong where their links say, as if it had none.
	stdio := s.Leg == capture.LegStdio
	for i := range ix.ms {
		m := &ix.ms[i]
		x := xs[m.ExchangeID]
		if stdio {
			x = nil
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
		case m.Direction == protocol.ServerToClient:
			if x != nil && x.Method == http.MethodGet {
				rs.get = append(rs.get, m)
				rs.getX = x
				continue
			}
			if x != nil {
				if c := byX[m.ExchangeID]; c != nil {
					c.stream = append(c.stream, m)
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
		if x != nil && x.Method == http.MethodDelete && rs.delete == nil {
			rs.delete = x
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
	return rs
}

func paramsOf(raw []byte) json.RawMessage {
	v, _, _, _ := protocol.Member(raw, "params")
	return v
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
		if !s.matcher.Match(m.Method, m.Params, rc.params()) {
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

// resolve finds the recorded call that answers live request m of client
// l: the matching one (see match; a server/discover by discoverCall), or,
// for a handshake that matches none, the recorded one all the same (a
// strict replay notes the difference). It counts the request served and
// marks the call seen. Nil is a miss.
func (s *Server) resolve(l *live, m *protocol.Message, p *protocol.Params, key string) *call {
	return s.resolveThen(l, m, p, key, nil)
}

// resolveThen is resolve; bind, when set, is called with the matched call
// before it is marked seen (and so before a stream waiting for it goes
// on): the legacy SSE stream learns the live request's id there.
func (s *Server) resolveThen(l *live, m *protocol.Message, p *protocol.Params, key string, bind func(*call)) *call {
	var c *call
	var extra bool
	if m.Method == protocol.MethodDiscover {
		if c = s.discoverCall(l, m, false); c == nil {
			c, extra = s.discoverCall(l, m, true), true
		}
	} else {
		c, extra = s.match(l, m, key)
	}
	if c == nil && (m.Method == protocol.MethodInitialize || m.Method == protocol.MethodDiscover) {
		// The handshake is answered as recorded whoever the client says
		// it is; the recorded protocolVersion is the one negotiated.
		if c = l.handshakeCall(m.Method); c != nil {
			s.fail(true, "the client's %s differs from the recording (answered as recorded): %s", m.Method,
				strings.Join(s.matcher.Diff(m.Method, m.Params, c.params()), "; "))
		}
	} else if c != nil && m.Method == protocol.MethodDiscover {
		if d := handshakeMetaDiff(m.Params, c.params()); len(d) > 0 {
			s.fail(true, "the client's server/discover differs from the recording (answered as recorded): %s", strings.Join(d, "; "))
		}
	}
	if c == nil {
		return nil
	}
	if extra {
		s.fail(true, "%s %s was called more often than recorded; the last recorded answer was replayed", m.Method, p.Name)
	}
	s.mu.Lock()
	s.report.Served++
	s.mu.Unlock()
	if bind != nil {
		bind(c)
	}
	l.markSeen(c.req.Seq)
	s.log.Debug("replay", "method", m.Method, "name", p.Name, "recorded", c.req.Seq)
	s.checkInputResponses(c, m, p)
	return c
}

// pingResult answers a ping the recording does not hold.
const pingResult = `{"jsonrpc":"2.0","id":0,"result":{}}`

// noteMiss explains and reports a live request that matched nothing, and
// returns the JSON-RPC error the client gets.
func (s *Server) noteMiss(l *live, m *protocol.Message, key string) []byte {
	e := s.explainMiss(l, m, key)
	msg := e.Error()
	s.mu.Lock()
	s.report.Misses = append(s.report.Misses, e)
	s.report.Failures = append(s.report.Failures, msg)
	s.mu.Unlock()
	s.log.Warn(msg)
	return errorResponse(m.ID, &RPCError{Code: CodeNoMatch, Message: "mcptape replay: " + msg, Data: e.data()})
}

// noteUnanswered reports a live request that matched recorded call c, to
// which the recording holds no answer, and returns the JSON-RPC error the
// client gets: [CodeNoAnswer], naming the recorded request and what the
// recorded server did instead.
func (s *Server) noteUnanswered(l *live, c *call, m *protocol.Message, p *protocol.Params) []byte {
	what := m.Method
	if p.Name != "" {
		what += " " + p.Name
	}
	status := statusOf(c.x)
	how := "no response to it was recorded"
	if status != 0 {
		how = fmt.Sprintf("the recorded server's response was HTTP %d with no JSON-RPC message in it", status)
	}
	msg := fmt.Sprintf("the recording holds this %s request (seq %d in recorded session %s) but no answer to it: %s; "+
		"record the session again, or give the request an answer with an error fault (in the tape's annotations or the testing profile)",
		what, c.req.Seq, l.rs.s.ID, how)
	s.fail(true, "%s", msg)
	data, _ := json.Marshal(struct {
		Session string `json:"session"`
		Seq     uint64 `json:"seq"`
		Status  int    `json:"status,omitempty"`
	}{l.rs.s.ID, c.req.Seq, status})
	return errorResponse(m.ID, &RPCError{Code: CodeNoAnswer, Message: "mcptape replay: " + msg, Data: data})
}

func statusOf(x *xRef) int {
	if x == nil {
		return 0
	}
	return x.Status
}

// errorResponse is a JSON-RPC error response to id.
func errorResponse(id json.RawMessage, e *RPCError) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *RPCError       `json:"error"`
	}{"2.0", idOrNull(id), e})
	return b
}

// deliver hands a client's answer to the replayed server→client request
// it answers; the strict report notes an answer to nothing it asked.
func (s *Server) deliver(l *live, m *protocol.Message) {
	l.mu.Lock()
	ch := l.waiting[m.IDKey()]
	delete(l.waiting, m.IDKey())
	l.mu.Unlock()
	if ch == nil {
		s.fail(true, "the client answered id %s, which the replay server did not ask", m.ID)
		return
	}
	c := *m
	c.Raw = append([]byte(nil), m.Raw...)
	ch <- &c
}

// faultPlan is what the faults that match a request do to its answer.
type faultPlan struct {
	status      int       // answer with this HTTP status and no body
	err         *RPCError // answer with this JSON-RPC error
	drop        int       // cut the stream after this many events
	listChanged []string  // list_changed kinds to send after the response
}

// planFaults waits out the delays of the faults that match a live request
// (false: ctx ended meanwhile) and returns what the others do. The first
// fault that answers (status or error) ends the list.
func (s *Server) planFaults(ctx context.Context, method, name string) (faultPlan, bool) {
	var fp faultPlan
	for _, f := range s.faultsFor(method, name) {
		if f.Delay > 0 {
			t := time.NewTimer(time.Duration(f.Delay))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return fp, false
			}
		}
		switch {
		case f.Status != 0:
			fp.status = f.Status
			return fp, true
		case f.Error != nil:
			fp.err = f.Error
			return fp, true
		}
		if f.DropAfterEvents > 0 {
			fp.drop = f.DropAfterEvents
		}
		if f.ListChanged != "" {
			fp.listChanged = append(fp.listChanged, f.ListChanged)
		}
	}
	return fp, true
}
