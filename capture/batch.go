package capture

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// batcher builds the next store write. The exchange decoders hand it what
// they decode: it numbers each message, redacts and copies its bytes, has
// its session link it ([linker.link]), and collects the messages with the
// sessions and exchanges they changed until the pipeline takes them as a
// [Batch] for the writer. Owned by the pipeline goroutine.
type batcher struct {
	o        *RecorderOptions
	red      *redactor
	met      *recorderMetrics // nil without metrics
	messages *atomic.Int64    // the recorder's count of messages decoded
	editor   bool             // the store keeps versions of messages (Editor)
	bufs     *bigBuffers      // nil unless the store is a RawCopier
	drift    *driftCheck      // nil without baselines; for the sessions' linkers
	// skeletal is set while a long stream frame is recorded from its
	// skeleton (see streamFileFrame): its message is classified and
	// linked, but not checked against schemas, baselines or forms, whose
	// content the skeleton may have left out.
	skeletal bool
	seq      uint64
	strs     protocol.Strings   // the strings messages repeat
	split    []protocol.Message // what splitBody returned last
	// Arenas: messages, their SSE blocks' parts and their small byte
	// fields are carved from slabs, one allocation for many messages.
	// Nothing is ever written twice into a slab, so a slab a written batch
	// shared with the next one stays as it was.
	mslab []Message
	sslab []SSEInfo
	bslab []byte

	msgs       []*Message
	batchBytes int      // raw bytes in msgs
	kept       [][]byte // buffers msgs' Raw lie in, reused once written (bigBuffers)
	dirtyS     map[string]*linker
	dirtyX     map[uint64]*exchange
	// records ingested from another recorder, for the next batch
	foreignS []*Session
	foreignX []*Exchange
	foreignM map[*Message]struct{}
	// versions of messages to store once written (intercept_record.go)
	edits []pendingEdit
}

func newBatcher(o *RecorderOptions, seq uint64, met *recorderMetrics, messages *atomic.Int64, editor bool, bufs *bigBuffers) *batcher {
	return &batcher{
		o: o, red: newRedactor(o.Redact), met: met, messages: messages, editor: editor, bufs: bufs, seq: seq,
		dirtyS: map[string]*linker{}, dirtyX: map[uint64]*exchange{},
	}
}

// records is how many records the batch holds so far, sessions aside.
func (b *batcher) records() int { return len(b.msgs) + len(b.dirtyX) }

// sessionWriteInterval bounds how often a busy session's record is
// rewritten: its counts change with every message, and writing it once per
// batch would cost a store write per call.
const sessionWriteInterval = 250 * time.Millisecond

// take returns what the batcher holds as a batch and starts the next one,
// or nil when it holds nothing to write. Sessions whose record was written
// less than sessionWriteInterval ago stay for a later batch unless force
// is set or they changed urgently. The batch's syncs, lingered and held
// are the pipeline's to set.
func (b *batcher) take(force bool, now time.Time) *Batch {
	if len(b.msgs) == 0 && len(b.dirtyX) == 0 && len(b.dirtyS) == 0 && len(b.foreignS)+len(b.foreignX) == 0 && len(b.edits) == 0 {
		return nil
	}
	out := &Batch{Messages: b.msgs, edits: b.edits, bufs: b.kept}
	// The records as they stand now, copied into one slab each.
	var sessions []Session
	for id, st := range b.dirtyS {
		if !force && !st.urgent && now.Sub(st.written) < sessionWriteInterval {
			continue
		}
		if sessions == nil {
			sessions = make([]Session, 0, len(b.dirtyS))
			out.Sessions = make([]*Session, 0, len(b.dirtyS)+len(b.foreignS))
		}
		sessions = append(sessions, st.s)
		out.Sessions = append(out.Sessions, &sessions[len(sessions)-1])
		st.written, st.urgent = now, false
		delete(b.dirtyS, id)
	}
	if len(b.dirtyX) > 0 {
		exchanges := make([]Exchange, 0, len(b.dirtyX))
		out.Exchanges = make([]*Exchange, 0, len(b.dirtyX)+len(b.foreignX))
		for _, xs := range b.dirtyX {
			exchanges = append(exchanges, xs.x)
			out.Exchanges = append(out.Exchanges, &exchanges[len(exchanges)-1])
		}
	}
	out.Sessions = append(out.Sessions, b.foreignS...)
	out.Exchanges = append(out.Exchanges, b.foreignX...)
	out.foreign = b.foreignM
	b.foreignS, b.foreignX, b.foreignM = nil, nil, nil
	if out.Len() == 0 && len(out.edits) == 0 {
		return nil
	}
	b.msgs, b.batchBytes, b.edits, b.kept = nil, 0, nil, nil
	clear(b.dirtyX)
	return out
}

// Arena sizes: messages and SSE parts per slab, bytes per slab, and the
// longest field copied into a byte slab (a longer one is allocated alone,
// so that a large body never pins a slab, nor a slab a large body).
const (
	msgSlab   = 64
	byteSlab  = 16 << 10
	slabField = 2 << 10
)

// newMessage is a zero Message from the batch's arena.
func (b *batcher) newMessage() *Message {
	if len(b.mslab) == cap(b.mslab) {
		b.mslab = make([]Message, 0, msgSlab)
	}
	b.mslab = b.mslab[:len(b.mslab)+1]
	return &b.mslab[len(b.mslab)-1]
}

// newSSE is a copy of info from the batch's arena.
func (b *batcher) newSSE(info SSEInfo) *SSEInfo {
	if len(b.sslab) == cap(b.sslab) {
		b.sslab = make([]SSEInfo, 0, msgSlab)
	}
	b.sslab = append(b.sslab, info)
	return &b.sslab[len(b.sslab)-1]
}

// copyBytes is a copy of the bytes of parts, end to end, from the batch's
// arena; nil when they are empty (as append([]byte(nil), p...) is).
func (b *batcher) copyBytes(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return nil
	}
	var out []byte
	if n > slabField {
		out = make([]byte, 0, n)
	} else {
		if cap(b.bslab)-len(b.bslab) < n {
			b.bslab = make([]byte, 0, byteSlab)
		}
		out = b.bslab[len(b.bslab):len(b.bslab)]
		b.bslab = b.bslab[:len(b.bslab)+n]
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out[:n:n]
}

// splitBody splits a body or an SSE event's data into messages, into a
// slice it reuses: the caller is done with the last one.
func (b *batcher) splitBody(body []byte) []protocol.Message {
	clear(b.split) // no view into the last body outlives it
	b.split = protocol.AppendSplit(b.split[:0], body)
	return b.split
}

// message records one decoded message and links it to the others.
// owned says pm.Raw is the recorder's to keep (no copy needed).
func (b *batcher) message(xs *exchange, dir protocol.Direction, pm *protocol.Message, at time.Time, sse *SSEInfo, owned bool) *Message {
	return b.messageWith(xs, dir, pm, nil, at, sse, owned)
}

// messageWith is message with pm's params (a request's or a
// notification's) read already; nil reads them here.
func (b *batcher) messageWith(xs *exchange, dir protocol.Direction, pm *protocol.Message, params *protocol.Params, at time.Time, sse *SSEInfo, owned bool) *Message {
	st := xs.sess
	b.seq++
	raw, redacted := b.red.body(pm.Raw)
	if !owned && !redacted {
		raw = b.copyBytes(raw)
	}
	m := b.newMessage()
	*m = Message{
		Seq: b.seq, SessionID: st.s.ID, ExchangeID: xs.x.ID, Direction: dir, Time: at,
		Kind: pm.Kind, Method: pm.Method, Batch: pm.Batch, SSE: sse,
		Raw: raw,
	}
	if pm.ID != nil {
		m.ID = b.copyBytes(pm.ID)
	}
	m.Size = len(m.Raw)
	if redacted {
		m.Findings = append(m.Findings, Finding{FindingRedacted, "secrets seen in headers were removed from this message"})
	}
	if pm.Problem != "" {
		kind := FindingMalformed
		if pm.Kind == protocol.KindInvalid {
			kind = FindingInvalidFrame
		}
		m.Findings = append(m.Findings, Finding{kind, pm.Problem})
	}
	if pm.Batch >= 0 && st.s.Version != "" && !protocol.AllowsBatches(st.s.Version) {
		m.Findings = append(m.Findings, Finding{FindingBatch,
			fmt.Sprintf("a JSON-RPC batch on %s; only 2025-03-26 allows batches", st.s.Version)})
	}
	var read protocol.Params
	if params == nil && (pm.Kind == protocol.KindRequest || pm.Kind == protocol.KindNotification) {
		read, _ = b.strs.ParseParams(pm.Params)
		params = &read
	}
	if dir == protocol.ClientToServer && len(xs.held) > 0 && params != nil {
		// What the server saw is what the client is taken to have
		// declared: a capability mcptape added (--answer) is no fault of
		// a server that uses it.
		if caps := xs.sentCapabilities(); caps != nil {
			p := *params
			p.ClientCapabilities = caps
			params = &p
		}
	}
	st.skeletal = b.skeletal
	if again := st.link(xs, dir, pm, params, m); again != nil {
		b.msgs = append(b.msgs, again)
		b.dirtyS[st.s.ID] = st
	}
	b.add(xs, m, pm)
	st.keepEarly()
	return m
}

// rawFrame records bytes that carry no message and are no fault either
// (an HTTP body of another content type), redacted.
func (b *batcher) rawFrame(xs *exchange, dir protocol.Direction, raw []byte, at time.Time) *Message {
	b.seq++
	raw, _ = b.red.body(raw)
	m := b.newMessage()
	*m = Message{
		Seq: b.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: dir, Time: at,
		Kind: protocol.KindFrame, Batch: -1, Raw: b.copyBytes(raw),
	}
	m.Size = len(m.Raw)
	return m
}

// frame records an SSE block that carries no message.
func (b *batcher) frame(xs *exchange, e *protocol.Event, at time.Time, info *SSEInfo) *Message {
	b.seq++
	m := b.newMessage()
	*m = Message{
		Seq: b.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: protocol.ServerToClient,
		Time: at, Kind: protocol.KindFrame, Batch: -1, Raw: e.Raw, SSE: info,
	}
	if !e.Oversize { // an oversize block is ours to keep; others are the parser's
		m.Raw = b.copyBytes(e.Raw)
	}
	m.Size = len(m.Raw)
	return m
}

// frameOf is a frame message of raw (copied), with findings.
func (b *batcher) frameOf(xs *exchange, dir protocol.Direction, raw []byte, at time.Time, findings ...Finding) *Message {
	b.seq++
	m := b.newMessage()
	*m = Message{
		Seq: b.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: dir, Time: at,
		Kind: protocol.KindFrame, Batch: -1, Raw: b.copyBytes(raw), Findings: findings,
	}
	m.Size = len(m.Raw)
	return m
}

func (b *batcher) invalidMsg(xs *exchange, dir protocol.Direction, raw []byte, at time.Time, kind FindingKind, text string) *Message {
	return b.invalid(xs, dir, raw, false, at, kind, text)
}

// invalid is invalidMsg; owned says the message may keep raw (a body buffer
// the decoder drops, an oversize SSE block), sparing a copy of up to
// MaxMessageSize.
func (b *batcher) invalid(xs *exchange, dir protocol.Direction, raw []byte, owned bool, at time.Time, kind FindingKind, text string) *Message {
	b.seq++
	kept, redacted := b.red.body(raw) // a copy when it redacted
	if !redacted && !owned {
		kept = b.copyBytes(raw)
	}
	m := b.newMessage()
	*m = Message{
		Seq: b.seq, SessionID: xs.sess.s.ID, ExchangeID: xs.x.ID, Direction: dir, Time: at,
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
func (b *batcher) add(xs *exchange, m *Message, pm *protocol.Message) {
	var sent *Message
	if len(xs.held) > 0 {
		sent = b.attachHeld(xs, m)
	}
	b.addOne(xs, m, pm)
	if sent != nil {
		b.addOne(xs, sent, nil)
	}
}

func (b *batcher) addOne(xs *exchange, m *Message, pm *protocol.Message) {
	st := xs.sess
	b.met.message(m, pm)
	st.s.Messages++
	st.s.Findings += len(m.Findings)
	b.msgs = append(b.msgs, m)
	b.batchBytes += len(m.Raw)
	b.dirtyS[st.s.ID] = st
	// The exchange goes with its message, as it stands now: a reader never
	// finds a message whose exchange the store does not hold yet (an
	// export while recording would write a tape that names a missing
	// exchange), nor the exchange older than its messages.
	b.dirtyX[xs.x.ID] = xs
	b.messages.Add(1)
}

// touch notes traffic in st at at, which changes its record.
func (b *batcher) touch(st *linker, at time.Time) {
	st.touch(at)
	b.dirtyS[st.s.ID] = st
}
