package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Checking a recording: is it healthy? Check reads each session's causal
// tree (capture.BuildTree) and its messages, and reports every call with
// what went wrong in it — a JSON-RPC error or an isError result, a call
// that got no answer before the session's end, messages the recorder
// lost — and the findings of the kinds CheckOptions.FailOn names.

// Rules: what a check looks for. A rule's text is its name in --fail-on
// and, under "mcptape/", its SARIF rule id.
const (
	// RuleError is a JSON-RPC error, or a tool result with isError.
	RuleError = "error"
	// RuleUnanswered is a request that got no answer: none came before
	// the session's end, or its exchange ended first.
	RuleUnanswered = "unanswered"
	// RuleLost is messages of the session that were not recorded.
	RuleLost = "lost"
	// RuleFinding, followed by a finding kind ("finding:schema"), is a
	// finding of that kind; "finding:*" is every finding.
	RuleFinding = "finding:"
)

// DefaultFailOn is what makes a recording unhealthy unless
// CheckOptions.FailOn says otherwise: errors, unanswered calls, lost
// messages, invalid frames, schema violations and tool-definition drift.
var DefaultFailOn = []string{RuleError, RuleUnanswered, RuleLost,
	RuleFinding + string(capture.FindingInvalidFrame), RuleFinding + string(capture.FindingSchema), RuleFinding + string(capture.FindingDrift)}

// ErrBadRule is returned for a --fail-on rule that is not one.
var ErrBadRule = errors.New("unknown check rule")

// findingKinds are the finding kinds a rule may name.
var findingKinds = []capture.FindingKind{capture.FindingInvalidFrame, capture.FindingMalformed, capture.FindingBatch,
	capture.FindingOversize, capture.FindingTruncated, capture.FindingUnanswered, capture.FindingOrphanResponse,
	capture.FindingDuplicateID, capture.FindingHeaderMismatch, capture.FindingWrongStream, capture.FindingCapability,
	capture.FindingSchema, capture.FindingRequestState, capture.FindingEncoding, capture.FindingProxy, capture.FindingVersion,
	capture.FindingRedacted, capture.FindingIntercepted, capture.FindingDrift}

// ParseFailOn reads a comma-separated list of rules, as --fail-on takes it:
// error, unanswered, lost, finding:KIND (a finding kind, or *).
func ParseFailOn(s string) ([]string, error) {
	var out []string
	for r := range strings.SplitSeq(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if err := checkRule(r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no rule given", ErrBadRule)
	}
	return out, nil
}

func checkRule(r string) error {
	switch r {
	case RuleError, RuleUnanswered, RuleLost, RuleFinding + "*":
		return nil
	}
	if k, ok := strings.CutPrefix(r, RuleFinding); ok {
		if slices.Contains(findingKinds, capture.FindingKind(k)) {
			return nil
		}
		var kinds []string
		for _, k := range findingKinds {
			kinds = append(kinds, string(k))
		}
		return fmt.Errorf("%w %q: finding kinds are %s, or * for all", ErrBadRule, r, strings.Join(kinds, ", "))
	}
	return fmt.Errorf("%w %q: want error, unanswered, lost, or finding:KIND (finding:schema, finding:*)", ErrBadRule, r)
}

// CheckOptions configures Check. Nil means defaults.
type CheckOptions struct {
	// FailOn lists the rules that make a recording unhealthy (see
	// ParseFailOn). Nil means DefaultFailOn.
	FailOn []string
}

// CheckReport is what Check found.
type CheckReport struct {
	FailOn   []string          `json:"failOn"`
	Sessions []*CheckedSession `json:"sessions"`
}

// CheckedSession is one session checked.
type CheckedSession struct {
	// Recording is the name of the Recording it is in; File its tape
	// file, "" for a store's session.
	Recording string           `json:"recording"`
	File      string           `json:"file,omitempty"`
	Session   *capture.Session `json:"session"`
	// Calls are the client's calls, in order.
	Calls []*CheckedCall `json:"calls"`
	// Problems are every problem found, in message order, failing or
	// not; those of a call are also in its Problems.
	Problems []*Problem `json:"problems,omitempty"`
}

// CheckedCall is one client call.
type CheckedCall struct {
	// Seq is its request's seq; Index the request's index in the
	// session's messages.
	Seq      uint64        `json:"seq"`
	Index    int           `json:"index"`
	Method   string        `json:"method"`
	Name     string        `json:"name,omitempty"`
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration"`
	// Status is the call tree's: success, error, isError, pending,
	// aborted, cancelled, input_required, open, closed.
	Status   string     `json:"status"`
	Problems []*Problem `json:"problems,omitempty"`
}

// Problem is one thing a check found.
type Problem struct {
	// Rule is RuleError, RuleUnanswered, RuleLost, or RuleFinding and
	// the finding's kind.
	Rule string `json:"rule"`
	// Fails says the rule is one of FailOn: the problem makes the
	// recording unhealthy.
	Fails bool   `json:"fails"`
	Text  string `json:"text"`
	// Seq and Index are the message it is about (its seq, and its index
	// among the session's messages), Line that message's line in the
	// tape file; 0, -1 and 0 for the session as a whole.
	Seq   uint64 `json:"seq,omitempty"`
	Index int    `json:"index"`
	Line  int    `json:"line,omitempty"`
	// Call is the seq of the request of the call it is in, 0 for none.
	Call uint64 `json:"call,omitempty"`
}

// Title names a call as reports do: "#seq method name".
func (c *CheckedCall) Title() string {
	t := fmt.Sprintf("#%d %s", c.Seq, c.Method)
	if c.Name != "" {
		t += " " + c.Name
	}
	return t
}

// Failed reports whether the call has a problem that fails the check.
func (c *CheckedCall) Failed() bool {
	return slices.ContainsFunc(c.Problems, func(p *Problem) bool { return p.Fails })
}

// Failures are the session's problems that fail the check.
func (s *CheckedSession) Failures() []*Problem {
	var out []*Problem
	for _, p := range s.Problems {
		if p.Fails {
			out = append(out, p)
		}
	}
	return out
}

// OK reports whether no problem fails the check.
func (r *CheckReport) OK() bool {
	for _, s := range r.Sessions {
		if len(s.Failures()) > 0 {
			return false
		}
	}
	return true
}

// Failures are every problem that fails the check, session by session.
func (r *CheckReport) Failures() []*Problem {
	var out []*Problem
	for _, s := range r.Sessions {
		out = append(out, s.Failures()...)
	}
	return out
}

// Check checks the sessions of each recording. Its error is for reading
// them; what is wrong in them is the report's.
func Check(ctx context.Context, opts *CheckOptions, recs ...Recording) (*CheckReport, error) {
	failOn := DefaultFailOn
	if opts != nil && opts.FailOn != nil {
		failOn = opts.FailOn
	}
	for _, r := range failOn {
		if err := checkRule(r); err != nil {
			return nil, err
		}
	}
	rep := &CheckReport{FailOn: slices.Clone(failOn), Sessions: []*CheckedSession{}}
	for _, rec := range recs {
		err := rec.each(ctx, func(rs *recordedSession) error {
			rep.Sessions = append(rep.Sessions, checkSession(rec.Name, rs, failOn))
			return ctx.Err()
		})
		if err != nil {
			return rep, fmt.Errorf("%s: %w", rec.Name, err)
		}
	}
	return rep, nil
}

// checker checks one session.
type checker struct {
	cs     *CheckedSession
	rs     *recordedSession
	failOn []string
	index  map[uint64]int          // message seq → its index
	callOf map[uint64]*CheckedCall // any message seq of a call → the call
}

func checkSession(name string, rs *recordedSession, failOn []string) *CheckedSession {
	c := &checker{cs: &CheckedSession{Recording: name, File: rs.File, Session: rs.Session, Calls: []*CheckedCall{}},
		rs: rs, failOn: failOn, index: make(map[uint64]int, len(rs.Messages)), callOf: map[uint64]*CheckedCall{}}
	for i, m := range rs.Messages {
		c.index[m.Seq] = i
	}
	s := rs.Session
	switch {
	case s.Lost > 0:
		c.add(RuleLost, fmt.Sprintf("%d message(s) of this session were not recorded: %s", s.Lost, orText(s.LossReason, "the recorder could not store them")), 0)
	case s.Status == capture.StatusIncomplete:
		c.add(RuleLost, "the session is incomplete: "+orText(s.LossReason, "some of its records could not be stored"), 0)
	}
	tree := capture.BuildTree(s, rs.Messages, rs.Exchanges)
	for _, n := range tree.Roots {
		if n.Kind != capture.NodeCall || n.Dir != protocol.ClientToServer {
			continue
		}
		call := &CheckedCall{Seq: n.Request, Index: c.indexOf(n.Request), Method: n.Method, Name: n.Name, Start: n.Start,
			Duration: n.Duration, Status: n.Status}
		c.cs.Calls = append(c.cs.Calls, call)
		n.Walk(func(x *capture.Node) {
			for _, seq := range []uint64{x.Request, x.Response} {
				if seq != 0 {
					c.callOf[seq] = call
				}
			}
		})
	}
	// Problems in message order: a node's status where its answer (or,
	// missing, its request) is; findings where they were recorded.
	type placed struct {
		seq  uint64
		rule string
		text string
	}
	var found []placed
	for _, n := range tree.Roots {
		n.Walk(func(x *capture.Node) {
			if rule, text := nodeProblem(x); rule != "" {
				at := x.Response
				if at == 0 {
					at = x.Request
				}
				found = append(found, placed{at, rule, text})
			}
		})
	}
	firstOf := map[uint64]uint64{} // exchange → its first message
	for _, m := range rs.Messages {
		if _, ok := firstOf[m.ExchangeID]; !ok {
			firstOf[m.ExchangeID] = m.Seq
		}
		for _, f := range m.Findings {
			found = append(found, placed{m.Seq, RuleFinding + string(f.Kind), findingText(m, f)})
		}
	}
	for _, x := range rs.Exchanges {
		for _, f := range x.FindingList {
			found = append(found, placed{firstOf[x.ID], RuleFinding + string(f.Kind),
				fmt.Sprintf("%s (the HTTP exchange %s %s): %s", f.Kind, x.Method, x.URL, f.Message)})
		}
	}
	slices.SortStableFunc(found, func(a, b placed) int { return c.indexOf(a.seq) - c.indexOf(b.seq) })
	for _, p := range found {
		c.add(p.rule, p.text, p.seq)
	}
	return c.cs
}

func (c *checker) indexOf(seq uint64) int {
	if i, ok := c.index[seq]; ok {
		return i
	}
	return -1
}

// add notes a problem about message seq (0: the session).
func (c *checker) add(rule, text string, seq uint64) {
	p := &Problem{Rule: rule, Fails: fails(c.failOn, rule), Text: capture.TerminalText(text), Seq: seq, Index: -1}
	if seq != 0 {
		p.Index = c.indexOf(seq)
		p.Line = c.rs.Lines[seq]
	}
	if call := c.callOf[seq]; call != nil {
		p.Call = call.Seq
		call.Problems = append(call.Problems, p)
	}
	c.cs.Problems = append(c.cs.Problems, p)
}

func fails(failOn []string, rule string) bool {
	for _, r := range failOn {
		if r == rule || (r == RuleFinding+"*" && strings.HasPrefix(rule, RuleFinding)) {
			return true
		}
	}
	return false
}

// nodeProblem is what a call-tree node's status says went wrong, if
// anything: an error, an isError result, no answer.
func nodeProblem(n *capture.Node) (rule, text string) {
	what := n.Method
	if n.Name != "" {
		what += " " + fmt.Sprintf("%q", n.Name)
	}
	who := "the server"
	if n.Kind == capture.NodeServerRequest {
		who, what = "the client", "the server's "+what
	}
	switch n.Status {
	case "error":
		return RuleError, fmt.Sprintf("%s answered %s with a JSON-RPC error: %s", who, what, orText(n.Summary, "(no message)"))
	case "isError":
		return RuleError, fmt.Sprintf("%s returned a tool error (isError): %s", what, orText(n.Summary, "(no text)"))
	case "aborted":
		return RuleUnanswered, fmt.Sprintf("%s got no answer: %s", what, orText(n.Note, "its exchange ended first"))
	case "pending":
		for _, f := range n.Findings {
			if f.Kind == capture.FindingUnanswered {
				return RuleUnanswered, fmt.Sprintf("%s got no answer: %s (the session's last message)", what, f.Message)
			}
		}
	}
	return "", ""
}

// findingText says what a finding is about, plainly.
func findingText(m *capture.Message, f capture.Finding) string {
	what := m.Method
	if m.Name != "" {
		what += " " + fmt.Sprintf("%q", m.Name)
	}
	if what == "" {
		what = m.Kind.String()
	}
	return fmt.Sprintf("%s on %s %s: %s", f.Kind, what, m.Kind, f.Message)
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
