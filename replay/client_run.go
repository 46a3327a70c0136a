package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// maxClientRounds bounds the rounds of one MRTR call, as go-sdk's client
// does.
const maxClientRounds = 10

// sessionRun is the replay of one tape session against a live server.
type sessionRun struct {
	c        *Client
	hc       *http.Client
	plan     *clientPlan
	endpoint string
	result   *SessionResult

	mu      sync.Mutex
	sid     string // the live Mcp-Session-Id (legacy)
	version string // the live negotiated version (legacy)
	nextID  int64
	liveIDs map[uint64]json.RawMessage // recorded request seq → the id it was replayed with
	used    map[uint64]bool            // recorded server requests whose answers were used
	usedKey map[string]bool            // recorded MRTR input requests (round seq + key) likewise
	streams map[uint64]*liveStream     // long-lived streams by recorded request seq; the GET stream under 0
	slots   []slot                     // the transcript, in step order
}

// slot is one place in a session's transcript: a call, or a notification
// the client sent.
type slot struct {
	call  *CallResult
	entry *TranscriptEntry
}

func (r *sessionRun) run(ctx context.Context) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
steps:
	for _, st := range r.plan.steps {
		if ctx.Err() != nil {
			r.result.Err = "interrupted: " + ctx.Err().Error()
			break
		}
		switch {
		case st.x != nil && st.x.Method == http.MethodGet:
			r.startStream(sctx, nil, st.x)
		case st.x != nil:
			r.waitStreams()
			r.delete(ctx, st.x)
			r.closeStreams()
		case st.msg.Kind == protocol.KindRequest && r.plan.longLived(st.msg):
			r.startStream(sctx, st.msg, r.plan.xs[st.msg.ExchangeID])
		case st.msg.Kind == protocol.KindRequest:
			cr := r.call(ctx, st.msg)
			if cr.Err != "" && r.opening(st.msg) {
				// Nothing after a failed initialize (or a 2026-07-28
				// discover the recording saw succeed) can work: one line
				// says so, instead of every later call failing alike.
				r.result.Err = st.msg.Method + " failed, so the rest of the session was not replayed; is --target the server's MCP endpoint?"
				break steps
			}
		case st.msg.Kind == protocol.KindNotification:
			r.notify(ctx, st.msg)
		}
	}
	r.waitStreams()
	r.closeStreams()
	for _, s := range r.slots {
		if s.call != nil {
			r.result.Calls = append(r.result.Calls, s.call)
		}
	}
	r.result.slots = r.slots
}

// opening reports whether a failure of rec ends the session: initialize,
// or a discover that succeeded in the recording.
func (r *sessionRun) opening(rec *capture.Message) bool {
	switch rec.Method {
	case protocol.MethodInitialize:
		return true
	case protocol.MethodDiscover:
		resp := r.plan.response[rec.Seq]
		return resp != nil && resp.Kind == protocol.KindResult
	}
	return false
}

func (r *sessionRun) newID() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	return json.RawMessage(strconv.FormatInt(r.nextID, 10))
}

// withID is a recorded message with a fresh id, every other byte as
// recorded; rec, if set, is the recorded request it stands for.
func (r *sessionRun) withID(raw []byte, rec *capture.Message) ([]byte, json.RawMessage, error) {
	id := r.newID()
	out, ok := protocol.SetMember(raw, id, "id")
	if !ok {
		return nil, nil, errors.New("the recorded request has no id member")
	}
	if rec != nil {
		r.mu.Lock()
		r.liveIDs[rec.Seq] = id
		r.mu.Unlock()
	}
	return out, id, nil
}

// callDoc is what a call's comparison looks at (see the package doc, "Replay
// client").
type callDoc struct {
	status        int
	final         *protocol.Message
	rounds        []json.RawMessage
	requests      []*protocol.Message
	notifications []*protocol.Message
}

func (d *callDoc) add(m *protocol.Message) {
	switch m.Kind {
	case protocol.KindRequest:
		d.requests = append(d.requests, m)
	case protocol.KindNotification:
		d.notifications = append(d.notifications, m)
	}
}

// value is the document as JSON values, numbers kept as written.
func (d *callDoc) value() map[string]any {
	v := map[string]any{}
	if d.status != 0 {
		v["status"] = json.Number(strconv.Itoa(d.status))
	}
	if f := d.final; f != nil {
		if f.Kind == protocol.KindError {
			v["error"] = decodeAny(f.Error)
		} else {
			v["result"] = decodeAny(f.Result)
		}
	}
	if len(d.rounds) > 0 {
		var rs []any
		for _, r := range d.rounds {
			rs = append(rs, map[string]any{"result": decodeAny(r)})
		}
		v["rounds"] = rs
	}
	list := func(ms []*protocol.Message) []any {
		var out []any
		for _, m := range ms {
			e := map[string]any{"method": m.Method}
			if m.Params != nil {
				e["params"] = decodeAny(m.Params)
			}
			out = append(out, e)
		}
		return out
	}
	if len(d.requests) > 0 {
		v["requests"] = list(d.requests)
	}
	if len(d.notifications) > 0 {
		v["notifications"] = list(d.notifications)
	}
	return v
}

func decoded(m *capture.Message) *protocol.Message {
	if m == nil {
		return nil
	}
	d := protocol.Decode(m.Raw)
	return &d
}

// recordedDoc is the recorded side of a call of these rounds.
func (p *clientPlan) recordedDoc(rounds []*capture.Message) *callDoc {
	d := &callDoc{}
	last := rounds[len(rounds)-1]
	for i, r := range rounds {
		resp := decoded(p.response[r.Seq])
		if i < len(rounds)-1 {
			if resp != nil && resp.Result != nil {
				d.rounds = append(d.rounds, resp.Result)
			}
			continue
		}
		d.final = resp
	}
	if x := p.xs[last.ExchangeID]; x != nil {
		d.status = x.Status
	}
	for _, m := range p.streamOf(rounds) {
		if !m.Kind.IsResponse() {
			d.add(decoded(m))
		}
	}
	return d
}

func (r *sessionRun) compare(cr *CallResult, rec, live *callDoc) {
	rv, lv := rec.value(), live.value()
	cr.Recorded, _ = json.Marshal(rv)
	cr.Live, _ = json.Marshal(lv)
	if cr.Err == "" {
		cr.Diffs = diffDocs(rv, lv, r.c.ignore)
		if r.c.opts.Strict {
			cr.Diffs = append(cr.Diffs, cr.unmatchedAnswers()...)
		}
	}
}

// unmatchedAnswers are the call's answers to live server requests that no
// recorded request matched, as differences (a strict replay's).
func (c *CallResult) unmatchedAnswers() []Difference {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Difference
	for i, a := range c.Answers {
		how := ""
		switch a.From {
		case "recording":
			continue
		case "profile":
			how = "answered by the testing profile"
		case "manual":
			how = "answered by a person"
		default:
			how = "not answered"
		}
		what := a.Method
		if a.Key != "" {
			what += fmt.Sprintf(" (input request %q)", a.Key)
		}
		out = append(out, Difference{Path: fmt.Sprintf("answers[%d]", i),
			Recorded: "the recorded answer to a matching " + a.Method,
			Live:     fmt.Sprintf("no recorded request matches the live %s: %s", what, how)})
	}
	return out
}

func (r *sessionRun) addCall(cr *CallResult) {
	r.mu.Lock()
	r.slots = append(r.slots, slot{call: cr})
	r.mu.Unlock()
}

// call replays one recorded request with its MRTR rounds and compares the
// outcome with the recording.
func (r *sessionRun) call(ctx context.Context, rec *capture.Message) *CallResult {
	cr := &CallResult{Seq: rec.Seq, Method: rec.Method, Name: rec.Name}
	r.addCall(cr)
	var cancel context.CancelFunc
	if r.manualOn() {
		ctx, cr.clock, cancel = withCallClock(ctx, r.c.opts.CallTimeout)
	} else {
		ctx, cancel = context.WithTimeout(ctx, r.c.opts.CallTimeout)
	}
	defer cancel()
	start := time.Now()
	rounds := r.plan.rounds(rec)
	live := &callDoc{}
	body, id, err := r.withID(rec.Raw, rec)
	if err != nil {
		cr.fail("%v", err)
	}
	for round := 0; err == nil; round++ {
		cr.Rounds++
		recRound := rec
		if round < len(rounds) {
			recRound = rounds[round]
		}
		var resp *protocol.Message
		var status int
		resp, status, err = r.exchange(ctx, cr, body, id, r.plan.xs[recRound.ExchangeID], live, r.plan.streamOf(rounds))
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errCallTimeout) {
				err = cause
			}
			cr.fail("%v", err)
			break
		}
		res, _ := protocol.ParseResult(resp.Result)
		if resp.Kind != protocol.KindResult || res.ResultType != "input_required" {
			live.final, live.status = resp, status
			break
		}
		// An MRTR round: answer its input requests, then retry with a new
		// id, the answers, and the requestState exactly as the live server
		// sent it.
		live.rounds = append(live.rounds, resp.Result)
		if round+1 >= maxClientRounds {
			live.final, live.status = resp, status
			cr.fail("the server asked for input more than %d times", maxClientRounds)
			break
		}
		var next *capture.Message
		base := rec.Raw
		if round+1 < len(rounds) {
			next = rounds[round+1]
			base = next.Raw
		}
		answers, aerr := r.inputResponses(ctx, cr, rounds, round, resp.Result)
		if aerr != nil {
			live.final, live.status = resp, status
			cr.fail("%v", aerr)
			break
		}
		state, _, _, hasState := protocol.Member(resp.Result, "requestState")
		if body, err = retryBody(base, answers, state, hasState); err == nil {
			body, id, err = r.withID(body, next)
		}
		if err != nil {
			cr.fail("building the retry: %v", err)
		}
	}
	cr.Duration = time.Since(start)
	if rec.Method == protocol.MethodInitialize && live.final != nil {
		if res, ok := protocol.ParseResult(live.final.Result); ok && res.ProtocolVersion != "" {
			r.mu.Lock()
			r.version = res.ProtocolVersion
			r.mu.Unlock()
		}
	}
	r.compare(cr, r.plan.recordedDoc(rounds), live)
	r.c.opts.Logger.Debug("replayed", clientLogSession, r.result.ID, clientLogCall, cr.Title(), clientLogRounds, cr.Rounds,
		clientLogDiffs, len(cr.Diffs), clientLogErr, cr.Err)
	return cr
}

// exchange POSTs one request and reads its response stream until the
// response, answering the server's requests on the way (legacy) and
// collecting its notifications into live. recStream is the recorded
// stream of the call, where the recorded answers are found.
func (r *sessionRun) exchange(ctx context.Context, cr *CallResult, body []byte, id json.RawMessage, recX *capture.Exchange,
	live *callDoc, recStream []*capture.Message) (*protocol.Message, int, error) {
	m := protocol.Decode(body)
	cr.note(protocol.ClientToServer, &m)
	res, err := r.post(ctx, body, r.headers(&m, recX))
	if err != nil {
		return nil, 0, err
	}
	bg := newBackgroundAnswers(ctx)
	defer bg.stop()
	var got, idless *protocol.Message
	handle := func(sm *protocol.Message) bool {
		cr.note(protocol.ServerToClient, sm)
		switch {
		case sm.Kind.IsResponse() && protocol.IDKey(sm.ID) == protocol.IDKey(id):
			got = sm
			return true
		case sm.Kind == protocol.KindError && !sm.HasID() && idless == nil:
			idless = sm // an HTTP-level refusal, e.g. 400 with a JSON-RPC error
		case sm.Kind == protocol.KindRequest:
			live.add(sm)
			r.answerRequest(ctx, cr, sm, recStream, bg)
		case sm.Kind == protocol.KindNotification:
			live.add(sm)
		}
		return false
	}
	status, err := r.readAll(ctx, res, handle, func() bool { return got != nil })
	if err != nil {
		return nil, status, err
	}
	if got == nil {
		got = idless
	}
	if got == nil {
		return nil, status, fmt.Errorf("HTTP %d and no response to the request", status)
	}
	return got, status, nil
}

// answerRequest answers a live server→client request: with the recorded
// answer to the matching recorded request of recStream, else from the
// profile, else (the manual provider) from a person, in the background of
// bg, while the stream is read on.
func (r *sessionRun) answerRequest(ctx context.Context, cr *CallResult, sm *protocol.Message, recStream []*capture.Message, bg *backgroundAnswers) {
	if rec := r.recordedRequest(sm, recStream); rec != nil {
		a := decoded(r.plan.answer[rec.Seq])
		r.reply(ctx, cr, sm, a.Result, a.Error, "recording")
		return
	}
	if r.manual(sm.Method) {
		bg.wg.Go(func() {
			answer, rpcErr, from := r.askPerson(bg.ask, cr, sm.Method, sm.Params)
			if bg.ask.Err() != nil {
				// The stream ended: the server no longer waits.
				cr.answered(sm.Method, "", from)
				return
			}
			r.reply(ctx, cr, sm, answer, errorMember(rpcErr), from)
		})
		return
	}
	answer, err := r.profileAnswer(sm.Method, sm.Params)
	if err != nil {
		code := -32603
		if errors.Is(err, errNoAnswer) {
			code = -32601
		}
		r.reply(ctx, cr, sm, nil, rpcError(code, err), "none")
		return
	}
	r.reply(ctx, cr, sm, answer, nil, "profile")
}

// reply sends the answer to a live server→client request: its result, or
// rpcErr when set.
func (r *sessionRun) reply(ctx context.Context, cr *CallResult, sm *protocol.Message, answer, rpcErr json.RawMessage, from string) {
	cr.answered(sm.Method, "", from)
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(sm.ID)
	if rpcErr != nil {
		b.WriteString(`,"error":`)
		b.Write(rpcErr)
	} else {
		b.WriteString(`,"result":`)
		b.Write(answer)
	}
	b.WriteString("}")
	reply := protocol.Decode(b.Bytes())
	cr.note(protocol.ClientToServer, &reply)
	res, err := r.post(ctx, b.Bytes(), r.headers(&reply, nil))
	if err != nil {
		cr.fail("answering %s: %v", sm.Method, err)
		return
	}
	_, _ = r.readAll(ctx, res, func(*protocol.Message) bool { return false }, nil)
	if res.StatusCode/100 != 2 {
		cr.fail("answering %s: the server said HTTP %d", sm.Method, res.StatusCode)
	}
}

// recordedRequest is the recorded server request a live one stands for:
// the first unused one of recStream, with a recorded answer, that the
// matcher matches (the same method, the same params but for ids, `_meta`
// and the matcher's ignored paths). Nil when none does: the recording has
// no answer for this request.
func (r *sessionRun) recordedRequest(sm *protocol.Message, recStream []*capture.Message) *capture.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range recStream {
		if m.Kind != protocol.KindRequest || m.Method != sm.Method || r.used[m.Seq] || r.plan.answer[m.Seq] == nil {
			continue
		}
		if r.c.matcher.Match(sm.Method, sm.Params, paramsOf(m.Raw)) {
			r.used[m.Seq] = true
			return m
		}
	}
	return nil
}

var errNoAnswer = errors.New("no answer for this method")

// profileAnswer answers a server request the recording cannot.
func (r *sessionRun) profileAnswer(method string, params json.RawMessage) (json.RawMessage, error) {
	p := r.c.opts.Profile
	switch method {
	case protocol.MethodSampling:
		return p.AnswerSampling(params)
	case protocol.MethodElicitation:
		return p.AnswerElicitation(params)
	case protocol.MethodRootsList:
		return p.AnswerRoots(), nil
	case protocol.MethodPing:
		return json.RawMessage(`{}`), nil
	}
	return nil, fmt.Errorf("%w: %s", errNoAnswer, method)
}

type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inputResponses answers the input requests of a live input_required
// result of round: with the recorded answers (the next recorded round's
// inputResponses under the same key, else the answer to a recorded input
// request with the same method and params), else from the profile, else
// (the manual provider) from a person, all of the round's questions at
// once. An input response cannot be an error: when a person answers with
// one, or nobody answers in time, the error says so and the call stops
// there rather than ask again.
func (r *sessionRun) inputResponses(ctx context.Context, cr *CallResult, rounds []*capture.Message, round int, result json.RawMessage) (json.RawMessage, error) {
	var reqs map[string]inputRequest
	if raw, _, _, ok := protocol.Member(result, "inputRequests"); ok {
		_ = json.Unmarshal(raw, &reqs)
	}
	type recInput struct {
		round int
		key   string
		req   inputRequest
		ans   json.RawMessage
	}
	var recorded []recInput
	for i, rr := range rounds[:len(rounds)-1] {
		resp := decoded(r.plan.response[rr.Seq])
		if resp == nil {
			continue
		}
		var rreqs map[string]inputRequest
		if raw, _, _, ok := protocol.Member(resp.Result, "inputRequests"); ok {
			_ = json.Unmarshal(raw, &rreqs)
		}
		var answers map[string]json.RawMessage
		if raw, _, _, ok := protocol.Member(paramsOf(rounds[i+1].Raw), "inputResponses"); ok {
			_ = json.Unmarshal(raw, &answers)
		}
		for _, k := range slices.Sorted(maps.Keys(rreqs)) {
			if a, ok := answers[k]; ok {
				recorded = append(recorded, recInput{i, k, rreqs[k], a})
			}
		}
	}
	// The same round first, then the others: a server whose rounds shift
	// still gets the answers it was given.
	slices.SortStableFunc(recorded, func(a, b recInput) int {
		return boolInt(b.round == round) - boolInt(a.round == round)
	})
	matcher := r.c.matcher
	take := func(fits func(recInput) bool) json.RawMessage {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, ri := range recorded {
			k := strconv.FormatUint(rounds[ri.round].Seq, 10) + "/" + ri.key
			if !r.usedKey[k] && fits(ri) {
				if r.usedKey == nil {
					r.usedKey = map[string]bool{}
				}
				r.usedKey[k] = true
				return ri.ans
			}
		}
		return nil
	}
	type input struct {
		key, method string
		ans         json.RawMessage // nil: left out, and the server will say what it misses
		from        string
		err         error // what a person's error answer said
	}
	keys := slices.Sorted(maps.Keys(reqs))
	inputs := make([]input, len(keys))
	var asks sync.WaitGroup
	for i, key := range keys {
		req := reqs[key]
		in := &inputs[i]
		in.key, in.method, in.from = key, req.Method, "recording"
		matches := func(ri recInput) bool {
			return ri.req.Method == req.Method && matcher.Match(req.Method, req.Params, ri.req.Params)
		}
		in.ans = take(func(ri recInput) bool { return ri.key == key && matches(ri) })
		if in.ans == nil {
			in.ans = take(matches)
		}
		if in.ans != nil {
			continue
		}
		if r.manual(req.Method) {
			asks.Go(func() {
				var e *protocol.ErrorInfo
				in.ans, e, in.from = r.askPerson(ctx, cr, req.Method, req.Params)
				if e != nil {
					in.ans, in.err = nil, fmt.Errorf("input request %q (%s): %s", key, req.Method, e.Message)
					if in.from == "manual" {
						in.err = fmt.Errorf("a person answered input request %q (%s) with error %d: %s", key, req.Method, e.Code, e.Message)
					}
				}
			})
			continue
		}
		var err error
		in.from = "profile"
		if in.ans, err = r.profileAnswer(req.Method, req.Params); err != nil {
			in.ans, in.from = nil, "none"
		}
	}
	asks.Wait()
	var errs []error
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, in := range inputs {
		key, ans := in.key, in.ans
		cr.answered(in.method, key, in.from)
		if in.err != nil {
			errs = append(errs, in.err)
		}
		if ans == nil {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(ans)
	}
	b.WriteByte('}')
	return b.Bytes(), errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// retryBody is the request of an MRTR retry: base (the recorded retry, or
// the first round) with the live answers and requestState. Every other
// byte, _meta included, is as recorded.
func retryBody(base []byte, answers json.RawMessage, state []byte, hasState bool) ([]byte, error) {
	params := paramsOf(base)
	if params == nil {
		params = json.RawMessage(`{}`)
	}
	var p []byte
	var err error
	if string(answers) == "{}" {
		// Nothing was asked (a load-shedding or polling round): send only
		// the requestState.
		p = withoutMember(params, "inputResponses")
	} else if p, err = setOrAddMember(params, "inputResponses", answers); err != nil {
		return nil, err
	}
	if hasState {
		p, err = setOrAddMember(p, "requestState", state)
	} else {
		p = withoutMember(p, "requestState")
	}
	if err != nil {
		return nil, err
	}
	if out, ok := protocol.SetMember(base, p, "params"); ok {
		return out, nil
	}
	return setOrAddMember(base, "params", p)
}

// notify sends a recorded notification: notifications/cancelled with the
// live id of the request it cancels, after the stream of that request (if
// long-lived) has carried what it did in the recording, and then closing
// that stream; anything else as recorded.
func (r *sessionRun) notify(ctx context.Context, rec *capture.Message) {
	body := rec.Raw
	var stream *liveStream
	if rec.Method == protocol.MethodCancelled && rec.Links.Request != 0 {
		r.mu.Lock()
		id := r.liveIDs[rec.Links.Request]
		stream = r.streams[rec.Links.Request]
		r.mu.Unlock()
		if id == nil {
			return // the cancelled request was never replayed
		}
		if stream != nil {
			stream.wait(r.c.opts.StreamWait)
		}
		if b, ok := protocol.SetMember(body, id, "params", "requestId"); ok {
			body = b
		}
	}
	m := protocol.Decode(body)
	e := TranscriptEntry{Dir: protocol.ClientToServer, Method: m.Method, Params: m.Params}
	if m.Method == protocol.MethodCancelled {
		e.Params = withoutMember(m.Params, "requestId")
	}
	r.mu.Lock()
	r.slots = append(r.slots, slot{entry: &e})
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.c.opts.CallTimeout)
	defer cancel()
	if res, err := r.post(ctx, body, r.headers(&m, r.plan.xs[rec.ExchangeID])); err == nil {
		_, _ = r.readAll(ctx, res, func(*protocol.Message) bool { return false }, nil)
	} else {
		r.result.Err = fmt.Sprintf("sending %s: %v", rec.Method, err)
	}
	if stream != nil {
		stream.close(r)
	}
}

// delete ends a legacy session as the recording did.
func (r *sessionRun) delete(ctx context.Context, x *capture.Exchange) {
	cr := &CallResult{Method: http.MethodDelete}
	r.addCall(cr)
	r.mu.Lock()
	sid := r.sid
	r.mu.Unlock()
	if sid == "" {
		cr.fail("no live session to DELETE (the server issued no Mcp-Session-Id)")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.c.opts.CallTimeout)
	defer cancel()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.endpoint, nil)
	if err != nil {
		cr.fail("%v", err)
		return
	}
	r.sessionHeaders(req.Header)
	res, err := r.hc.Do(req)
	cr.Duration = time.Since(start)
	if err != nil {
		cr.fail("%v", err)
		return
	}
	res.Body.Close()
	cr.noteHTTP(http.MethodDelete, res.StatusCode)
	r.compare(cr, &callDoc{status: x.Status}, &callDoc{status: res.StatusCode})
}
