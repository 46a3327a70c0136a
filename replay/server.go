package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
// server never answered it (the connection broke first, or mcptape
// answered in its place), or, over stdio, answered with an HTTP status and
// no JSON-RPC message (a plain-text 500, which over HTTP is replayed as
// it was). A strict server reports each as a failure: the replay cannot
// answer what was asked.
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
	// session replayed to a second live client, a recorded answer given
	// again to a client without a session.
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
	routes   map[string]bool // the routes the tape was recorded on
	unrouted bool            // it holds sessions recorded without a route
	// endpoints are the MCP endpoints of the recorded sessions, by route
	// and path ("route\x00path").
	endpoints map[string]bool

	// What live requests are answered from, by route: the calls that
	// named no session (free) or one their server did not know (stray),
	// and the exchanges that carried no MCP traffic.
	free, stray map[string]*pool
	plain       map[string]*plainIndex
	facts       map[string]*reqFacts // interned

	mu       sync.Mutex
	legacy   map[string]*live    // live sessions by the id we minted (at most maxSessions)
	legacyAt []string            // their ids, oldest first (with some ended ones)
	ended    map[string]*live    // sessions their client ended, by id (at most maxEnded)
	endedAt  []string            // their ids, oldest first
	sse      map[string]*sseLive // legacy HTTP+SSE sessions, by the session id we minted (server_sse.go)
	clients  map[string]*live    // clients without a session, by fingerprint (at most maxClients)
	uses     map[*recSession]int // how many live clients each recorded session was given to
	xUses    map[*xRef]int       // how often each exchange without MCP traffic answered
	given    map[*call]int       // how often each call answered clients without a session
	report   ServerReport
	closed   chan struct{}
	once     sync.Once

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
	s := &Server{legacy: map[string]*live{}, ended: map[string]*live{}, clients: map[string]*live{}, uses: map[*recSession]int{},
		xUses: map[*xRef]int{}, given: map[*call]int{}, closed: make(chan struct{}), routes: map[string]bool{}, free: map[string]*pool{},
		stray: map[string]*pool{}, plain: map[string]*plainIndex{}, facts: map[string]*reqFacts{}, endpoints: map[string]bool{}}
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
		rs := prepare(ix, tape.Sessions[i].Session, tape.loaderFor(i), s.readFailed)
		if err := s.index(rs); err != nil {
			return nil, err
		}
		s.sessions = append(s.sessions, rs)
	}
	if len(s.sessions) == 0 {
		return nil, errors.New("the tape holds no sessions")
	}
	s.findUnknown()
	for _, p := range s.free {
		p.classOf = nil
	}
	for _, p := range s.stray {
		p.classOf = nil
	}
	s.facts = nil
	return s, nil
}

// index puts the calls and exchanges of a recorded session where live
// requests look for them (see pool, plainIndex).
func (s *Server) index(rs *recSession) error {
	if rs.route != "" {
		s.routes[rs.route] = true
	} else {
		s.unrouted = true
	}
	if len(rs.calls) > 0 {
		s.endpoints[rs.route+"\x00"+rs.s.Path] = true
	}
	rs.pool, rs.after = newPool(), newPool()
	for _, c := range rs.calls {
		m, err := rs.ld.message(c.req)
		if err != nil {
			return err
		}
		params := paramsOf(m.Raw)
		var hf *httpFacts
		if c.x != nil {
			hf = c.x.Facts
		}
		key, meta := s.matcher.keyAndMeta(c.method, params)
		c.facts = s.internFacts(meta(), hf)
		s.poolOf(rs, c).add(c, key)
	}
	rs.pool.classOf, rs.after.classOf = nil, nil
	px := s.plain[rs.route]
	if px == nil {
		px = newPlainIndex()
		s.plain[rs.route] = px
	}
	for _, x := range rs.plain {
		px.add(rs, x, false)
	}
	for _, x := range rs.invalid {
		px.add(rs, x, true)
	}
	for method, xs := range rs.notes {
		if rs.sid {
			continue
		}
		for _, x := range xs {
			px.addNote(rs, x, method)
		}
	}
	rs.plain, rs.invalid = nil, nil
	return nil
}

// poolOf is where call c of rs is looked for: the calls after the
// initialize of a session its server gave an id in the session's pool
// (those after its DELETE apart); a handshake, and what named no
// session, in the route's free pool; what named a session its server
// did not know in the route's stray pool.
func (s *Server) poolOf(rs *recSession, c *call) *pool {
	switch {
	case rs.sse, rs.sid && c.method != protocol.MethodInitialize && c.req.Seq > rs.byMethod[protocol.MethodInitialize][0].req.Seq:
		if rs.afterDelete(c.x) {
			return rs.after
		}
		return rs.pool
	case c.x != nil && c.x.Facts.sid:
		return routePool(s.stray, rs.route)
	}
	return routePool(s.free, rs.route)
}

func routePool(m map[string]*pool, route string) *pool {
	p := m[route]
	if p == nil {
		p = newPool()
		m[route] = p
	}
	return p
}

// internFacts is the one reqFacts of these facts.
func (s *Server) internFacts(meta map[string]string, hf *httpFacts) *reqFacts {
	k := factsKey(meta, hf)
	if f, ok := s.facts[k]; ok {
		return f
	}
	f := &reqFacts{meta: meta, http: hf}
	if len(s.facts) < maxInterned {
		s.facts[k] = f
	}
	return f
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

// pingResult answers a ping the recording does not hold.
const pingResult = `{"jsonrpc":"2.0","id":0,"result":{}}`

// noteMiss explains and reports a live request that matched nothing, and
// returns the JSON-RPC error the client gets.
func (s *Server) noteMiss(l *live, m *protocol.Message, f *reqFacts, pools []*pool) []byte {
	e := s.explainMiss(l, m, f, pools)
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
	switch x := c.rs.exchange(c.x); {
	case x != nil && x.Synthesized:
		how = fmt.Sprintf("the recorded server did not answer it (mcptape answered HTTP %d in its place: %s)", status, clip(x.Error, 200))
	case status != 0:
		how = fmt.Sprintf("the recorded server's response was HTTP %d with no JSON-RPC message in it", status)
	}
	msg := fmt.Sprintf("the recording holds this %s request (seq %d in recorded session %s) but no answer to it: %s; "+
		"record the session again, or give the request an answer with an error fault (in the tape's annotations or the testing profile)",
		what, c.req.Seq, c.rs.s.ID, how)
	s.fail(true, "%s", msg)
	data, _ := json.Marshal(struct {
		Session string `json:"session"`
		Seq     uint64 `json:"seq"`
		Status  int    `json:"status,omitempty"`
	}{c.rs.s.ID, c.req.Seq, status})
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
// it answers, and returns that request's recorded seq (0: none); the
// strict report notes an answer to nothing it asked.
func (s *Server) deliver(l *live, m *protocol.Message) uint64 {
	l.mu.Lock()
	ch := l.waiting[m.IDKey()]
	seq := l.asked[m.IDKey()]
	delete(l.waiting, m.IDKey())
	delete(l.asked, m.IDKey())
	l.mu.Unlock()
	if ch == nil {
		s.fail(true, "the client answered id %s, which the replay server did not ask", m.ID)
		return 0
	}
	c := *m
	c.Raw = append([]byte(nil), m.Raw...)
	ch <- &c
	return seq
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
