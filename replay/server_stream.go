package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// out is where a replayed stream goes: the events of an SSE response, or
// the lines a stdio client reads.
type out interface {
	// send writes one message: data, the bytes replayed, framed like sm,
	// the recorded message it stands for (nil for one the replay server
	// makes up, such as a list_changed fault's).
	send(sm *capture.Message, data []byte) error
	// frame writes a recorded frame that carries no JSON-RPC message: an
	// SSE priming event or comment, a line that is not JSON.
	frame(sm *capture.Message) error
	// settle waits, bounded, until the client can have read what was
	// written before (at written, live), so that what comes next reaches
	// it apart (see settler).
	settle(ctx context.Context, written time.Time)
}

// orderedOut is an out that carries, on one channel, a call's stream and
// what the server sent on its own (stdio): before each message of a call,
// inOrder waits for what the recording has the server send unasked
// before it.
type orderedOut interface {
	inOrder(ctx context.Context, l *live, c *call, sm *msgRef)
}

// settler keeps a response apart from the notifications before it. A
// client reads a stream in chunks and may handle the messages of one chunk
// in one go: the TypeScript SDK settles a response at once but runs a
// notification's handler a tick later, so a progress notification read in
// the same chunk as its call's response finds its handler gone, and a
// legacy SSE client dispatches every event of a chunk together. So a
// response that follows notifications of its own call goes out only once
// the client read them: over a pipe or a Unix socket, once it is empty;
// otherwise settleGap after them.
type settler struct {
	// lastNote is when the last notification went out (zero: none since
	// the last response).
	lastNote time.Time
}

// settleGap is how long a response waits after a notification before it,
// where the replay cannot see the client read.
const settleGap = 15 * time.Millisecond

// maxSettle bounds the wait for a client to read a pipe.
const maxSettle = time.Second

// before is called before each message goes out on a stream: a response
// after a notification waits for the client (see settler).
func (st *settler) before(ctx context.Context, o out, sm *msgRef) {
	if sm.Kind.IsResponse() && !st.lastNote.IsZero() {
		o.settle(ctx, st.lastNote)
		st.lastNote = time.Time{}
	}
}

// after is called when a message went out on a stream.
func (st *settler) after(sm *msgRef) {
	if sm.Kind == protocol.KindNotification {
		st.lastNote = time.Now()
	}
}

// sleepUntil waits until at, or ctx ends.
func sleepUntil(ctx context.Context, at time.Time) {
	d := time.Until(at)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// streamEnd says how the replay of a call's stream ended.
type streamEnd uint8

const (
	// streamAnswered: the response went out.
	streamAnswered streamEnd = iota
	// streamOpen: the recording holds no response (subscriptions/listen,
	// or a request never answered); the stream stays open.
	streamOpen
	// streamGone: the client went away, or its session ended.
	streamGone
	// streamCut: a dropAfterEvents fault cut the stream.
	streamCut
)

// replayStream replays a recorded call's stream to o, paced as recorded
// from arrived (when the live request came): its notifications, its
// server→client requests (awaiting the client's answers), its response;
// then the list_changed notifications fp asks for.
func (s *Server) replayStream(ctx context.Context, o out, l *live, c *call, m *protocol.Message, p *protocol.Params, fp *faultPlan, arrived time.Time) streamEnd {
	pc := &pacer{prevRec: c.req.Time, prevLive: arrived}
	var st settler
	events := 0
	for _, sm := range c.stream {
		if !s.pace(ctx, l, c.rs, pc, sm, c.rs.triggerAfter(sm, c), nil) {
			return streamGone
		}
		if fp.drop > 0 && events >= fp.drop {
			return streamCut
		}
		if io, ok := o.(orderedOut); ok {
			io.inOrder(ctx, l, c, sm)
		}
		st.before(ctx, o, sm)
		if !s.emit(ctx, o, l, c, sm, m, p) {
			return streamGone
		}
		st.after(sm)
		events++
		l.sent(c, events)
		if sm.Kind.IsResponse() && sm.Links.Request == c.req.Seq {
			s.afterResponse(l, fp.listChanged...)
			return streamAnswered
		}
	}
	return streamOpen
}

// triggerAfter is the request a message of call c's stream waits for: the
// recorded request that last preceded it, unless that is the call itself.
// The call's response waits for no later request: nothing later causes it,
// and the recording can show the client's next request a few microseconds
// before the response it waited for (each direction is timed apart).
func (rs *recSession) triggerAfter(m *msgRef, c *call) uint64 {
	t := rs.trigger(m.Seq)
	if c != nil && (t <= c.req.Seq || m.Kind.IsResponse() && m.Links.Request == c.req.Seq) {
		return 0
	}
	return t
}

func (s *Server) responseOf(c *call) *msgRef {
	for _, sm := range c.stream {
		if sm.Kind.IsResponse() && sm.Links.Request == c.req.Seq {
			return sm
		}
	}
	return nil
}

// pacer spaces the messages of one replayed stream as the recording did:
// prevRec is the recorded time of the stream's previous event (its request,
// or the GET's start), prevLive when that event was due live.
type pacer struct {
	prevRec, prevLive time.Time
}

// pace holds stream message sm until it is due. It first waits (bounded)
// for the recorded request that set sm off, trigger (0: none), to be seen
// live; then, under TimingRecorded, sm is due its recorded gap (capped at
// MaxGap) after the later, in the recording, of the stream's previous
// event and that trigger, counted from when that one happened live. So a
// wait for the trigger is not counted twice, and lateness does not add up
// along the stream. A close of drain (the GET stream passes the session's
// DELETE) ends the waits at once. pace reports false when the stream must
// end: the client went away, or the session ended.
func (s *Server) pace(ctx context.Context, l *live, rs *recSession, pc *pacer, sm *msgRef, trigger uint64, drain <-chan struct{}) bool {
	l.waitTrigger(ctx, trigger, s.opts.MaxGap+s.opts.AnswerTimeout, drain)
	select {
	case <-l.done:
		return false
	default:
	}
	ref, refLive := pc.prevRec, pc.prevLive
	if tm := rs.msg(trigger); tm != nil && tm.Time.After(ref) {
		if at, ok := l.seenAt(trigger); ok {
			ref, refLive = tm.Time, at
		}
	}
	due := refLive.Add(min(max(sm.Time.Sub(ref), 0), s.opts.MaxGap))
	pc.prevRec, pc.prevLive = sm.Time, due
	d := time.Until(due)
	if s.opts.Timing == TimingFast || d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-drain:
		return true
	case <-ctx.Done():
		return false
	case <-l.done:
		return false
	}
}

// emit writes one recorded stream message of call c to o, rewritten for
// the live request: the response gets the live id, progress the live
// token, a subscription notification the live listen id; a server→client
// request keeps its recorded id, and the server waits for the client's
// answer.
func (s *Server) emit(ctx context.Context, o out, l *live, c *call, ref *msgRef, m *protocol.Message, p *protocol.Params) bool {
	sm := c.rs.message(ref)
	if sm == nil {
		return false
	}
	switch sm.Kind {
	case protocol.KindFrame, protocol.KindInvalid:
		return o.frame(sm) == nil
	case protocol.KindStderr:
		// A stdio server's log line: it went to its stderr, never to the
		// client. The replay's log carries it.
		s.log.Info("the recorded server's stderr", "line", string(sm.Raw))
		return true
	}
	data := sm.Raw
	var ask string
	switch {
	case sm.Kind.IsResponse() && c.req != nil && sm.Links.Request == c.req.Seq:
		data = responseWithID(data, m.ID)
	case sm.Kind == protocol.KindRequest:
		ask = protocol.IDKey(sm.ID)
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
		l.asked[ask] = sm.Seq
		l.mu.Unlock()
	}
	if err := o.send(sm, data); err != nil {
		return false
	}
	if ch == nil {
		return true
	}
	return s.awaitAnswer(ctx, l, c.rs, sm, ask, ch)
}

func (s *Server) awaitAnswer(ctx context.Context, l *live, rs *recSession, sm *capture.Message, id string, ch chan *protocol.Message) bool {
	t := time.NewTimer(s.opts.AnswerTimeout)
	defer t.Stop()
	select {
	case ans := <-ch:
		if rec := rs.message(rs.answers[sm.Seq]); rec != nil {
			if d := s.matcher.answerDiff(sm.Method, ans.Raw, rec.Raw); len(d) > 0 {
				s.fail(true, "the client's answer to %s differs from the recording: %s", sm.Method, strings.Join(d, "; "))
			}
		}
		return true
	case <-t.C:
		s.fail(false, "the client did not answer the replayed %s (id %s) within %s", sm.Method, id, s.opts.AnswerTimeout)
		return true
	case <-l.noInput:
		s.fail(false, "the client closed its input without answering the replayed %s (id %s)", sm.Method, id)
		return false
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
	rp, _ := protocol.ParseParams(c.params())
	if d := s.matcher.inputResponsesDiff(m.Method, p.InputResponses, rp.InputResponses); len(d) > 0 {
		s.fail(true, "the inputResponses of %s %s differ from the recording: %s", m.Method, p.Name, strings.Join(d, "; "))
	}
}

// frame is the SSE block for a replayed message: the recorded bytes around
// it, or a plain message event (always, for sm nil: a message the replay
// server makes up).
func frame(sm *capture.Message, data []byte) []byte {
	if sm != nil && sm.SSE != nil && (len(sm.SSE.Prefix) > 0 || len(sm.SSE.Suffix) > 0) {
		out := make([]byte, 0, len(sm.SSE.Prefix)+len(data)+len(sm.SSE.Suffix))
		out = append(out, sm.SSE.Prefix...)
		out = append(out, data...)
		return append(out, sm.SSE.Suffix...)
	}
	var b bytes.Buffer
	b.WriteString("event: message\n")
	if sm != nil && sm.SSE != nil && sm.SSE.ID != "" {
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
