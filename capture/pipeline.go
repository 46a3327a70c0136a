package capture

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcptape/mcptape/protocol"
)

// pipeline owns all recording state; only its goroutine touches it. The
// grouper files exchanges into sessions; each session's own state links its
// messages (correlate.go).
type pipeline struct {
	r   *Recorder
	o   *RecorderOptions
	red *redactor
	seq uint64

	msgs       []*Message
	batchBytes int // raw bytes in msgs
	// skeletal is set while a long stream frame is recorded from its
	// skeleton (see streamFileFrame): classified and linked, but not
	// checked against schemas, baselines or forms, whose content the
	// skeleton may have left out.
	skeletal bool
	bufs     [][]byte // buffers msgs' Raw lie in, reused once written (bigBuffers)
	syncs    []chan struct{}
	dirtyS   map[string]*sessState
	dirtyX   map[uint64]*xState
	sessions map[string]*sessState
	groups   *grouper
	xs       map[uint64]*xState
	// records ingested from another recorder, for the next batch
	foreignS []*Session
	foreignX []*Exchange
	foreignM map[*Message]struct{}
	// versions of messages to store once written (intercept_record.go)
	edits []pendingEdit
}

type pendKey struct {
	dir protocol.Direction
	id  string
}

type pending struct {
	seq    uint64
	at     time.Time // when the request crossed
	x      uint64    // the exchange whose body carried the request
	method string
	name   string
	caps   json.RawMessage // a modern request's clientCapabilities
	paged  bool            // a list request with a cursor
}

// sessState is one live session: its record and the state that links its
// messages.
type sessState struct {
	s           Session
	scope       string // keyScope of its traffic
	last        time.Time
	keyed       bool // has an Mcp-Session-Id
	deleted     bool // the client ended it with DELETE
	legacySSE   bool // the 2024-11-05 HTTP+SSE transport: answers come on the GET stream
	fp, probeFP string
	httpKey     string
	initialized bool // initialize seen
	discovered  bool // server/discover seen
	supported   []string
	pending     map[pendKey][]pending // in flight; more than one when an id is reused
	used        map[string]struct{}   // ids of the client's requests (modern sessions; see grouper.joinable)
	early       map[string]*Message   // client answers to server requests not seen yet, by id
	progress    map[string]uint64     // progress token → request seq
	rounds      map[string]uint64     // method|name|requestState → the input_required round's request seq
	stateless   map[string][]uint64   // method|name|inputRequests keys → rounds without requestState
	lastSample  map[uint64]uint64     // parent call → its latest sampling request
	elicit      map[string]uint64     // elicitationId → the URL elicitation request
	tasks       map[string]uint64     // taskId → the request that created the task
	tools       map[string]*toolInfo
	written     time.Time // when the record was last handed to the writer
	urgent      bool      // a change readers must see at once (a key bound, a loss)

	// forms are the elicitation forms waiting for their answers.
	forms map[elicitKey]*jsonschema.Resolved
}

// usedID reports whether the client already sent a request with id in this
// session.
func (st *sessState) usedID(id string) bool {
	_, ok := st.used[id]
	return id != "" && ok
}

// useID notes a client request id, up to maxPending of them.
func (st *sessState) useID(id string) {
	if id == "" || st.keyed || len(st.used) >= maxPending {
		return
	}
	if st.used == nil {
		st.used = map[string]struct{}{}
	}
	st.used[id] = struct{}{}
}

type xState struct {
	x        Exchange
	sess     *sessState
	mcp      bool // the exchange carries MCP traffic (its bodies are decoded)
	path     string
	key      string // raw Mcp-Session-Id of the request
	leg      Leg
	route    string
	upstream string
	refused  bool // the leg answered it itself (Request.Refused)
	stream   bool // a stdio stream: one exchange for the process's life
	// legacyStream is the GET stream of a 2024-11-05 HTTP+SSE session:
	// when it ends, so does the session.
	legacyStream bool
	reqBuf       []byte
	reqDone      bool
	reqOver      bool
	reqCut       bool // the exchange was aborted before its request body ended
	reqEnc       string
	deferred     []event // response events that arrived before the request was complete
	resp         bool
	respEnc      string
	respLen      int64 // the response's Content-Length, -1 when none
	respDone     bool  // the JSON body was decoded as soon as it was complete
	respBuf      []byte
	respOver     bool
	sse          *protocol.SSEParser
	reqSeq       uint64 // the exchange's first client request: parent of what its stream carries
	reqID        json.RawMessage
	reqMeth      string
	headers      http.Header
	ip           string
	// held are what became of messages not decoded yet (Tap.Intercepted)
	held []heldNote
}

func newPipeline(r *Recorder, seq uint64) *pipeline {
	p := &pipeline{
		r: r, o: &r.opts, red: newRedactor(r.opts.Redact), seq: seq,
		dirtyS: map[string]*sessState{}, dirtyX: map[uint64]*xState{},
		sessions: map[string]*sessState{}, xs: map[uint64]*xState{},
	}
	p.groups = newGrouper(p)
	return p
}

// newSession opens a session for the exchange xs.
func (p *pipeline) newSession(xs *xState, at time.Time, opening string) *sessState {
	id := p.o.NewSessionID(at)
	for p.sessions[id] != nil {
		id += "x"
	}
	up := xs.upstream
	if up == "" && xs.leg != LegStdio {
		up = p.o.Upstream
	}
	st := &sessState{
		scope: keyScope(xs),
		s: Session{
			ID: id, Upstream: up, Path: xs.path, Opening: opening, Start: at, End: at,
			Leg: xs.leg, Route: xs.route,
		},
		last:       at,
		pending:    map[pendKey][]pending{},
		early:      map[string]*Message{},
		progress:   map[string]uint64{},
		rounds:     map[string]uint64{},
		stateless:  map[string][]uint64{},
		lastSample: map[uint64]uint64{},
		elicit:     map[string]uint64{},
		tasks:      map[string]uint64{},
	}
	p.sessions[id] = st
	p.dirtyS[id] = st
	return st
}

func (p *pipeline) run() {
	defer close(p.r.batches)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	linger := time.NewTimer(pipeLinger)
	linger.Stop()
	for {
		select {
		case ev, ok := <-p.r.events:
			if !ok {
				p.finish()
				p.flush(true)
				return
			}
			p.handle(ev)
			if !p.drain() {
				return
			}
			lingered := false
			if p.mayLinger() {
				// Let this call's later events, and other calls', queue
				// without waking anyone; see pipeLinger.
				linger.Reset(pipeLinger)
				select {
				case <-linger.C:
				case <-p.r.pipeHurry:
					linger.Stop()
				}
				if !p.drain() {
					return
				}
				lingered = true
			}
			p.flushBatch(false, lingered)
		case <-tick.C:
			now := p.o.Now()
			p.writeInFlight(now)
			p.flush(true)
			p.purge(now)
			p.countActive(now)
			if p.r.bufs != nil {
				p.r.bufs.trim(time.Now())
			}
		}
	}
}

// pipeLinger is how long the pipeline, woken by an event, lets more queue
// before it handles them and hands the writer their batch. Woken for each
// event, the pipeline cost a goroutine wakeup (and a batch) per event, three
// per call; on a small machine a wakeup costs more CPU than recording a
// message. A Sync, Close, a deep event queue, a full one or the proxy
// waiting for queue bytes cut the linger short (r.pipeHurry), and a batch
// already large is handed over without lingering. The writer writes a
// lingered batch at once (see writeLinger), so a record still reaches the
// store and OnBatch within about writeLinger of the proxy reporting it.
const pipeLinger = writeLinger

// mayLinger reports whether the pipeline may wait for more events before
// handing over what it has: nothing is waiting on it, and the batch and the
// event queue are small.
func (p *pipeline) mayLinger() bool {
	return len(p.syncs) == 0 && len(p.msgs)+len(p.dirtyX) < lingerRecords &&
		p.batchBytes < maxBatchBytes/8 && !p.r.deep() && !p.r.closing.Load()
}

// drain handles the events already queued, up to a batch's worth. It
// reports false when the queue was closed (the pipeline has then finished
// and flushed).
func (p *pipeline) drain() bool {
	for len(p.msgs)+len(p.dirtyX) < p.o.BatchSize && p.batchBytes < maxBatchBytes {
		select {
		case ev, ok := <-p.r.events:
			if !ok {
				p.finish()
				p.flush(true)
				return false
			}
			p.handle(ev)
		default:
			return true
		}
	}
	return true
}

// maxBatchBytes bounds the raw bytes of one batch, so that large results
// are written (and their memory freed) one or two at a time.
const maxBatchBytes = 8 << 20

// sessionWriteInterval bounds how often a busy session's record is
// rewritten: its counts change with every message, and writing it once per
// batch would cost a store write per call.
const sessionWriteInterval = 250 * time.Millisecond

// flush hands what is pending to the writer as one batch. Sessions whose
// record was written less than sessionWriteInterval ago wait, unless force
// is set or a Sync is waiting.
func (p *pipeline) flush(force bool) { p.flushBatch(force, false) }

// flushBatch is flush; lingered marks a batch the pipeline already waited
// pipeLinger to gather, which the writer writes without lingering again.
func (p *pipeline) flushBatch(force, lingered bool) {
	for id, l := range p.r.takeLoss() {
		if st := p.sessions[id]; st != nil {
			st.s.Status = StatusIncomplete
			st.s.Lost += l.n
			st.s.LossReason = l.reason
			st.urgent = true
			p.dirtyS[id] = st
		}
	}
	if len(p.msgs) == 0 && len(p.dirtyX) == 0 && len(p.dirtyS) == 0 && len(p.syncs) == 0 && len(p.foreignS)+len(p.foreignX) == 0 && len(p.edits) == 0 {
		return
	}
	force = force || len(p.syncs) > 0
	now := time.Now()
	b := &Batch{Messages: p.msgs, syncs: p.syncs, lingered: lingered, edits: p.edits, bufs: p.bufs}
	for id, st := range p.dirtyS {
		if !force && !st.urgent && now.Sub(st.written) < sessionWriteInterval {
			continue
		}
		s := st.s
		b.Sessions = append(b.Sessions, &s)
		st.written, st.urgent = now, false
		delete(p.dirtyS, id)
	}
	for _, xs := range p.dirtyX {
		x := xs.x
		b.Exchanges = append(b.Exchanges, &x)
	}
	b.Sessions = append(b.Sessions, p.foreignS...)
	b.Exchanges = append(b.Exchanges, p.foreignX...)
	b.foreign = p.foreignM
	p.foreignS, p.foreignX, p.foreignM = nil, nil, nil
	if b.Len() == 0 && len(b.syncs) == 0 && len(b.edits) == 0 {
		return
	}
	p.msgs, p.syncs, p.batchBytes, p.edits, p.bufs = nil, nil, 0, nil, nil
	clear(p.dirtyX)
	if b.held = min(int64(b.rawBytes()), writeBudget); b.held > 0 && !p.r.wbytes.TryAcquire(b.held) {
		p.r.hurryUp() // the writer should not linger over what it holds
		_ = p.r.wbytes.Acquire(context.Background(), b.held)
	}
	p.r.batches <- b
}

func (p *pipeline) handle(ev event) {
	if ev.weight > 0 {
		p.r.qbytes.Release(ev.weight)
		p.r.met.addQueued(-ev.weight)
		ev.weight = 0
	}
	switch ev.kind {
	case evSync:
		p.syncs = append(p.syncs, ev.sync)
		if p.r.met != nil {
			p.countActive(p.o.Now()) // so that a scrape after Sync sees it
		}
		return
	case evBegin:
		p.begin(ev)
		if ev.reqEnd {
			if xs := p.xs[ev.x]; xs != nil {
				p.reqEnd(xs, ev.at)
			}
		}
		return
	case evStreamOpen:
		p.streamOpen(ev)
		return
	case evIngest:
		p.ingest(ev.ingest)
		return
	}
	xs := p.xs[ev.x]
	if xs == nil {
		releaseChunk(ev.data, ev.pooled)
		ev.block.release()
		return
	}
	if xs.stream {
		p.streamEvent(xs, ev)
		return
	}
	if !xs.reqDone && (ev.kind == evResp || ev.kind == evRespBody || ev.resp != nil && ev.kind != evEnd ||
		ev.kind == evIntercept && ev.dir == protocol.ServerToClient) {
		// Keep response events until the request is decoded, so that the
		// request's messages come first and the session is known.
		if !ev.pooled {
			xs.deferred = append(xs.deferred, ev)
		} else {
			c := ev
			c.data = append([]byte(nil), ev.data...)
			c.pooled = false
			releaseChunk(ev.data, true)
			xs.deferred = append(xs.deferred, c)
		}
		return
	}
	switch ev.kind {
	case evIntercept:
		p.noteHeld(xs, ev.dir, ev.held)
	case evReqBody:
		p.reqBody(xs, ev.data)
		releaseChunk(ev.data, ev.pooled)
	case evReqEnd:
		p.reqEnd(xs, ev.at)
		for _, d := range xs.deferred {
			p.handle(d)
		}
		xs.deferred = nil
	case evResp:
		p.response(xs, ev)
	case evRespBody:
		if ev.resp != nil {
			p.response(xs, *ev.resp)
		}
		if !p.respBody(xs, ev.data, ev.at) {
			releaseChunk(ev.data, ev.pooled)
		}
	case evEnd:
		if !xs.reqDone {
			xs.reqCut = ev.aborted
			p.reqEnd(xs, ev.at)
			for _, d := range xs.deferred {
				p.handle(d)
			}
			xs.deferred = nil
		}
		if ev.resp != nil {
			p.response(xs, *ev.resp)
		}
		p.end(xs, ev)
	}
}

func (p *pipeline) begin(ev event) {
	b := ev.begin
	xs := &xState{path: b.path, headers: b.Header, leg: b.Leg, route: b.Route, upstream: b.Upstream, refused: b.Refused}
	xs.x = Exchange{
		ID: ev.x, Method: b.Method, Start: ev.at,
		RequestHeader: p.red.header(b.Header),
	}
	xs.x.RequestHeader, _ = p.capHeader(&xs.x, xs.x.RequestHeader, "request") // limits.go
	xs.x.URL = p.redactURL(b.Target)
	xs.key = b.Header.Get(protocol.HeaderSessionID)
	if xs.key == "" {
		xs.key = legacyKey(b.query)
	}
	xs.reqEnc = strings.ToLower(b.Header.Get("Content-Encoding"))
	xs.x.RequestBody = bodyKind(b.Header.Get("Content-Type"), 0)
	p.xs[ev.x] = xs
	p.noteHeld(xs, protocol.ClientToServer, b.Intercepted)
	if b.Body != nil {
		p.reqBody(xs, b.Body)
	}
	xs.ip = remoteIP(b.Remote)
}

// legacyKey is the key of a 2024-11-05 HTTP+SSE session named in a
// request's query (the message endpoint's sessionId, as the endpoint event
// gave it), "" when there is none.
func legacyKey(query string) string {
	if query == "" || !strings.Contains(query, "ession") {
		return ""
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return ""
	}
	for _, k := range []string{"sessionId", "session_id"} {
		if v := q.Get(k); v != "" {
			return "sse:" + v
		}
	}
	return ""
}

// legacyEndpoint handles the endpoint event that opens a 2024-11-05
// HTTP+SSE session on its GET stream: the message URL it names carries the
// session's id, by which the client's POSTs join this session.
func (p *pipeline) legacyEndpoint(xs *xState, data []byte) {
	u, err := url.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		return
	}
	key := legacyKey(u.RawQuery)
	st := xs.sess
	if key == "" || st == nil {
		return
	}
	if p.groups.bindKey(key, st) {
		xs.legacyStream = true
		st.legacySSE = true
		st.s.Opening = "sse"
		st.s.Era = protocol.EraLegacy
		st.urgent = true
	}
}

func remoteIP(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

func (p *pipeline) redactURL(raw string) string {
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		return raw
	}
	return p.red.url(u)
}

func (p *pipeline) reqBody(xs *xState, b []byte) {
	xs.x.RequestBytes += int64(len(b))
	if xs.reqOver {
		return
	}
	if len(xs.reqBuf)+len(b) > p.o.MaxMessageSize {
		xs.reqBuf = appendUpTo(xs.reqBuf, b[:p.o.MaxMessageSize-len(xs.reqBuf)], p.o.MaxMessageSize)
		xs.reqOver = true
		return
	}
	xs.reqBuf = appendUpTo(xs.reqBuf, b, p.o.MaxMessageSize)
}

// reqEnd decodes the request body, finds the exchange's session and records
// the client's messages.
func (p *pipeline) reqEnd(xs *xState, at time.Time) {
	xs.reqDone = true
	body, encProblem := decodeBody(xs.reqBuf, xs.reqEnc)
	var msgs []protocol.Message
	if len(body) > 0 && encProblem == "" {
		msgs = protocol.Split(body)
	}
	rpc := false
	for i := range msgs {
		if msgs[i].Kind != protocol.KindInvalid {
			rpc = true
		}
	}
	xs.mcp = !xs.refused && (rpc || xs.key != "" || strings.Contains(xs.headers.Get("Accept"), protocol.ContentTypeSSE) ||
		xs.x.RequestBody == BodyJSON && xs.x.Method == http.MethodPost && !plainJSON(body))
	st := p.groups.sessionFor(xs, msgs, at)
	xs.sess = st
	xs.x.SessionID = st.s.ID
	st.s.Exchanges++
	st.s.Findings += len(xs.x.FindingList) // capHeader's, from before the session was known
	p.touch(st, at)
	if xs.x.Method == http.MethodDelete && xs.key != "" && !xs.refused {
		st.s.Status = closedUnlessIncomplete(st.s.Status)
		st.deleted = true
	}
	if v := xs.headers.Get(protocol.HeaderProtocolVersion); v != "" && st.s.Version == "" {
		st.s.Version = v
		if st.s.Era == protocol.EraUnknown {
			st.s.Era = protocol.EraOf(v)
		}
	}
	if !xs.mcp {
		p.plainBody(xs, protocol.ClientToServer, xs.reqBuf, xs.reqOver, xs.x.RequestBytes, xs.headers.Get("Content-Type"), xs.reqEnc, at)
		xs.reqBuf = nil
		return
	}
	if encProblem != "" {
		p.add(xs, p.invalidMsg(xs, protocol.ClientToServer, xs.reqBuf, at, FindingEncoding, encProblem), nil)
		return
	}
	if xs.reqCut {
		// The client stopped sending (or the exchange was cut) before the
		// body's end: what arrived is kept as it is, marked as cut rather
		// than taken for malformed JSON.
		xs.x.Truncated = true
		if len(xs.reqBuf) > 0 {
			p.add(xs, p.invalid(xs, protocol.ClientToServer, xs.reqBuf, true, at, FindingTruncated,
				fmt.Sprintf("the request body was cut after %d bytes (see the exchange's error)", xs.x.RequestBytes)), nil)
		}
		xs.reqBuf = nil
		return
	}
	if xs.reqOver {
		m := p.invalid(xs, protocol.ClientToServer, xs.reqBuf, true, at, FindingOversize,
			fmt.Sprintf("request body larger than %d bytes; stored cut", p.o.MaxMessageSize))
		xs.reqBuf = nil
		p.add(xs, m, nil)
		return
	}
	for i := range msgs {
		p.message(xs, protocol.ClientToServer, &msgs[i], at, nil, true) // reqBuf is not reused
	}
	p.checkHeaders(xs, msgs)
	xs.reqBuf = nil
}

func closedUnlessIncomplete(s Status) Status {
	if s == StatusIncomplete {
		return s
	}
	return StatusClosed
}

func (p *pipeline) response(xs *xState, ev event) {
	xs.resp = true
	xs.x.Status = ev.status
	xs.x.ResponseHeader = p.red.header(ev.header)
	if h, cut := p.capHeader(&xs.x, xs.x.ResponseHeader, "response"); cut {
		xs.x.ResponseHeader = h
		xs.sess.s.Findings++
	}
	xs.x.Synthesized = ev.synth
	xs.x.Rewritten = ev.rewritten
	if !ev.synth {
		xs.x.Forwarded, xs.x.UpstreamHeaders = ev.forwarded, ev.upHeaders
	}
	xs.x.ResponseBody = bodyKind(ev.header.Get("Content-Type"), ev.status)
	xs.respEnc = strings.ToLower(ev.header.Get("Content-Encoding"))
	if xs.respEnc == "identity" {
		xs.respEnc = ""
	}
	xs.respLen = -1
	if cl := ev.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			xs.respLen = n
		}
	}
	if xs.x.ResponseBody == BodySSE && xs.respEnc == "" {
		xs.sse = &protocol.SSEParser{MaxEventSize: p.o.MaxMessageSize, Release: releaseKept}
		if p.o.SpillDir != "" {
			xs.sse.Spill = p.spill
			if p.r.bufs != nil {
				xs.sse.Buffer = p.r.bufs.get
			}
		}
	}
	if xs.x.FirstByte.IsZero() {
		xs.x.FirstByte = ev.at
	}
	st := xs.sess
	if key := ev.header.Get(protocol.HeaderSessionID); key != "" && xs.key == "" && xs.mcp {
		// The response that opens a legacy session names it.
		if p.groups.bindKey(key, st) {
			st.urgent = true
		}
	}
	p.touch(st, ev.at)
}

// respBody handles bytes of a response body, which the pipeline owns; it
// reports whether it kept b (the SSE parser keeps a long line's pieces, and
// hands them back to the pool itself).
func (p *pipeline) respBody(xs *xState, b []byte, at time.Time) (kept bool) {
	if !xs.resp {
		return false
	}
	xs.x.ResponseBytes += int64(len(b))
	if !xs.mcp {
		p.bufferPlain(xs, b)
		return false
	}
	if xs.sse != nil {
		return xs.sse.FeedOwned(b, func(e *protocol.Event) { p.sseEvent(xs, e, at) })
	}
	if xs.respOver {
		return false
	}
	if len(xs.respBuf)+len(b) > p.o.MaxMessageSize {
		xs.respBuf = appendUpTo(xs.respBuf, b[:p.o.MaxMessageSize-len(xs.respBuf)], p.o.MaxMessageSize)
		xs.respOver = true
		return false
	}
	xs.respBuf = appendUpTo(xs.respBuf, b, p.o.MaxMessageSize)
	if xs.respLen >= 0 && xs.x.ResponseBytes == xs.respLen && xs.x.ResponseBody != BodyOther && xs.x.Status != http.StatusAccepted {
		// The body is complete: decode it now rather than at the
		// exchange's end, so that a reader (a Sync) after the client had
		// the whole answer finds its messages.
		p.jsonResponse(xs, at, false)
		xs.respDone, xs.respBuf = true, nil
	}
	return false
}

// appendUpTo is append that doubles a full buffer, but never past limit:
// append grows large slices by a quarter at a time (five times a 64 MiB
// body's size allocated along the way, and up to a quarter past the
// limit kept).
func appendUpTo(buf, b []byte, limit int) []byte {
	if need := len(buf) + len(b); need > cap(buf) {
		nb := make([]byte, len(buf), max(need, min(max(2*cap(buf), 512), limit)))
		copy(nb, buf)
		buf = nb
	}
	return append(buf, b...)
}

func (p *pipeline) end(xs *xState, ev event) {
	delete(p.xs, xs.x.ID)
	xs.x.End = ev.at
	if ev.errText != "" {
		xs.x.Error = ev.errText
	}
	xs.x.Aborted = ev.aborted
	st := xs.sess
	if ev.broken {
		st.s.Status = StatusIncomplete
		st.s.Lost++
		st.s.LossReason = fmt.Sprintf("the store could not keep up for %s, so part of an exchange was not recorded", p.o.Backpressure)
	}
	if xs.x.FirstByte.IsZero() && xs.resp {
		xs.x.FirstByte = ev.at
	}
	if xs.mcp && xs.resp {
		switch {
		case xs.sse != nil:
			xs.sse.Close(func(e *protocol.Event) { p.sseEvent(xs, e, ev.at) })
		case xs.x.ResponseBody == BodySSE:
			// Compressed stream: decoded now that it is complete.
			body, problem := decodeBody(xs.respBuf, xs.respEnc)
			if problem != "" {
				p.add(xs, p.invalidMsg(xs, protocol.ServerToClient, xs.respBuf, ev.at, FindingEncoding, problem), nil)
				break
			}
			parser := protocol.SSEParser{MaxEventSize: p.o.MaxMessageSize}
			emit := func(e *protocol.Event) { p.sseEvent(xs, e, ev.at) }
			parser.Feed(body, emit)
			parser.Close(emit)
		case xs.respDone:
		case len(xs.respBuf) > 0 && (xs.x.ResponseBody == BodyOther || xs.x.Status == http.StatusAccepted):
			// A plain-text or HTML answer (a 405 to a GET, a proxy's
			// refusal) is no JSON-RPC message: kept raw, as a frame.
			p.add(xs, p.rawFrame(xs, protocol.ServerToClient, xs.respBuf, ev.at), nil)
		case len(xs.respBuf) > 0:
			p.jsonResponse(xs, ev.at, ev.aborted)
		}
	} else if xs.resp {
		p.plainBody(xs, protocol.ServerToClient, xs.respBuf, xs.respOver, xs.x.ResponseBytes,
			xs.x.ResponseHeader.Get("Content-Type"), xs.respEnc, ev.at)
	}
	xs.respBuf = nil
	if xs.legacyStream {
		st.s.Status = closedUnlessIncomplete(st.s.Status)
		st.urgent = true
	}
	p.dirtyX[xs.x.ID] = xs
	p.touch(st, ev.at)
}

func (p *pipeline) jsonResponse(xs *xState, at time.Time, aborted bool) {
	body, problem := decodeBody(xs.respBuf, xs.respEnc)
	if problem != "" {
		p.add(xs, p.invalidMsg(xs, protocol.ServerToClient, xs.respBuf, at, FindingEncoding, problem), nil)
		return
	}
	if xs.respOver {
		// body is respBuf (or its decoding), dropped after: no copy.
		p.add(xs, p.invalid(xs, protocol.ServerToClient, body, true, at, FindingOversize,
			fmt.Sprintf("response body larger than %d bytes; stored cut", p.o.MaxMessageSize)), nil)
		return
	}
	if xs.x.Status >= 400 && plainJSON(body) {
		// An HTTP error's own JSON (an OAuth 401's), no JSON-RPC message.
		p.plainBody(xs, protocol.ServerToClient, body, false, int64(len(body)), xs.x.ResponseHeader.Get("Content-Type"), "", at)
		return
	}
	msgs := protocol.Split(body)
	if aborted && len(msgs) == 1 && msgs[0].Kind == protocol.KindInvalid {
		xs.x.Truncated = true
		p.add(xs, p.invalidMsg(xs, protocol.ServerToClient, body, at, FindingTruncated,
			"the response ended before its JSON body was complete"), nil)
		return
	}
	for i := range msgs {
		p.message(xs, protocol.ServerToClient, &msgs[i], at, nil, true) // respBuf is not reused
	}
}

// rawFrame records bytes that carry no message and are no fault either
// (an HTTP body of another content type), redacted.
func (p *pipeline) rawFrame(xs *xState, dir protocol.Direction, raw []byte, at time.Time) *Message {
	p.seq++
	raw, _ = p.red.body(raw)
	m := &Message{
		Seq: p.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: dir, Time: at,
		Kind: protocol.KindFrame, Batch: -1, Raw: append([]byte(nil), raw...),
	}
	m.Size = len(m.Raw)
	return m
}

func (p *pipeline) sseEvent(xs *xState, e *protocol.Event, at time.Time) {
	xs.x.Events++
	// A value, copied into each message's own: taking its address here
	// would allocate it as well as those.
	info := SSEInfo{ID: e.ID, Type: e.Type}
	if e.Unterminated {
		xs.x.Truncated = true
	}
	if e.Type == "endpoint" && xs.x.Method == http.MethodGet {
		p.legacyEndpoint(xs, e.Data)
	}
	if !e.HasData || len(e.Data) == 0 || (e.Type != "" && e.Type != "message") {
		fi := info
		m := p.frame(xs, e, at, &fi)
		if e.Unterminated {
			m.Findings = append(m.Findings, Finding{FindingTruncated, "the stream ended in the middle of this SSE block"})
		}
		if e.Oversize {
			m.Findings = append(m.Findings, Finding{FindingOversize, fmt.Sprintf("SSE block larger than %d bytes; stored cut", p.o.MaxMessageSize)})
		}
		p.add(xs, m, nil)
		return
	}
	if e.Oversize || e.Unterminated {
		kind, text := FindingOversize, fmt.Sprintf("SSE block larger than %d bytes; stored cut", p.o.MaxMessageSize)
		if e.SpillErr != nil {
			kind, text = FindingTruncated, fmt.Sprintf("the recorder lost this SSE block, which the client received whole: %v", e.SpillErr)
		}
		if e.Unterminated {
			kind, text = FindingTruncated, "the stream ended in the middle of this SSE block; a client discards it"
		}
		m := p.invalid(xs, protocol.ServerToClient, e.Raw, e.Oversize, at, kind, text)
		ii := info
		m.SSE = &ii
		p.add(xs, m, nil)
		return
	}
	msgs := protocol.Split(e.Data)
	i := e.DataStart
	contiguous := len(msgs) == 1 && msgs[0].Batch < 0 && i >= 0
	// A large message keeps the parser's bytes instead of a copy of them.
	owned := contiguous && len(e.Data) >= 64<<10
	var file protocol.SpillFile
	var back []byte
	if owned {
		e.Detach()
		file = e.TakeSpill()
		if p.r.bufs != nil {
			back = e.Buffer()
		}
	}
	for k := range msgs {
		inf := info
		switch {
		case contiguous:
			// Prefix and Suffix share one allocation (Prefix's capacity
			// ends where Suffix begins); either is nil when empty.
			j := i + len(e.Data)
			if n := i + len(e.Raw) - j; n > 0 {
				ps := make([]byte, 0, n)
				ps = append(append(ps, e.Raw[:i]...), e.Raw[j:]...)
				if i > 0 {
					inf.Prefix = ps[:i:i]
				}
				if n > i {
					inf.Suffix = ps[i:]
				}
			}
		case k == 0:
			inf.Whole = append([]byte(nil), e.Raw...)
		}
		m := p.message(xs, protocol.ServerToClient, &msgs[k], at, &inf, owned)
		if !owned {
			continue
		}
		// Raw is e.Data itself (not redacted, nor trimmed): the spill file
		// holds exactly it, and it is the only view of the buffer.
		asData := len(m.Raw) == len(e.Data) && &m.Raw[0] == &e.Data[0]
		if back != nil && asData && (m.Kind == protocol.KindResult || m.Kind == protocol.KindError) {
			// The buffer serves again once m is written. (A response: what
			// the pipeline keeps of one is copied out of it.)
			p.bufs = append(p.bufs, back)
		}
		if file != nil {
			if rf, ok := file.(RawFile); ok && asData {
				m.File = rf
			} else {
				_ = file.Close()
			}
		}
	}
}

// frame records an SSE block that carries no message.
func (p *pipeline) frame(xs *xState, e *protocol.Event, at time.Time, info *SSEInfo) *Message {
	p.seq++
	m := &Message{
		Seq: p.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: protocol.ServerToClient,
		Time: at, Kind: protocol.KindFrame, Batch: -1, Raw: e.Raw, SSE: info,
	}
	if !e.Oversize { // an oversize block is ours to keep; others are the parser's
		m.Raw = append([]byte(nil), e.Raw...)
	}
	m.Size = len(m.Raw)
	return m
}

func (p *pipeline) invalidMsg(xs *xState, dir protocol.Direction, raw []byte, at time.Time, kind FindingKind, text string) *Message {
	return p.invalid(xs, dir, raw, false, at, kind, text)
}

// invalid is invalidMsg; owned says the message may keep raw (a body buffer
// the pipeline drops, an oversize SSE block), sparing a copy of up to
// MaxMessageSize.
func (p *pipeline) invalid(xs *xState, dir protocol.Direction, raw []byte, owned bool, at time.Time, kind FindingKind, text string) *Message {
	p.seq++
	kept, redacted := p.red.body(raw) // a copy when it redacted
	if !redacted && !owned {
		kept = append([]byte(nil), raw...)
	}
	m := &Message{
		Seq: p.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: dir, Time: at,
		Kind: protocol.KindInvalid, Batch: -1, Raw: kept,
		Findings: []Finding{{kind, text}},
	}
	if redacted {
		m.Findings = append(m.Findings, Finding{FindingRedacted, "secrets seen in headers were removed from this message"})
	}
	m.Size = len(m.Raw)
	return m
}

// add appends a finished message to the batch and the session's counts,
// with what became of it if it was intercepted.
func (p *pipeline) add(xs *xState, m *Message, pm *protocol.Message) {
	var sent *Message
	if len(xs.held) > 0 {
		sent = p.attachHeld(xs, m)
	}
	p.addOne(xs, m, pm)
	if sent != nil {
		p.addOne(xs, sent, nil)
	}
}

func (p *pipeline) addOne(xs *xState, m *Message, pm *protocol.Message) {
	st := xs.sess
	p.r.met.message(m, pm)
	st.s.Messages++
	st.s.Findings += len(m.Findings)
	p.msgs = append(p.msgs, m)
	p.batchBytes += len(m.Raw)
	p.dirtyS[st.s.ID] = st
	// The exchange goes with its message, as it stands now: a reader never
	// finds a message whose exchange the store does not hold yet (an
	// export while recording would write a tape that names a missing
	// exchange), nor the exchange older than its messages.
	p.dirtyX[xs.x.ID] = xs
	p.r.messages.Add(1)
}

func (p *pipeline) touch(st *sessState, at time.Time) {
	if at.After(st.last) {
		st.last = at
	}
	if at.After(st.s.End) {
		st.s.End = at
	}
	p.dirtyS[st.s.ID] = st
}

// writeInFlight writes the exchanges that have been open for a second or
// more (long SSE streams), so readers see them before they end even when
// no message has come in them; the others are written with their messages
// and when they end.
func (p *pipeline) writeInFlight(now time.Time) {
	for id, xs := range p.xs {
		if xs.reqDone && now.Sub(xs.x.Start) >= time.Second {
			p.dirtyX[id] = xs
		}
	}
}

// finish ends every exchange still in flight (the recorder is closing) and
// closes every open session.
func (p *pipeline) finish() {
	now := p.o.Now()
	for _, xs := range p.xs {
		p.handle(event{kind: evEnd, x: xs.x.ID, at: now, errText: "recording stopped before the exchange ended", aborted: true})
	}
	for _, st := range p.sessions {
		if st.s.Status == StatusOpen {
			st.s.Status = StatusClosed
			p.dirtyS[st.s.ID] = st
		}
	}
}

// purge forgets sessions idle for long enough that new traffic belongs to
// a new session anyway.
func (p *pipeline) purge(now time.Time) {
	for id, st := range p.sessions {
		limit := p.o.IdleGap
		if st.keyed {
			limit = 24 * time.Hour
		}
		if now.Sub(st.last) < limit || p.hasExchanges(st) {
			continue
		}
		delete(p.sessions, id)
		p.groups.forget(st)
	}
}

func (p *pipeline) hasExchanges(st *sessState) bool {
	for _, xs := range p.xs {
		if xs.sess == st {
			return true
		}
	}
	return false
}

func bodyKind(contentType string, status int) BodyKind {
	if contentType == "" {
		return BodyEmpty
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return BodyOther
	}
	switch {
	case mt == protocol.ContentTypeSSE:
		return BodySSE
	case mt == protocol.ContentTypeJSON || strings.HasSuffix(mt, "+json"):
		return BodyJSON
	}
	return BodyOther
}

// decodeBody undoes a Content-Encoding; problem is non-empty when it cannot.
func decodeBody(b []byte, enc string) ([]byte, string) {
	switch enc {
	case "", "identity":
		return b, ""
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, "gzip body does not decode: " + err.Error()
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			return nil, "gzip body does not decode: " + err.Error()
		}
		return out, ""
	case "deflate":
		out, err := io.ReadAll(flate.NewReader(bytes.NewReader(b)))
		if err != nil {
			return nil, "deflate body does not decode: " + err.Error()
		}
		return out, ""
	}
	return nil, fmt.Sprintf("Content-Encoding %q is not decoded by the recorder; the raw bytes are stored", enc)
}
