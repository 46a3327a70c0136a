package capture

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// Tree is a session as its calls: what each client request set off, nested.
// It is derived at read time from the links the recorder stored, so every
// reader (show, the dashboard, replay) sees the same tree.
type Tree struct {
	Session *Session `json:"session"`
	Roots   []*Node  `json:"roots"`
	// Messages, Frames and Stderr count what the tree was built from;
	// frames (SSE priming events, comments) and a stdio server's stderr
	// lines are not nodes.
	Messages int `json:"messages"`
	Frames   int `json:"frames"`
	Stderr   int `json:"stderr,omitempty"`
	// StderrLines are a stdio server's stderr lines, in order (the first
	// maxTreeStderr of them, each cut at maxStderrText bytes): what a
	// server says of itself beside its messages.
	StderrLines []StderrLine `json:"stderrLines,omitempty"`
	// Findings counts the findings recorded on the session's messages and
	// exchanges, all of which are on the tree's nodes: the session's own
	// count when the tree holds the whole session. Unanswered counts those
	// the tree adds (requests with no response), which no message holds.
	Findings   int `json:"findings"`
	Unanswered int `json:"unanswered"`
}

// StderrLine is a line a stdio server wrote to its standard error.
type StderrLine struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

// A Tree keeps the first maxTreeStderr stderr lines, each cut at
// maxStderrText bytes.
const (
	maxTreeStderr = 1000
	maxStderrText = 300
)

// NodeKind says what a node stands for.
type NodeKind string

// Node kinds.
const (
	// NodeCall is a client request with its response: one logical call,
	// whose Rounds hold the retries of a 2026-07-28 multi round-trip request.
	NodeCall NodeKind = "call"
	// NodeServerRequest is a server→client request (sampling, elicitation,
	// roots) with the client's answer.
	NodeServerRequest NodeKind = "server-request"
	// NodeInputRequest is a request embedded in an MRTR input_required
	// result, with the answer the client gave in its retry.
	NodeInputRequest NodeKind = "input-request"
	// NodeRound is one round of an MRTR call.
	NodeRound NodeKind = "round"
	// NodeNotification is a notification.
	NodeNotification NodeKind = "notification"
	// NodeOther is anything else: an orphan response, an invalid frame.
	NodeOther NodeKind = "other"
)

// Node is one entry of a Tree.
type Node struct {
	Kind NodeKind `json:"kind"`
	// Method and Name (the tool, prompt or resource); Key is an input
	// request's key in its inputRequests map.
	Method string `json:"method,omitempty"`
	Name   string `json:"name,omitempty"`
	Key    string `json:"key,omitempty"`
	// Dir is the direction of the request (or the lone message).
	Dir protocol.Direction `json:"dir"`
	// Request and Response are the messages' Seqs (0 when absent);
	// ID is the request's raw id.
	Request  uint64          `json:"request,omitempty"`
	Response uint64          `json:"response,omitempty"`
	ID       json.RawMessage `json:"id,omitempty"`
	// Start and End are the request's and the response's times; Duration
	// is End-Start, 0 while unanswered.
	Start    time.Time     `json:"start"`
	End      time.Time     `json:"end,omitzero"`
	Duration time.Duration `json:"duration,omitempty"`
	// Status is success, error, isError, input_required, pending,
	// cancelled, or "" for notifications.
	Status string `json:"status,omitempty"`
	// Label qualifies the request ("with tools", "continuation", "url");
	// Summary is a one-line digest of the result ("toolUse -
	// get_weather(Paris)", a quoted text, "accept {…}").
	Label   string `json:"label,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Note is a remark about the node: the era negotiation, the number of
	// rounds, a subscription id.
	Note string `json:"note,omitempty"`
	// Findings on the node's messages and those the tree adds (unanswered).
	Findings []Finding `json:"findings,omitempty"`
	// In is, on an input request, the input_required result that carries
	// it (it is no message of its own); Answered the retry whose
	// inputResponses answer it.
	In       uint64 `json:"in,omitempty"`
	Answered uint64 `json:"answered,omitempty"`
	// Rounds holds an MRTR call's rounds, oldest first; Children what the
	// call set off.
	Rounds   []*Node `json:"rounds,omitempty"`
	Children []*Node `json:"children,omitempty"`
}

// SessionTree reads a session and builds its tree.
func SessionTree(ctx context.Context, store Reader, id string) (*Tree, error) {
	s, err := store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	var msgs []*Message
	for m, err := range store.Messages(ctx, id, MessageQuery{}) {
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	var xs []*Exchange
	for x, err := range store.Exchanges(ctx, id) {
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	return BuildTree(s, msgs, xs), nil
}

// CallTree returns the node of the call that message seq belongs to.
func CallTree(ctx context.Context, store Reader, seq uint64) (*Node, error) {
	m, err := store.Message(ctx, seq)
	if err != nil {
		return nil, err
	}
	t, err := SessionTree(ctx, store, m.SessionID)
	if err != nil {
		return nil, err
	}
	if n := t.Find(seq); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("message %d is in no call: %w", seq, ErrNotFound)
}

// Find returns the outermost node that holds message seq.
func (t *Tree) Find(seq uint64) *Node {
	find := func(ns []*Node) *Node {
		for _, n := range ns {
			if n.holds(seq) {
				return n
			}
		}
		return nil
	}
	if n := find(t.Roots); n != nil {
		return n
	}
	// A nested message: return its top-level call.
	for _, r := range t.Roots {
		found := false
		r.Walk(func(n *Node) {
			if n.holds(seq) {
				found = true
			}
		})
		if found {
			return r
		}
	}
	return nil
}

func (n *Node) holds(seq uint64) bool { return n.Request == seq || n.Response == seq }

// Walk calls f for n and everything under it, rounds before children.
func (n *Node) Walk(f func(*Node)) {
	f(n)
	for _, r := range n.Rounds {
		r.Walk(f)
	}
	for _, c := range n.Children {
		c.Walk(f)
	}
}

// BuildTree builds the tree of a session from its messages in Seq order and
// its exchanges (which say which streams the client closed; nil is fine).
func BuildTree(s *Session, msgs []*Message, exchanges []*Exchange) *Tree {
	b := &treeBuilder{t: &Tree{Session: s}, bySeq: map[uint64]*Node{}, rootOf: map[uint64]*Node{},
		msgs: make(map[uint64]*Message, len(msgs)), xs: make(map[uint64]*Exchange, len(exchanges))}
	for _, x := range exchanges {
		b.xs[x.ID] = x
	}
	for _, m := range msgs {
		b.add(m)
	}
	b.finish()
	return b.t
}

type treeBuilder struct {
	t      *Tree
	bySeq  map[uint64]*Node // request seq → its node (a call, a round, a server request)
	rootOf map[uint64]*Node // request seq of any round → the logical call
	last   time.Time
	msgs   map[uint64]*Message
	xs     map[uint64]*Exchange
	// later holds answers recorded before the request they answer (a
	// client's answer POST that overtook the stream event carrying the
	// server's request), by the request's seq.
	later map[uint64]*Message
	// shown holds the exchanges whose findings a node already shows.
	shown map[uint64]bool
}

func (b *treeBuilder) add(m *Message) {
	if m.Time.After(b.last) {
		b.last = m.Time
	}
	b.msgs[m.Seq] = m
	switch m.Kind {
	case protocol.KindFrame:
		b.t.Frames++
		if len(m.Findings) > 0 {
			// A frame is a node only when it carries a finding (an SSE
			// block cut short), so that every finding is on a node.
			b.t.Findings += len(m.Findings)
			b.t.Roots = append(b.t.Roots, &Node{Kind: NodeOther, Dir: m.Direction, Request: m.Seq, Start: m.Time,
				Status: "frame", Summary: clip(string(m.Raw), 80), Findings: m.Findings})
		}
		return
	case protocol.KindStderr:
		b.t.Stderr++
		if len(b.t.StderrLines) < maxTreeStderr {
			b.t.StderrLines = append(b.t.StderrLines, StderrLine{Seq: m.Seq, Time: m.Time, Text: clip(string(m.Raw), maxStderrText)})
		}
		return
	}
	b.t.Messages++
	b.t.Findings += len(m.Findings)
	switch m.Kind {
	case protocol.KindRequest:
		b.request(m)
		if a := b.later[m.Seq]; a != nil {
			delete(b.later, m.Seq)
			b.response(a)
		}
	case protocol.KindResult, protocol.KindError:
		if m.Links.Request > m.Seq {
			if b.later == nil {
				b.later = map[uint64]*Message{}
			}
			b.later[m.Links.Request] = m
			return
		}
		b.response(m)
	case protocol.KindNotification:
		b.notification(m)
	default:
		b.t.Roots = append(b.t.Roots, &Node{Kind: NodeOther, Dir: m.Direction, Request: m.Seq, Start: m.Time,
			Status: "invalid", Summary: clip(string(m.Raw), 80), Findings: m.Findings})
	}
}

func (b *treeBuilder) request(m *Message) {
	n := &Node{Kind: NodeCall, Method: m.Method, Name: m.Name, Dir: m.Direction, Request: m.Seq, ID: m.ID,
		Start: m.Time, Status: "pending", Findings: b.findingsOf(m)}
	// Params are read only where the tree shows them: a server request's
	// label and an MRTR retry's answers (most calls need neither, and a
	// session may hold 100k messages).
	b.bySeq[m.Seq] = n
	if m.Direction == protocol.ServerToClient {
		n.Kind = NodeServerRequest
		n.Label = requestLabel(m, paramsOf(m.Raw))
		if parent := b.bySeq[m.Links.Parent]; parent != nil {
			parent.Children = append(parent.Children, n)
			return
		}
		b.t.Roots = append(b.t.Roots, n)
		return
	}
	if prev := b.bySeq[m.Links.Previous]; prev != nil && m.Links.Previous != 0 {
		// An MRTR retry: a new round of the call the previous round began.
		root := b.rootOf[m.Links.Previous]
		if root == nil {
			root = prev
		}
		if len(root.Rounds) == 0 {
			first := *root
			first.Kind, first.Rounds, first.Children = NodeRound, nil, root.Children
			// The rounds hold the findings: each once in the tree.
			root.Children, root.Findings = nil, nil
			root.Rounds = []*Node{&first}
			b.bySeq[first.Request] = &first
			b.rootOf[first.Request] = root
		}
		n.Kind = NodeRound
		b.answerInputs(root.Rounds[len(root.Rounds)-1], paramsOf(m.Raw), m.Seq)
		root.Rounds = append(root.Rounds, n)
		b.rootOf[m.Seq] = root
		root.Note = fmt.Sprintf("%d rounds", len(root.Rounds))
		root.Status = "pending"
		return
	}
	if task := b.bySeq[m.Links.Task]; task != nil && m.Links.Task != 0 {
		n.Note = "about the task this call created"
		task.Children = append(task.Children, n)
		return
	}
	if m.Method == protocol.MethodDiscover && b.t.Session != nil && b.t.Session.Opening == "discover+initialize" {
		n.Note = "era negotiation: the server offered no 2026-07-28 version; the client fell back to initialize"
	} else if m.Method == protocol.MethodDiscover {
		n.Note = "era negotiation"
	}
	b.t.Roots = append(b.t.Roots, n)
}

// findingsOf is a client message's findings, with those of the HTTP
// exchange that carried it (routing headers that disagree with the body)
// on the first message of that exchange, so that each finding the session
// counts is on one node.
func (b *treeBuilder) findingsOf(m *Message) []Finding {
	fs := slices.Clip(m.Findings)
	x := b.xs[m.ExchangeID]
	if m.Direction != protocol.ClientToServer || x == nil || len(x.FindingList) == 0 || b.shown[x.ID] {
		return fs
	}
	if b.shown == nil {
		b.shown = map[uint64]bool{}
	}
	b.shown[x.ID] = true
	b.t.Findings += len(x.FindingList)
	return append(fs, x.FindingList...)
}

func (b *treeBuilder) response(m *Message) {
	n := b.bySeq[m.Links.Request]
	if n == nil || m.Links.Request == 0 {
		b.t.Roots = append(b.t.Roots, &Node{Kind: NodeOther, Method: m.Method, Dir: m.Direction, Response: m.Seq, ID: m.ID,
			Start: m.Time, Status: "orphan", Findings: m.Findings})
		return
	}
	n.Response = m.Seq
	n.End = m.Time
	n.Duration = max(m.Time.Sub(n.Start), 0)
	n.Findings = append(n.Findings, m.Findings...)
	res := resultOf(m.Raw)
	cancelled := n.Status == "cancelled"
	switch {
	case m.Kind == protocol.KindError:
		n.Status = "error"
		n.Summary = errorSummary(m.Raw)
	case res.ResultType == "input_required":
		n.Status = "input_required"
		n.Children = append(n.Children, inputNodes(m, res, n.Kind == NodeRound)...)
	case res.IsError:
		n.Status = "isError"
		n.Summary = resultSummary(n.Method, res)
	default:
		n.Status = "success"
		n.Summary = resultSummary(n.Method, res)
	}
	if cancelled {
		// The client cancelled the request before this answer came: the
		// answer is shown, but the call stays cancelled, as the client
		// ignores a late answer.
		n.Note = "answered (" + n.Status + ") after the client cancelled it"
		n.Status = "cancelled"
	}
	if n.Kind == NodeRound {
		if root := b.rootOf[n.Request]; root != nil {
			root.Response, root.End, root.Duration = m.Seq, m.Time, m.Time.Sub(root.Start)
			root.Status, root.Summary = n.Status, n.Summary
		}
	}
}

func (b *treeBuilder) notification(m *Message) {
	n := &Node{Kind: NodeNotification, Method: m.Method, Dir: m.Direction, Request: m.Seq, Start: m.Time, Findings: b.findingsOf(m)}
	params := paramsOf(m.Raw)
	switch m.Method {
	case protocol.MethodProgress:
		n.Summary = progressSummary(params)
	case protocol.MethodLogMessage:
		n.Summary = logSummary(params)
	}
	if p, _ := protocol.ParseParams(params); len(p.SubscriptionID) > 0 {
		n.Note = "subscription " + string(p.SubscriptionID)
	}
	target := b.bySeq[m.Links.Request]
	if target == nil {
		target = b.bySeq[m.Links.Task]
	}
	if target == nil {
		b.t.Roots = append(b.t.Roots, n)
		return
	}
	if m.Method == protocol.MethodCancelled {
		if root := b.rootOf[target.Request]; root != nil {
			root.Status = "cancelled"
		}
		target.Status = "cancelled"
	}
	if root := b.rootOf[target.Request]; root != nil && root != target && target.Kind == NodeRound {
		target.Children = append(target.Children, n)
		return
	}
	target.Children = append(target.Children, n)
}

// answerInputs fills a round's input-request nodes with the answers the
// client sent in the next round's inputResponses.
func (b *treeBuilder) answerInputs(round *Node, params json.RawMessage, retry uint64) {
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(params, &p)
	for _, c := range round.Children {
		if c.Kind != NodeInputRequest {
			continue
		}
		if ans, ok := p.InputResponses[c.Key]; ok {
			res, _ := protocol.ParseResult(ans)
			c.Status, c.Answered = "success", retry
			c.Summary = resultSummary(c.Method, resultInfo{res, ans})
		} else {
			c.Status = "pending"
		}
	}
}

func (b *treeBuilder) exchangeOf(seq uint64) *Exchange {
	if m := b.msgs[seq]; m != nil {
		return b.xs[m.ExchangeID]
	}
	return nil
}

func (b *treeBuilder) finish() {
	// A request whose stream the client closed before the answer was
	// cancelled (2026-07-28: closing the stream is cancellation) or, on a
	// legacy session, abandoned. Other unanswered requests get a finding
	// with their age at the session's last message, except listen streams,
	// which never answer by design.
	modern := b.t.Session != nil && b.t.Session.Era == protocol.EraModern
	var mark func(ns []*Node)
	mark = func(ns []*Node) {
		for _, n := range ns {
			if (n.Kind == NodeCall || n.Kind == NodeServerRequest || n.Kind == NodeRound) && n.Status == "pending" &&
				n.Response == 0 && len(n.Rounds) == 0 {
				x := b.exchangeOf(n.Request)
				switch {
				case n.Dir == protocol.ClientToServer && x != nil && x.Aborted && modern:
					n.Status = "cancelled"
					n.Note = "the client closed the stream before the response (cancellation on 2026-07-28)"
				case n.Dir == protocol.ClientToServer && x != nil && x.Aborted:
					n.Status = "aborted"
					n.Note = "the exchange ended before the response: " + x.Error
				case n.Method == protocol.MethodSubscriptionsListen:
					if x != nil && !x.End.IsZero() {
						n.Status = "closed"
					} else {
						n.Status = "open"
					}
				default:
					n.Findings = append(n.Findings, Finding{FindingUnanswered,
						fmt.Sprintf("no response %s after the request", b.last.Sub(n.Start).Round(time.Millisecond))})
					b.t.Unanswered++
				}
				if root := b.rootOf[n.Request]; root != nil && root != n {
					root.Status, root.Note = n.Status, n.Note
				}
			}
			mark(n.Rounds)
			mark(n.Children)
		}
	}
	mark(b.t.Roots)
	left := make([]*Message, 0, len(b.later))
	for _, m := range b.later {
		left = append(left, m)
	}
	sort.Slice(left, func(i, j int) bool { return left[i].Seq < left[j].Seq })
	for _, m := range left {
		// An answer linked to a request this session does not hold:
		// response makes it an orphan root.
		b.response(m)
	}
	sort.SliceStable(b.t.Roots, func(i, j int) bool { return b.t.Roots[i].Start.Before(b.t.Roots[j].Start) })
}

type resultInfo struct {
	protocol.Result
	raw json.RawMessage
}

func resultOf(raw []byte) resultInfo {
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(raw, &env)
	r, _ := protocol.ParseResult(env.Result)
	return resultInfo{r, env.Result}
}

func paramsOf(raw []byte) json.RawMessage {
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Params
}

// inputNodes are the requests of an input_required result; later is set
// for rounds after the first, whose sampling requests continue a loop.
func inputNodes(m *Message, res resultInfo, later bool) []*Node {
	var reqs map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(res.InputRequests, &reqs)
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*Node
	for _, k := range keys {
		r := reqs[k]
		n := &Node{Kind: NodeInputRequest, Method: r.Method, Key: k, Dir: protocol.ServerToClient, Start: m.Time, Status: "pending", In: m.Seq}
		p, _ := protocol.ParseParams(r.Params)
		n.Label = labelFor(r.Method, &p, later)
		out = append(out, n)
	}
	return out
}

func requestLabel(m *Message, params json.RawMessage) string {
	p, _ := protocol.ParseParams(params)
	return labelFor(m.Method, &p, m.Links.Previous != 0)
}

func labelFor(method string, p *protocol.Params, continuation bool) string {
	switch method {
	case protocol.MethodSampling:
		switch {
		case continuation:
			return "continuation"
		case p.Tools:
			return "with tools"
		}
	case protocol.MethodElicitation:
		if p.Mode == "url" {
			return "url"
		}
		return "form"
	}
	return ""
}

// resultSummary is a one-line digest of a result, for the tree.
func resultSummary(method string, res resultInfo) string {
	switch method {
	case protocol.MethodSampling:
		if res.StopReason == "toolUse" {
			return "toolUse - " + strings.Join(toolUses(res.Content), ", ")
		}
		return quote(firstText(res.Content))
	case protocol.MethodElicitation:
		var e struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(res.raw, &e)
		if len(e.Content) > 0 && string(e.Content) != "null" {
			return res.Action + " " + clip(string(e.Content), 60)
		}
		return res.Action
	case protocol.MethodRootsList:
		var r struct {
			Roots []struct{ URI string } `json:"roots"`
		}
		_ = json.Unmarshal(res.raw, &r)
		uris := make([]string, len(r.Roots))
		for i, x := range r.Roots {
			uris[i] = x.URI
		}
		return strings.Join(uris, ", ")
	case protocol.MethodInitialize:
		return "protocol " + res.ProtocolVersion + ", server " + res.ServerInfo.String()
	case protocol.MethodDiscover:
		return "supported " + strings.Join(res.SupportedVersions, ", ")
	}
	if t := firstText(res.Content); t != "" {
		return quote(t)
	}
	return ""
}

func toolUses(content json.RawMessage) []string {
	var blocks []struct {
		Type  string          `json:"type"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		if b.Type != "tool_use" {
			continue
		}
		var in map[string]any
		_ = json.Unmarshal(b.Input, &in)
		keys := make([]string, 0, len(in))
		for k := range in {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		args := make([]string, len(keys))
		for i, k := range keys {
			args[i] = fmt.Sprint(in[k])
		}
		out = append(out, b.Name+"("+strings.Join(args, ", ")+")")
	}
	return out
}

// firstText is the text of the first text block of a content member, which
// is one block (sampling) or a list of blocks (tools).
func firstText(content json.RawMessage) string {
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	var one block
	if json.Unmarshal(content, &one) == nil && one.Type == "text" {
		return one.Text
	}
	var many []block
	if json.Unmarshal(content, &many) == nil {
		for _, b := range many {
			if b.Type == "text" {
				return b.Text
			}
		}
	}
	return ""
}

func errorSummary(raw []byte) string {
	m := protocol.Decode(raw)
	if e, ok := m.ErrorInfo(); ok {
		return fmt.Sprintf("error %d: %s", e.Code, clip(e.Message, 80))
	}
	return "error"
}

func progressSummary(params json.RawMessage) string {
	var p struct {
		Progress float64  `json:"progress"`
		Total    *float64 `json:"total"`
		Message  string   `json:"message"`
	}
	_ = json.Unmarshal(params, &p)
	s := fmt.Sprint(p.Progress)
	if p.Total != nil {
		s += "/" + fmt.Sprint(*p.Total)
	}
	if p.Message != "" {
		s += " " + quote(p.Message)
	}
	return s
}

func logSummary(params json.RawMessage) string {
	var p struct {
		Level string          `json:"level"`
		Data  json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Level + " " + clip(string(p.Data), 60)
}

func quote(s string) string {
	if s == "" {
		return ""
	}
	return `"` + clip(strings.Join(strings.Fields(s), " "), 70) + `"`
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
