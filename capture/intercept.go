package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// Intercepting: a person holds messages in flight, as mitmproxy's intercept
// does for HTTP, and decides what goes on. The queue lives here because
// every leg consults it (the reverse proxy today) and the dashboard shows
// it; what was held, and what went on instead, is recorded (see
// [Intercepted]).
//
// A rule names what to hold: a kind (request by default, response or
// notification), a method glob and a name glob (a tool, prompt or resource
// name), written KIND:METHOD:NAME with the parts on the left optional:
//
//	tools/call:delete_*          client requests calling a tool named delete_…
//	elicitation/create           the server's elicitation requests
//	response:tools/call          the server's answers to tools/call
//	notification:notifications/progress
//
// In the globs (path.Match syntax) * and ? match "/" too. On 2026-07-28,
// where a server asks the client for sampling, elicitation or roots inside
// an input_required result rather than with a request of its own, a
// request rule for one of those methods holds the result that carries it.

// InterceptKind is the kind of message a rule holds.
type InterceptKind uint8

const (
	// InterceptRequest holds requests: a client's (before it is
	// forwarded) or a server's (sampling, elicitation, roots), and, on
	// 2026-07-28, an input_required result that carries one.
	InterceptRequest InterceptKind = iota
	// InterceptResponse holds a server's answer to a client request: a
	// JSON body, or the SSE event that carries it.
	InterceptResponse
	// InterceptNotification holds notifications, either way.
	InterceptNotification
)

func (k InterceptKind) String() string {
	switch k {
	case InterceptResponse:
		return "response"
	case InterceptNotification:
		return "notification"
	}
	return "request"
}

// MarshalText implements encoding.TextMarshaler.
func (k InterceptKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *InterceptKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "request", "":
		*k = InterceptRequest
	case "response":
		*k = InterceptResponse
	case "notification":
		*k = InterceptNotification
	default:
		return fmt.Errorf("%q is not a kind of message to intercept: want request, response or notification", b)
	}
	return nil
}

// InterceptRule says which messages to hold.
type InterceptRule struct {
	// Kind is what the rule holds.
	Kind InterceptKind `json:"kind"`
	// Method is a glob of the method: the message's own, or for a
	// response the method of the request it answers. "" matches every
	// method.
	Method string `json:"method"`
	// Name is a glob of params.name (params.uri for resources); "" matches
	// every message, named or not.
	Name string `json:"name,omitempty"`
	// Enabled rules hold; a disabled one is kept to switch on again.
	Enabled bool `json:"enabled"`
}

// ErrBadRule is returned for a rule that does not parse or whose globs
// are malformed.
var ErrBadRule = errors.New("bad intercept rule")

// ParseInterceptRule reads KIND:METHOD:NAME (see the package's intercept
// notes); the rule is enabled.
func ParseInterceptRule(s string) (InterceptRule, error) {
	r := InterceptRule{Enabled: true}
	rest := strings.TrimSpace(s)
	if rest == "" {
		return r, fmt.Errorf("%w: empty; write METHOD[:NAME], e.g. tools/call:delete_*, or response:tools/call", ErrBadRule)
	}
	for _, k := range []InterceptKind{InterceptRequest, InterceptResponse, InterceptNotification} {
		if after, ok := strings.CutPrefix(rest, k.String()+":"); ok {
			r.Kind, rest = k, after
			break
		}
	}
	// Methods never hold a colon; names (resource URIs) may.
	r.Method, r.Name, _ = strings.Cut(rest, ":")
	if r.Method == "*" {
		r.Method = ""
	}
	if err := r.Check(); err != nil {
		return r, err
	}
	return r, nil
}

// Check reports a malformed glob.
func (r InterceptRule) Check() error {
	for _, g := range []struct{ what, glob string }{{"method", r.Method}, {"name", r.Name}} {
		if _, err := path.Match(g.glob, ""); err != nil {
			return fmt.Errorf("%w: %s glob %q: %v", ErrBadRule, g.what, g.glob, err)
		}
	}
	return nil
}

// String is the rule as ParseInterceptRule reads it.
func (r InterceptRule) String() string {
	s := r.Method
	if s == "" {
		s = "*"
	}
	if r.Name != "" {
		s += ":" + r.Name
	}
	if r.Kind != InterceptRequest {
		s = r.Kind.String() + ":" + s
	}
	return s
}

// matches reports whether the rule holds a message of kind, method, name.
func (r InterceptRule) matches(kind InterceptKind, method, name string) bool {
	return r.Enabled && r.Kind == kind && globMatch(r.Method, method) && (r.Name == "" || globMatch(r.Name, name))
}

// globMatch is path.Match where * and ? match "/" too ("" matches all).
func globMatch(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	const slash = "\uE000" // a private-use rune stands in for "/"
	ok, _ := path.Match(strings.ReplaceAll(pattern, "/", slash), strings.ReplaceAll(s, "/", slash))
	return ok
}

// HeldWhat says what a held message is, and so what may be done with it.
type HeldWhat string

const (
	// HeldRequest is a client's request, held before it is forwarded: it
	// may be forwarded, edited, answered in place of the server, or
	// failed.
	HeldRequest HeldWhat = "request"
	// HeldServerRequest is a server's request to the client (sampling,
	// elicitation, roots) on an SSE stream: it may be forwarded to the
	// client, edited, answered in place of the client, or failed.
	HeldServerRequest HeldWhat = "server-request"
	// HeldResponse is a server's answer to a client request: it may be
	// forwarded, edited, or replaced by a JSON-RPC error.
	HeldResponse HeldWhat = "response"
	// HeldNotification may be forwarded or edited.
	HeldNotification HeldWhat = "notification"
	// HeldAnswer is a request mcptape answers for the client (`--answer
	// KIND=person`): a legacy server→client request, or one input request
	// of a 2026-07-28 input_required round. A person answers it or fails
	// it; forwarding it gives it to the client instead.
	HeldAnswer HeldWhat = "answer"
)

// Actions lists what may be done with a held message of this kind.
func (w HeldWhat) Actions() []VerdictAction {
	switch w {
	case HeldRequest, HeldServerRequest:
		return []VerdictAction{ActionForward, ActionEdit, ActionAnswer, ActionFail}
	case HeldResponse:
		return []VerdictAction{ActionForward, ActionEdit, ActionFail}
	case HeldAnswer:
		return []VerdictAction{ActionAnswer, ActionFail, ActionForward}
	}
	return []VerdictAction{ActionForward, ActionEdit}
}

// HeldMessage is one message held in flight.
type HeldMessage struct {
	// ID names it in the dashboard's API.
	ID string `json:"id"`
	// What it is; Actions what may be done with it.
	What    HeldWhat        `json:"what"`
	Actions []VerdictAction `json:"actions"`
	// Direction is who sent it.
	Direction protocol.Direction `json:"dir"`
	// Method is its method, or for a response the method of the request
	// it answers; Name is that request's params.name (or uri).
	Method string `json:"method,omitempty"`
	Name   string `json:"name,omitempty"`
	// Raw is the message as received (for HeldAnswer: the request's
	// params).
	Raw json.RawMessage `json:"raw"`
	// Request is, for a response, the client request it answers.
	Request json.RawMessage `json:"request,omitempty"`
	// Key is, for a HeldAnswer of a 2026-07-28 round, its inputRequests
	// key.
	Key string `json:"key,omitempty"`
	// Rule is why it is held: the rule that matched, or the --answer
	// setting.
	Rule string `json:"rule"`
	// Upstream is the server's URL; Version the protocol version the
	// exchange spoke, when known.
	Upstream string `json:"upstream,omitempty"`
	Version  string `json:"version,omitempty"`
	// Profile is, for a HeldAnswer, the testing profile --answer names
	// (the page's default for Auto-respond), "" when none.
	Profile string `json:"profile,omitempty"`
	// MCPSession is the exchange's Mcp-Session-Id as the leg received
	// it: Hold turns it into SessionKey (with InterceptorOptions.Pseudonym)
	// and forgets it, so that it is never shown.
	MCPSession string `json:"-"`
	// SessionKey is the stored key of the legacy session the message
	// belongs to (its Session.Key); Client is the clientInfo name the
	// exchange's request gave, when it gave one (2026-07-28). Together
	// with Upstream they let a reader find the message's session.
	SessionKey string `json:"sessionKey,omitempty"`
	Client     string `json:"client,omitempty"`
	// Since is when it was held; Deadline when it goes on unchanged
	// (zero: never).
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline,omitzero"`
}

// VerdictAction is what becomes of a held message.
type VerdictAction string

const (
	// ActionForward sends it on unchanged.
	ActionForward VerdictAction = "forward"
	// ActionEdit sends Verdict.Raw on instead.
	ActionEdit VerdictAction = "edit"
	// ActionAnswer answers a request with Verdict.Result in place of the other
	// side; the request goes no further.
	ActionAnswer VerdictAction = "answer"
	// ActionFail answers a request with the JSON-RPC error Verdict.Error, or
	// replaces a response with it.
	ActionFail VerdictAction = "fail"
)

// Verdict is what a person (or a timeout, or the recorder stopping)
// decided about a held message.
type Verdict struct {
	Action VerdictAction `json:"action"`
	// Raw is, for ActionEdit, the message to send on. It must be JSON unless
	// Malformed says the person means to send bytes that are not.
	Raw       string `json:"raw,omitempty"`
	Malformed bool   `json:"malformed,omitempty"`
	// Result is, for ActionAnswer, the result.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is, for ActionFail, the JSON-RPC error.
	Error *protocol.ErrorInfo `json:"error,omitempty"`
	// By says who decided ("a person" when empty).
	By string `json:"by,omitempty"`
	// TimedOut and Stopped are set by the queue: the hold outlasted the
	// intercept timeout, or the recorder stopped; the message went on
	// unchanged.
	TimedOut bool `json:"timedOut,omitempty"`
	Stopped  bool `json:"stopped,omitempty"`
}

// Errors of the intercept queue.
var (
	// ErrNotHeld is returned by Decide for an id that is not held (it
	// went on already: decided, timed out, or its client went away).
	ErrNotHeld = errors.New("no such held message")
	// ErrBadVerdict is returned by Decide for a verdict that breaks the
	// rules; the message stays held.
	ErrBadVerdict = errors.New("bad verdict")
)

// InterceptorOptions configures an Interceptor. Nil means defaults.
type InterceptorOptions struct {
	// Timeout is how long a message stays held before it goes on
	// unchanged (and the record says so). Zero means
	// DefaultInterceptTimeout; negative means no limit.
	Timeout time.Duration
	// MaxHeld bounds the messages held at once: one more goes on
	// unchanged, with a note. Zero means 1000.
	MaxHeld int
	// Now is the clock (tests). Nil means time.Now.
	Now func() time.Time
	// Pseudonym turns an Mcp-Session-Id into its stored key, as the
	// recorder does (RedactOptions.Pseudonym with the recorder's
	// options). Nil keeps no session key.
	Pseudonym func(string) string
}

// Pseudonym is the stored key of an Mcp-Session-Id under these options
// (Session.Key), as the recorder writes it.
func (o RedactOptions) Pseudonym(id string) string { return (&redactor{opts: o}).pseudonym(id) }

// DefaultInterceptTimeout is how long a message stays held by default.
const DefaultInterceptTimeout = 5 * time.Minute

// Interceptor holds the messages its rules match until someone decides
// what goes on: a [HoldQueue] of held messages and their verdicts, and the
// rules that fill it. It is safe for concurrent use; a nil *Interceptor
// holds nothing and costs a nil check.
type Interceptor struct {
	timeout   time.Duration
	maxHeld   int
	pseudonym func(string) string
	q         *HoldQueue[HeldMessage, Verdict]

	// wants is a bit per InterceptKind with an enabled rule: the legs'
	// fast path (no rule, no cost).
	wants atomic.Uint32

	mu    sync.Mutex
	rules []InterceptRule
}

// NewInterceptor returns a queue holding what rules match.
func NewInterceptor(rules []InterceptRule, o *InterceptorOptions) (*Interceptor, error) {
	i := &Interceptor{timeout: DefaultInterceptTimeout, maxHeld: 1000}
	qo := &HoldQueueOptions[HeldMessage, Verdict]{Check: func(m HeldMessage, v *Verdict) error {
		if err := checkVerdict(m.What, v); err != nil {
			return err
		}
		v.TimedOut, v.Stopped = false, false
		return nil
	}}
	if o != nil {
		switch {
		case o.Timeout > 0:
			i.timeout = o.Timeout
		case o.Timeout < 0:
			i.timeout = 0
		}
		if o.MaxHeld > 0 {
			i.maxHeld = o.MaxHeld
		}
		qo.Now, i.pseudonym = o.Now, o.Pseudonym
	}
	qo.Max = i.maxHeld
	i.q = NewHoldQueue(qo)
	if err := i.SetRules(rules); err != nil {
		return nil, err
	}
	return i, nil
}

// Timeout is how long a message stays held (0: no limit).
func (i *Interceptor) Timeout() time.Duration { return i.timeout }

// Rules returns the rules, in order.
func (i *Interceptor) Rules() []InterceptRule {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.rules)
}

// SetRules replaces the rules (the dashboard toggles them at run time).
// Messages already held stay held.
func (i *Interceptor) SetRules(rules []InterceptRule) error {
	var wants uint32
	for _, r := range rules {
		if err := r.Check(); err != nil {
			return err
		}
		if r.Enabled {
			wants |= 1 << r.Kind
		}
	}
	i.mu.Lock()
	i.rules = slices.Clone(rules)
	i.wants.Store(wants)
	i.mu.Unlock()
	i.q.Notify()
	return nil
}

// Wants reports whether an enabled rule holds messages of kind: a leg
// examines traffic only when one does.
func (i *Interceptor) Wants(kind InterceptKind) bool {
	return i != nil && i.wants.Load()&(1<<kind) != 0
}

// Match returns the first enabled rule that holds a message of kind,
// method and name.
func (i *Interceptor) Match(kind InterceptKind, method, name string) (InterceptRule, bool) {
	if !i.Wants(kind) {
		return InterceptRule{}, false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range i.rules {
		if r.matches(kind, method, name) {
			return r, true
		}
	}
	return InterceptRule{}, false
}

// Hold queues m and waits for a verdict: a person's (Decide), ActionForward
// with TimedOut once the timeout passes, ActionForward with Stopped when the
// queue is closed (at once if it is closed already, or when MaxHeld
// messages are held already). It returns ctx's error when ctx ends first:
// the message leaves the queue, and nothing is to be sent on (the side
// that waited for it went away).
func (i *Interceptor) Hold(ctx context.Context, m HeldMessage) (Verdict, error) {
	m.ID, m.Since, m.Deadline = "", time.Time{}, time.Time{}
	if m.MCPSession != "" && i.pseudonym != nil {
		m.SessionKey = i.pseudonym(m.MCPSession)
	}
	m.MCPSession = ""
	m.Actions = m.What.Actions()
	m.Raw = bytes.Clone(m.Raw)
	v, err := i.q.Hold(ctx, m, i.timeout)
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, ErrHoldClosed):
		return Verdict{Action: ActionForward, Stopped: true}, nil
	case errors.Is(err, ErrHoldFull):
		return Verdict{Action: ActionForward, By: fmt.Sprintf("mcptape: %d messages were held already (the most it holds at once)", i.maxHeld)}, nil
	case errors.Is(err, ErrHoldTimeout):
		return Verdict{Action: ActionForward, TimedOut: true}, nil
	}
	return Verdict{}, err
}

// Decide settles the held message id, after checking the verdict (see
// ErrBadVerdict).
func (i *Interceptor) Decide(id string, v Verdict) error {
	err := i.q.Answer(id, v)
	if errors.Is(err, ErrNotWaiting) {
		return fmt.Errorf("%w %q: it went on already (decided, timed out, or the side waiting for it went away)", ErrNotHeld, id)
	}
	return err
}

// checkVerdict applies ErrBadVerdict's rules, and compacts a JSON edit's
// whitespace nowhere: what the person wrote is what is sent.
func checkVerdict(what HeldWhat, v *Verdict) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadVerdict, fmt.Sprintf(format, a...))
	}
	if !slices.Contains(what.Actions(), v.Action) {
		names := make([]string, 0, 4)
		for _, a := range what.Actions() {
			names = append(names, string(a))
		}
		return bad("%q is not something to do with a held %s: want %s", v.Action, what, strings.Join(names, ", "))
	}
	switch v.Action {
	case ActionEdit:
		if strings.TrimSpace(v.Raw) == "" {
			return bad("the edited message is empty")
		}
		if !v.Malformed {
			if err := jsonProblem([]byte(v.Raw)); err != "" {
				return bad("the edited message is not JSON (%s); to send it anyway on purpose, confirm it as malformed", err)
			}
		}
	case ActionAnswer:
		r := bytes.TrimSpace(v.Result)
		if len(r) == 0 || r[0] != '{' || !json.Valid(r) {
			return bad(`an answer is a JSON object: the result, e.g. {"content": [...]}`)
		}
	case ActionFail:
		if v.Error == nil || v.Error.Code == 0 {
			return bad("a failure needs a JSON-RPC error code, e.g. -32603 (internal error) or -1 (the user rejected it)")
		}
		if strings.TrimSpace(v.Error.Message) == "" {
			return bad("a failure needs a message: say why")
		}
	}
	return nil
}

func jsonProblem(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err.Error()
	}
	return ""
}

// Held lists the held messages, oldest first.
func (i *Interceptor) Held() []HeldMessage {
	if i == nil {
		return nil
	}
	ws := i.q.Waiting()
	out := make([]HeldMessage, len(ws))
	for k, w := range ws {
		out[k] = w.Q
		out[k].ID, out[k].Since, out[k].Deadline = w.ID, w.Since, w.Deadline
	}
	return out
}

// Watch returns the number held and a channel closed on the next change
// (a message held or released, the rules changed).
func (i *Interceptor) Watch() (int, <-chan struct{}) { return i.q.Watch() }

// Close sends every held message on unchanged (Verdict.Stopped), and
// every later one at once: the recorder is stopping, and holding must
// never lose a message. It is safe to call more than once.
func (i *Interceptor) Close() {
	if i == nil {
		return
	}
	i.wants.Store(0)
	i.q.Close()
}
