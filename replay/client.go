package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// ClientOptions configures a replay client. Nil means defaults; every
// field's zero value is documented.
type ClientOptions struct {
	// Profile answers the live server's sampling, elicitation and roots
	// requests (or MRTR input requests) that the recording has no answer
	// for. Nil means the profile defaults (docs/testing-profiles.md).
	Profile *Profile
	// Ignore lists more paths the comparison leaves out, dotted from the
	// compared document's root with [i] or [*] for list elements:
	// "result.content[0].text", "result.structuredContent.when",
	// "notifications". A path covers everything under it.
	Ignore []string
	// IgnoreKeys are member names left out wherever they appear. Nil means
	// DefaultIgnoreKeys; an empty, non-nil slice compares everything.
	IgnoreKeys []string
	// Sessions restricts the replay to the tape sessions with these ids
	// (or unique prefixes). Nil replays every session, in tape order.
	Sessions []string
	// HTTPClient sends the requests. Nil means a client of its own, closed
	// when the run ends, that does not follow proxy environment variables.
	HTTPClient *http.Client
	// Header is added to every request, e.g. Authorization, which the
	// recording holds only redacted.
	Header http.Header
	// CallTimeout bounds one replayed call, its rounds and answers
	// included, but not the time a person takes to answer (see Manual).
	// Zero means 60s.
	CallTimeout time.Duration
	// StreamWait bounds the wait, before a long-lived stream (a
	// subscriptions/listen request, the standalone GET stream) is closed,
	// for the messages it carried in the recording. Zero means 3s.
	StreamWait time.Duration
	// Logger receives a line per replayed call. Nil discards.
	Logger *slog.Logger
	// Manual answers the live server's sampling/createMessage requests
	// (server→client requests, and 2026-07-28 MRTR input requests) that the
	// recording has no answer for, when the profile's sampling provider is
	// "manual": it asks a person (cmd wires the dashboard's pending queue,
	// dashboard.Pending.Ask) and returns the CreateMessageResult, or an
	// error. A *protocol.ErrorInfo error is the JSON-RPC error the server
	// is answered with (an MRTR input request then goes unanswered); any
	// other error answers -32603 with its text. The replay client keeps
	// reading the server's stream while Manual runs, and cancels ctx when
	// the server no longer waits. Nil leaves the manual provider without
	// anyone to ask: the server gets an error, and the answer is reported
	// as "none".
	Manual func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// ManualTimeout bounds the wait for one answer from Manual; the wait
	// does not count against CallTimeout. Zero means DefaultManualTimeout
	// (10 minutes).
	ManualTimeout time.Duration
	// Matcher decides which recorded request of the server a live one
	// (a server→client request, an MRTR input request) stands for, as the
	// replay server's Matcher does for client requests: only a match gets
	// the recorded answer; any other is answered by the Profile (or a
	// person). Nil means NewMatcher().
	Matcher *Matcher
	// Strict makes every live server request that no recorded request
	// matches — answered by the profile, a person, or nobody — a
	// difference of its call, at "answers[i]". False reports only what it
	// changed in the compared documents.
	Strict bool
}

// DefaultIgnoreKeys are the members the comparison leaves out wherever they
// appear:
//   - `_meta`: protocol metadata, not content (2026-07-28 servers put their
//     serverInfo and subscription ids there, others trace context);
//   - `requestState`: opaque, minted by the server for each round, often
//     bound to a time or a principal;
//   - `createdAt`, `lastUpdatedAt`: task timestamps, from the server's clock;
//   - `lastModified`: resource annotations' modification time, which a
//     live server reports from its own clock or files.
//
// JSON-RPC ids are never compared: they are not part of the compared
// documents at all.
var DefaultIgnoreKeys = []string{"_meta", "requestState", "createdAt", "lastUpdatedAt", "lastModified"}

// Client replays the recorded client side of a tape against a live MCP
// server and compares what it answers with the recording.
type Client struct {
	tape     *Tape
	opts     ClientOptions
	sessions []*TapeSession
	ignore   *ignoreRules
	matcher  *Matcher
}

// ErrNoSession is returned when ClientOptions.Sessions names no session of
// the tape.
var ErrNoSession = errors.New("no such session in the tape")

// NewClient prepares a replay of tape's client side.
func NewClient(tape *Tape, opts *ClientOptions) (*Client, error) {
	c := &Client{tape: tape}
	if opts != nil {
		c.opts = *opts
	}
	if tape == nil || len(tape.Sessions) == 0 {
		return nil, fmt.Errorf("%w: the tape holds no sessions", ErrTapeInvalid)
	}
	if c.opts.IgnoreKeys == nil {
		c.opts.IgnoreKeys = DefaultIgnoreKeys
	}
	c.opts.CallTimeout = cmp.Or(c.opts.CallTimeout, 60*time.Second)
	c.opts.StreamWait = cmp.Or(c.opts.StreamWait, 3*time.Second)
	c.opts.ManualTimeout = cmp.Or(c.opts.ManualTimeout, DefaultManualTimeout)
	if c.opts.Logger == nil {
		c.opts.Logger = slog.New(slog.DiscardHandler)
	}
	ig, err := newIgnoreRules(c.opts.IgnoreKeys, c.opts.Ignore)
	if err != nil {
		return nil, err
	}
	c.ignore = ig
	if c.matcher = c.opts.Matcher; c.matcher == nil {
		c.matcher = NewMatcher()
	}
	if len(c.opts.Sessions) == 0 {
		c.sessions = tape.Sessions
		return c, nil
	}
	for _, want := range c.opts.Sessions {
		var found []*TapeSession
		for _, ts := range tape.Sessions {
			if ts.Session.ID == want {
				found = []*TapeSession{ts}
				break
			}
			if strings.HasPrefix(ts.Session.ID, want) {
				found = append(found, ts)
			}
		}
		switch len(found) {
		case 0:
			return nil, fmt.Errorf("%w: %q", ErrNoSession, want)
		case 1:
			if !slices.Contains(c.sessions, found[0]) {
				c.sessions = append(c.sessions, found[0])
			}
		default:
			return nil, fmt.Errorf("%w: %q is the start of %d session ids; give more of it", ErrNoSession, want, len(found))
		}
	}
	return c, nil
}

// RunClient replays tape's client side against the live server at target
// (see Client.Run).
func RunClient(ctx context.Context, tape *Tape, target string, opts *ClientOptions) (*ClientReport, error) {
	c, err := NewClient(tape, opts)
	if err != nil {
		return nil, err
	}
	return c.Run(ctx, target)
}

// Run replays each session of the tape, one after another, against the
// live server at target: an MCP endpoint URL, or a base URL (no path) to
// which each session's recorded endpoint path is added. Differences and
// failed calls are in the report; the error is for a target that is not a
// URL, or a ctx that ended.
func (c *Client) Run(ctx context.Context, target string) (*ClientReport, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("target %q is not an http(s) URL", target)
	}
	hc := c.opts.HTTPClient
	if hc == nil {
		tr := &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 8}
		defer tr.CloseIdleConnections()
		hc = &http.Client{Transport: tr}
	}
	start := time.Now()
	rep := &ClientReport{Target: target}
	for _, ts := range c.sessions {
		endpoint := target
		if u.Path == "" || u.Path == "/" {
			endpoint = strings.TrimSuffix(target, "/") + cmp.Or(ts.Session.Path, "/")
		}
		// A tape OpenTape opened gives one session whole at a time.
		full, err := c.tape.Session(slices.Index(c.tape.Sessions, ts))
		if err != nil {
			s := ts.Session
			rep.Sessions = append(rep.Sessions, &SessionResult{ID: s.ID, Era: s.Era, Version: s.Version, Endpoint: endpoint, Err: err.Error()})
			continue
		}
		sr := c.replaySession(ctx, hc, full, endpoint)
		rep.Sessions = append(rep.Sessions, sr)
		if ctx.Err() != nil {
			break
		}
	}
	rep.Duration = time.Since(start)
	return rep, ctx.Err()
}

// ClientReport is what a replay client found.
type ClientReport struct {
	// Target is the URL the tape was replayed against.
	Target string
	// Sessions holds one result per replayed tape session.
	Sessions []*SessionResult
	// Duration is the whole run's.
	Duration time.Duration
}

// SessionResult is the replay of one tape session.
type SessionResult struct {
	// ID is the tape session's id; Era and Version are as recorded.
	ID      string
	Era     protocol.Era
	Version string
	// Endpoint is the URL replayed against.
	Endpoint string
	// Calls are the replayed client calls, in recorded order.
	Calls []*CallResult
	// Err says why the session could not be replayed (or not all of it).
	Err string
	// Skipped says why a session with nothing to replay was left out (a
	// session of plain HTTP exchanges, such as OAuth metadata).
	Skipped string
	// Duration is the session's replay time.
	Duration time.Duration

	slots []slot // the transcript, in step order
}

// CallResult is the replay of one recorded client call: a request with
// its rounds, the server requests it caused and the notifications on its
// stream; or a long-lived stream (a subscriptions/listen request, the
// standalone GET stream); or the closing DELETE.
type CallResult struct {
	// Seq is the recorded request's seq (0 for GET and DELETE).
	Seq uint64
	// Method is the JSON-RPC method, or GET or DELETE; Name the tool,
	// prompt or resource.
	Method string
	Name   string
	// Rounds counts the live requests of the call (MRTR retries).
	Rounds int
	// Diffs are the differences from the recording, ignored paths left out.
	Diffs []Difference
	// Err says why the call could not be completed (a transport error, a
	// timeout, a malformed response). The call then has no Diffs.
	Err string
	// Answers says where each answer to the live server's requests came
	// from.
	Answers []AnswerSource
	// Duration is the call's time, first request to final response.
	Duration time.Duration

	// Recorded and Live are the compared documents (see the package
	// documentation, "Replay client").
	Recorded, Live json.RawMessage

	transcript []TranscriptEntry
	mu         sync.Mutex
	clock      *callClock // stops while a person answers; nil when none can
}

// OK reports whether the call completed and matched the recording.
func (c *CallResult) OK() bool { return c.Err == "" && len(c.Diffs) == 0 }

// Title is "#seq method name", how reports name the call.
func (c *CallResult) Title() string {
	t := c.Method
	if c.Name != "" {
		t += " " + c.Name
	}
	if c.Seq != 0 {
		t = fmt.Sprintf("#%d %s", c.Seq, t)
	}
	return t
}

// Difference is one path where the live response differs from the
// recorded one. Recorded and Live are compact JSON, or "(absent)".
type Difference struct {
	Path     string
	Recorded string
	Live     string
}

func (d Difference) String() string {
	return fmt.Sprintf("%s: recorded %s, live %s", d.Path, d.Recorded, d.Live)
}

// AnswerSource is where the answer to one request of the live server
// came from: "recording", "profile", "manual" (a person, through
// ClientOptions.Manual), or "none" (nothing could answer it, or nobody
// did in time).
type AnswerSource struct {
	Method string
	// Key is an MRTR input request's key ("" for a server→client request).
	Key  string
	From string
}

// OK reports whether every call of the session completed and matched.
func (s *SessionResult) OK() bool {
	if s.Err != "" {
		return false
	}
	for _, c := range s.Calls {
		if !c.OK() {
			return false
		}
	}
	return true
}

// Counts returns how many calls matched, differed, and failed.
func (s *SessionResult) Counts() (ok, differ, failed int) {
	for _, c := range s.Calls {
		switch {
		case c.Err != "":
			failed++
		case len(c.Diffs) > 0:
			differ++
		default:
			ok++
		}
	}
	return ok, differ, failed
}

// OK reports whether every session replayed and matched.
func (r *ClientReport) OK() bool {
	for _, s := range r.Sessions {
		if !s.OK() {
			return false
		}
	}
	return true
}

// Problems counts the calls that differed or failed, and sessions that
// could not be replayed.
func (r *ClientReport) Problems() int {
	n := 0
	for _, s := range r.Sessions {
		_, d, f := s.Counts()
		n += d + f
		if s.Err != "" {
			n++
		}
	}
	return n
}

// TranscriptEntry is one message of a replay as it crossed the wire, JSON-RPC
// ids left out: what two replays of one tape against one deterministic
// server must agree on.
type TranscriptEntry struct {
	// Session is the tape session, Call the recorded call's Title.
	Session string `json:"session"`
	Call    string `json:"call"`
	// Dir is c2s or s2c.
	Dir protocol.Direction `json:"dir"`
	// Method of a request or notification (of the request, on a response);
	// GET and DELETE for those HTTP requests.
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// Status is the HTTP status of a response that carried no message.
	Status int `json:"status,omitempty"`
}

// Transcript is the replay's traffic in recorded-call order, each call's
// messages in the order they crossed its stream.
func (r *ClientReport) Transcript() []TranscriptEntry {
	var out []TranscriptEntry
	for _, s := range r.Sessions {
		for _, sl := range s.slots {
			if sl.entry != nil {
				e := *sl.entry
				e.Session = s.ID
				out = append(out, e)
				continue
			}
			c := sl.call
			c.mu.Lock()
			for _, e := range c.transcript {
				e.Session, e.Call = s.ID, c.Title()
				out = append(out, e)
			}
			c.mu.Unlock()
		}
	}
	return out
}

func (c *CallResult) note(dir protocol.Direction, m *protocol.Message) {
	e := TranscriptEntry{Dir: dir, Method: m.Method, Result: m.Result, Error: m.Error, Params: m.Params}
	if m.Method == protocol.MethodCancelled {
		// requestId is a JSON-RPC id: the live one, which is not compared.
		e.Params = withoutMember(m.Params, "requestId")
	}
	c.mu.Lock()
	c.transcript = append(c.transcript, e)
	c.mu.Unlock()
}

func (c *CallResult) noteHTTP(method string, status int) {
	c.mu.Lock()
	c.transcript = append(c.transcript, TranscriptEntry{Dir: protocol.ClientToServer, Method: method},
		TranscriptEntry{Dir: protocol.ServerToClient, Method: method, Status: status})
	c.mu.Unlock()
}

func (c *CallResult) answered(method, key, from string) {
	c.mu.Lock()
	c.Answers = append(c.Answers, AnswerSource{Method: method, Key: key, From: from})
	c.mu.Unlock()
}

func (c *CallResult) fail(format string, a ...any) {
	if c.Err == "" {
		c.Err = fmt.Sprintf(format, a...)
	}
}

// replaySession runs one tape session's client side against endpoint.
func (c *Client) replaySession(ctx context.Context, hc *http.Client, ts *TapeSession, endpoint string) *SessionResult {
	start := time.Now()
	s := ts.Session
	sr := &SessionResult{ID: s.ID, Era: s.Era, Version: s.Version, Endpoint: endpoint}
	plan := planSession(ts)
	if !slices.ContainsFunc(plan.steps, func(st clientStep) bool { return st.msg != nil && st.msg.Kind == protocol.KindRequest }) {
		sr.Skipped = "the session holds no client requests"
		if s.Opening == "http" {
			sr.Skipped += " (plain HTTP exchanges, no MCP)"
		}
		return sr
	}
	if why := plan.unsupported(); why != "" {
		sr.Err = why
		return sr
	}
	run := &sessionRun{c: c, hc: hc, plan: plan, endpoint: endpoint, result: sr,
		liveIDs: map[uint64]json.RawMessage{}, used: map[uint64]bool{}, streams: map[uint64]*liveStream{}}
	run.run(ctx)
	sr.Duration = time.Since(start)
	ok, differ, failed := sr.Counts()
	c.opts.Logger.Info("replayed session", clientLogSession, s.ID, clientLogEndpoint, endpoint, clientLogOK, ok,
		clientLogDiffer, differ, clientLogFailed, failed)
	return sr
}

// Log keys of the replay client.
const (
	clientLogSession  = "session"
	clientLogEndpoint = "endpoint"
	clientLogOK       = "ok"
	clientLogDiffer   = "differ"
	clientLogFailed   = "failed"
	clientLogCall     = "call"
	clientLogRounds   = "rounds"
	clientLogDiffs    = "diffs"
	clientLogErr      = "err"
	clientLogMethod   = "method"
	clientLogTimeout  = "timeout"
)

// clientPlan is a recorded session indexed for replaying its client side.
type clientPlan struct {
	ts       *TapeSession
	modern   bool
	bySeq    map[uint64]*capture.Message
	xs       map[uint64]*capture.Exchange
	response map[uint64]*capture.Message   // c2s request seq → the server's response
	answer   map[uint64]*capture.Message   // s2c request seq → the client's answer
	retry    map[uint64]*capture.Message   // c2s request seq → the MRTR retry that follows it
	onX      map[uint64][]*capture.Message // exchange id → its s2c messages (frames left out)
	steps    []clientStep
}

// clientStep is one thing the recorded client did: send a message, open
// the standalone GET stream, or end the session with DELETE.
type clientStep struct {
	msg *capture.Message
	x   *capture.Exchange // GET or DELETE
	at  time.Time
}

func planSession(ts *TapeSession) *clientPlan {
	p := &clientPlan{ts: ts, modern: ts.Session.Era == protocol.EraModern,
		bySeq: map[uint64]*capture.Message{}, xs: map[uint64]*capture.Exchange{}, response: map[uint64]*capture.Message{},
		answer: map[uint64]*capture.Message{}, retry: map[uint64]*capture.Message{}, onX: map[uint64][]*capture.Message{}}
	for _, x := range ts.Exchanges {
		p.xs[x.ID] = x
	}
	for _, m := range ts.Messages {
		p.bySeq[m.Seq] = m
	}
	getOpened := false
	for _, m := range ts.Messages {
		switch {
		case m.Kind == protocol.KindFrame || m.Kind == protocol.KindInvalid:
			continue
		case m.Direction == protocol.ServerToClient:
			p.onX[m.ExchangeID] = append(p.onX[m.ExchangeID], m)
			if m.Kind.IsResponse() && m.Links.Request != 0 {
				p.response[m.Links.Request] = m
			}
		case m.Kind.IsResponse():
			if m.Links.Request != 0 {
				p.answer[m.Links.Request] = m
			}
		default:
			if prev := p.bySeq[m.Links.Previous]; m.Kind == protocol.KindRequest && prev != nil &&
				prev.Direction == protocol.ClientToServer && prev.Kind == protocol.KindRequest {
				p.retry[prev.Seq] = m
				continue // replayed as a round of the call it retries
			}
			p.steps = append(p.steps, clientStep{msg: m, at: m.Time})
		}
	}
	for _, x := range ts.Exchanges {
		switch {
		case x.Method == http.MethodGet && !p.modern && !getOpened && x.Status == http.StatusOK && x.RequestHeader.Get(protocol.HeaderLastEventID) == "":
			getOpened = true
			p.steps = append(p.steps, clientStep{x: x, at: x.Start})
		case x.Method == http.MethodDelete && !p.modern:
			p.steps = append(p.steps, clientStep{x: x, at: x.Start})
		}
	}
	slices.SortStableFunc(p.steps, func(a, b clientStep) int { return a.at.Compare(b.at) })
	return p
}

// unsupported says why the session cannot be replayed, or "".
func (p *clientPlan) unsupported() string {
	s := p.ts.Session
	// A 2024-11-05 session that began with a GET event stream used the
	// legacy HTTP+SSE transport.
	if xs := p.ts.Exchanges; s.Version == protocol.V20241105 && len(xs) > 0 && xs[0].Method == http.MethodGet && xs[0].ResponseBody == capture.BodySSE {
		return "the session used the 2024-11-05 HTTP+SSE transport, which the replay client does not speak (it speaks Streamable HTTP)"
	}
	if p.modern {
		return ""
	}
	for _, st := range p.steps {
		if st.msg != nil && st.msg.Method == protocol.MethodInitialize {
			return ""
		}
	}
	return "the recording holds no initialize (it joined the session under way: opening " + cmp.Or(s.Opening, "unknown") +
		"), so the replay client cannot open a session like it"
}

// rounds is the chain of recorded requests of a call: the request and its
// MRTR retries.
func (p *clientPlan) rounds(req *capture.Message) []*capture.Message {
	out := []*capture.Message{req}
	for r := p.retry[req.Seq]; r != nil && len(out) < 64; r = p.retry[r.Seq] {
		out = append(out, r)
	}
	return out
}

// streamOf is what the recorded server sent on the streams of rounds: the
// request exchanges' responses, and resumed streams (GET with
// Last-Event-ID) that carry messages linked to the rounds.
func (p *clientPlan) streamOf(rounds []*capture.Message) []*capture.Message {
	in := map[uint64]bool{}
	xs := map[uint64]bool{}
	for _, r := range rounds {
		in[r.Seq] = true
		xs[r.ExchangeID] = true
	}
	var out []*capture.Message
	for _, m := range p.ts.Messages {
		if m.Direction != protocol.ServerToClient || m.Kind == protocol.KindFrame || m.Kind == protocol.KindInvalid {
			continue
		}
		if xs[m.ExchangeID] {
			out = append(out, m)
			continue
		}
		if x := p.xs[m.ExchangeID]; x != nil && x.Method == http.MethodGet && x.RequestHeader.Get(protocol.HeaderLastEventID) != "" &&
			(in[m.Links.Request] || in[m.Links.Parent]) {
			out = append(out, m)
		}
	}
	return out
}

// standaloneStream is what the recorded server sent on the standalone GET
// streams (not on GETs that resumed a POST's stream).
func (p *clientPlan) standaloneStream() []*capture.Message {
	var out []*capture.Message
	for _, x := range p.ts.Exchanges {
		if x.Method == http.MethodGet && x.RequestHeader.Get(protocol.HeaderLastEventID) == "" {
			out = append(out, p.onX[x.ID]...)
		}
	}
	slices.SortFunc(out, func(a, b *capture.Message) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// longLived reports whether a recorded request is replayed in the
// background: a subscriptions/listen stream, or a request the recorded
// server never answered.
func (p *clientPlan) longLived(m *capture.Message) bool {
	return m.Method == protocol.MethodSubscriptionsListen || p.response[m.Seq] == nil
}
