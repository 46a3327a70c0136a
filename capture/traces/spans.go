package traces

import (
	"cmp"
	"context"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// call is a request waiting for its answer.
type call struct {
	seq     uint64
	session string
	span    trace.Span      // nil until the span starts (see builder.started)
	ctx     context.Context // carries span: children start from it
	start   time.Time
	// root is the logical call of a multi round-trip request this round
	// belongs to (nil for a call of one round): the round's span is the
	// root's child, and the root ends with the last round's answer.
	root *call
	// rounds counts the rounds of a logical call (on the root).
	rounds int
	// method and name are the request's, for a round's span.
	method, name string
	// req is the request (its latest version), until its span starts.
	req *msgInfo
	// parent is the call whose stream carried this server→client request.
	parent *call
	// waiting is set on a root whose answer asked for more input: it ends
	// when a later round is answered without asking.
	waiting bool
	// answer is its answer, held until settle (see builder.settle), and
	// events its notifications until its span starts.
	answer   *msgInfo
	answered time.Time
	events   []*msgInfo
}

// builder turns items into spans, on one goroutine: the spans of one
// session arrive in recorded order, so a request's span is open when its
// answer, its notifications and its children come.
type builder struct {
	e        *Exporter
	sessions map[string]*sessInfo
	open     map[uint64]*call            // by the request's seq
	bySess   map[string]map[uint64]*call // the open calls of each session
	// chains maps a round's request seq to its logical call, so that the
	// next round (Links.Previous) finds it; kept while the root is open.
	chains map[uint64]*call
	// answeredIn holds, by session, the calls whose answer came and
	// waits for settle.
	answeredIn map[string][]*call
	prop       propagation.TextMapPropagator
}

// settleAfter is how long an answered call waits before its span is
// made: the recorder may store its request again meanwhile with a link it
// learnt later (an MRTR retry that overtook the round it answers), and a
// span's parent cannot change once it has started.
const settleAfter = 2 * time.Second

func newBuilder(e *Exporter) *builder {
	return &builder{
		e: e, sessions: map[string]*sessInfo{}, open: map[uint64]*call{},
		bySess: map[string]map[uint64]*call{}, chains: map[uint64]*call{}, answeredIn: map[string][]*call{},
		prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
}

func (b *builder) run() {
	defer close(b.e.done)
	sweep := time.NewTicker(30 * time.Second)
	defer sweep.Stop()
	tick := time.NewTicker(settleAfter / 4)
	defer tick.Stop()
	for {
		select {
		case it, ok := <-b.e.queue:
			if !ok {
				b.settleAll(time.Time{})
				b.endAll(time.Now(), "the recorder stopped before an answer")
				return
			}
			if it.sess != nil {
				b.session(it.sess)
			} else {
				b.message(it.msg)
			}
		case now := <-tick.C:
			b.settleAll(now.Add(-settleAfter))
		case now := <-sweep.C:
			b.expire(now)
		}
	}
}

// settleAll settles each session one of whose answers came before due
// (all of them for a zero due).
func (b *builder) settleAll(due time.Time) {
	for id, calls := range b.answeredIn {
		for _, c := range calls {
			if due.IsZero() || c.answered.Before(due) {
				b.settle(id)
				break
			}
		}
	}
}

// settle makes the spans of a session's answered calls, in the order of
// their requests: a round's logical call is made before the rounds after
// it.
func (b *builder) settle(session string) {
	calls := b.answeredIn[session]
	delete(b.answeredIn, session)
	slices.SortFunc(calls, func(x, y *call) int { return cmp.Compare(x.seq, y.seq) })
	for _, c := range calls {
		if b.open[c.seq] != c || c.answer == nil {
			continue // ended meanwhile
		}
		m := c.answer
		c.answer = nil
		b.chainRound(c)
		b.finish(c, m)
	}
}

func (b *builder) session(s *sessInfo) {
	if len(b.sessions) > 4*b.e.opts.MaxOpen {
		// A bound on sessions remembered: forget those with nothing open.
		for id := range b.sessions {
			if len(b.bySess[id]) == 0 {
				delete(b.sessions, id)
			}
		}
	}
	b.sessions[s.id] = s
	if s.ended {
		b.settle(s.id)
		for _, c := range b.bySess[s.id] {
			b.unanswered(c, s.end, "the session ended before an answer")
		}
	}
}

func (b *builder) message(m *msgInfo) {
	switch m.kind {
	case protocol.KindRequest:
		b.request(m)
	case protocol.KindResult, protocol.KindError:
		if c := b.open[m.links.Request]; c != nil && c.answer == nil {
			c.answer, c.answered = m, time.Now()
			b.answeredIn[c.session] = append(b.answeredIn[c.session], c)
		}
	case protocol.KindNotification:
		if c := b.open[m.links.Request]; c != nil {
			if c.span == nil {
				c.events = append(c.events, m)
			} else {
				addEvent(c.span, m)
			}
		}
	}
}

// addEvent adds a notification to a span.
func addEvent(span trace.Span, m *msgInfo) {
	attrs := make([]attribute.KeyValue, 0, len(m.event)+1)
	attrs = append(attrs, attribute.Int64("mcptape.message.seq", int64(m.seq)))
	for k, v := range m.event {
		attrs = append(attrs, attribute.String(k, v))
	}
	span.AddEvent(m.method, trace.WithTimestamp(m.at), trace.WithAttributes(attrs...))
}

// request opens a call for m. Its span starts only when something needs
// it (its answer, a child, an event): the recorder may store a request
// again with a link it learnt later (an MRTR retry recorded before the
// round it answers), and a span's parent cannot change once it started.
func (b *builder) request(m *msgInfo) {
	if c := b.open[m.seq]; c != nil {
		if c.span == nil { // the same request, stored again with its links
			c.req = m
		}
		return
	}
	if len(b.open) >= b.e.opts.MaxOpen {
		b.evictOldest(m.at)
	}
	c := &call{seq: m.seq, session: m.session, start: m.at, method: m.method, name: m.name, req: m}
	if m.links.Parent != 0 {
		c.parent = b.open[m.links.Parent]
	}
	b.open[m.seq] = c
	if b.bySess[m.session] == nil {
		b.bySess[m.session] = map[uint64]*call{}
	}
	b.bySess[m.session][m.seq] = c
	b.e.open.Store(int64(len(b.open)))
}

// chainRound makes c a round of the logical call its previous round
// belongs to, when it is one.
func (b *builder) chainRound(c *call) {
	if prev := c.req.links.Previous; prev != 0 && b.chains[prev] != nil {
		c.root = b.chains[prev]
		b.chains[c.seq] = c.root
	}
}

// started is c with its span started: under its call (a server→client
// request), its logical call (a round), or the client's trace.
func (b *builder) started(c *call) *call {
	if c.span != nil {
		return c
	}
	m := c.req
	ctx := context.Background()
	name := spanName(m.method, m.name)
	switch {
	case c.root != nil:
		c.root.rounds++
		ctx = b.started(c.root).ctx
		name += " round " + strconv.Itoa(c.root.rounds)
	case c.parent != nil:
		ctx = b.started(c.parent).ctx
	case m.traceCtx != nil:
		ctx = b.prop.Extract(ctx, propagation.MapCarrier(m.traceCtx))
	}
	c.ctx, c.span = b.e.tracer.Start(ctx, name, trace.WithTimestamp(m.at), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(b.requestAttrs(m)...))
	for _, ev := range c.events {
		addEvent(c.span, ev)
	}
	c.events = nil
	return c
}

// finish ends c's span with its answer m, and the logical call's when this
// was its last round.
func (b *builder) finish(c *call, m *msgInfo) {
	b.started(c)
	b.forget(c)
	if c.root == nil && m.inputRequired && m.kind == protocol.KindResult {
		// The first round of a multi round-trip request: c becomes the
		// logical call, and its first round a child span of its own.
		c.rounds = 1
		c.waiting = true
		b.chains[c.seq] = c
		b.keep(c)
		_, round := b.e.tracer.Start(c.ctx, spanName(c.method, c.name)+" round 1", trace.WithTimestamp(c.start),
			trace.WithSpanKind(trace.SpanKindClient))
		setAnswer(round, m)
		round.End(trace.WithTimestamp(m.at))
		c.span.SetAttributes(attribute.Bool("mcptape.mrtr", true))
		return
	}
	setAnswer(c.span, m)
	c.span.End(trace.WithTimestamp(m.at))
	if root := c.root; root != nil && !(m.inputRequired && m.kind == protocol.KindResult) {
		// The last round: the logical call ends with it.
		root.span.SetAttributes(attribute.Int("mcptape.mrtr.rounds", root.rounds))
		setAnswer(root.span, m)
		root.span.End(trace.WithTimestamp(m.at))
		b.endChain(root)
	}
}

// setAnswer sets what an answer says on span.
func setAnswer(span trace.Span, m *msgInfo) {
	if m.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", m.status))
	}
	switch {
	case m.isErr:
		code := strconv.FormatInt(m.errCode, 10)
		span.SetAttributes(attribute.String("error.type", code), attribute.String("rpc.response.status_code", code))
		span.SetStatus(codes.Error, m.errMsg)
	case m.toolError:
		span.SetAttributes(attribute.String("error.type", "tool_error"))
		span.SetStatus(codes.Error, "the tool reported an error (isError)")
	}
}

func (b *builder) unanswered(c *call, at time.Time, why string) {
	b.started(c)
	b.forget(c)
	if at.Before(c.start) {
		at = c.start
	}
	span := c.span
	span.SetAttributes(attribute.String("error.type", "unanswered"))
	span.SetStatus(codes.Error, why)
	span.End(trace.WithTimestamp(at))
	if c.root != nil && c.root != c {
		b.unanswered(c.root, at, why)
	}
	if c.waiting {
		b.endChain(c)
	}
}

// forget removes c from the open calls (it is being ended).
func (b *builder) forget(c *call) {
	delete(b.open, c.seq)
	if s := b.bySess[c.session]; s != nil {
		delete(s, c.seq)
		if len(s) == 0 {
			delete(b.bySess, c.session)
		}
	}
	b.e.open.Store(int64(len(b.open)))
}

// keep puts a logical call waiting for its next round among the open
// calls, so that expiry and session ends reach it; its seq is its first
// round's, which answered already.
func (b *builder) keep(c *call) {
	b.open[c.seq] = c
	if b.bySess[c.session] == nil {
		b.bySess[c.session] = map[uint64]*call{}
	}
	b.bySess[c.session][c.seq] = c
	b.e.open.Store(int64(len(b.open)))
}

func (b *builder) endChain(root *call) {
	for seq, r := range b.chains {
		if r == root {
			delete(b.chains, seq)
		}
	}
	b.forget(root)
}

func (b *builder) expire(now time.Time) {
	limit := now.Add(-b.e.opts.OpenTimeout)
	for _, c := range b.open {
		if c.answer == nil && c.start.Before(limit) {
			b.unanswered(c, now, "no answer within "+b.e.opts.OpenTimeout.String())
		}
	}
}

func (b *builder) evictOldest(at time.Time) {
	var oldest *call
	for _, c := range b.open {
		if c.answer == nil && (oldest == nil || c.start.Before(oldest.start)) {
			oldest = c
		}
	}
	if oldest != nil {
		b.unanswered(oldest, at, "too many calls waiting for an answer")
	}
}

func (b *builder) endAll(at time.Time, why string) {
	for _, c := range b.open {
		if b.open[c.seq] == c {
			b.unanswered(c, at, why)
		}
	}
}

// spanName follows the conventions: "{mcp.method.name} {target}", the
// target a tool's or a prompt's name (low cardinality), else the method.
func spanName(method, name string) string {
	if method == "" {
		method = "request"
	}
	switch method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet:
		if name != "" {
			return method + " " + name
		}
	}
	return method
}

func (b *builder) requestAttrs(m *msgInfo) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", m.method),
		attribute.String("mcp.session.id", m.session),
		attribute.Int64("mcptape.message.seq", int64(m.seq)),
		attribute.String("mcptape.direction", m.dir.String()),
	}
	if m.id != "" {
		attrs = append(attrs, attribute.String("jsonrpc.request.id", m.id))
	}
	switch m.method {
	case protocol.MethodToolsCall:
		if m.name != "" {
			attrs = append(attrs, attribute.String("gen_ai.tool.name", m.name))
		}
		attrs = append(attrs, attribute.String("gen_ai.operation.name", "execute_tool"))
	case protocol.MethodPromptsGet:
		if m.name != "" {
			attrs = append(attrs, attribute.String("gen_ai.prompt.name", m.name))
		}
	case protocol.MethodResourcesRead, "resources/subscribe", "resources/unsubscribe":
		if m.name != "" {
			attrs = append(attrs, attribute.String("mcp.resource.uri", m.name))
		}
	}
	s := b.sessions[m.session]
	version := m.version
	if s != nil {
		if version == "" {
			version = s.version
		}
		attrs = append(attrs, attribute.String("mcptape.era", s.era.String()), attribute.String("mcptape.leg", s.leg.String()))
		if s.route != "" {
			attrs = append(attrs, attribute.String("mcptape.route", s.route))
		}
		if s.leg == capture.LegStdio {
			attrs = append(attrs, attribute.String("network.transport", "pipe"))
		} else {
			attrs = append(attrs, attribute.String("network.transport", "tcp"), attribute.String("network.protocol.name", "http"))
		}
		if s.upstream != "" {
			attrs = append(attrs, attribute.String("mcptape.upstream", s.upstream))
			if u, err := url.Parse(s.upstream); err == nil && u.Host != "" {
				host, port, err := net.SplitHostPort(u.Host)
				if err != nil {
					host = u.Hostname()
				}
				attrs = append(attrs, attribute.String("server.address", host))
				if p, err := strconv.Atoi(port); err == nil {
					attrs = append(attrs, attribute.Int("server.port", p))
				}
			}
		}
	}
	if version != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", version))
	}
	return attrs
}
