package capture

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcptape/mcptape/protocol"
)

// Recording what intercepting did. A held message (or one mcptape changed
// on its way, such as a capability --answer added) is recorded as it was
// received, indexed and linked as usual, with a finding of kind
// FindingIntercepted saying what became of it. When something else went
// on instead, that is stored as the message's next version through the
// store's versioned edits ([Editor]): version 0 is what the sender sent,
// version 1 what the receiver got, and reads show version 1. So one
// message keeps one place in its call (an edited tools/call is still that
// call, and its answer still answers it), where two messages would be two
// requests with one id. Bytes that are not JSON (a person sending
// malformed bytes on purpose) cannot be a version, since versions are
// JSON; they are recorded as a message of their own, an invalid frame
// beside the held one, which both findings name.

// Intercepted is what became of a message: the finding's text, and what
// went on instead of the received bytes (nil when they went on unchanged,
// or nothing went on).
type Intercepted struct {
	// Note is the finding's text, e.g. "held 2.1s, then edited by a
	// person and forwarded".
	Note string
	// Sent is what went on instead, as sent.
	Sent []byte
}

// Intercepted reports what became of the next message the exchange
// carries in direction dir: call it just before reporting that message's
// bytes (for the request, set Request.Intercepted instead). The recorder
// attaches it to the first message it decodes in dir after this call.
func (t *Tap) Intercepted(dir protocol.Direction, in *Intercepted) {
	if t == nil || in == nil {
		return
	}
	c := &Intercepted{Note: in.Note}
	if in.Sent != nil {
		c.Sent = append([]byte(nil), in.Sent...)
	}
	t.send(event{kind: evIntercept, dir: dir, held: c, weight: int64(len(c.Sent))})
}

// heldNote is an Intercepted waiting for the message it is about.
type heldNote struct {
	dir protocol.Direction
	in  *Intercepted
}

// pendingEdit is a version the writer stores once the batch holding its
// message is written.
type pendingEdit struct {
	seq  uint64
	raw  []byte
	note string
}

// noteHeld queues an Intercepted for the exchange's next message in dir.
func (xs *exchange) noteHeld(dir protocol.Direction, in *Intercepted) {
	if in != nil {
		xs.held = append(xs.held, heldNote{dir, in})
	}
}

// sentCapabilities is the client capabilities of what went on instead of
// the exchange's next client message, when mcptape changed it (nil when
// it did not, or the change left none).
func (xs *exchange) sentCapabilities() json.RawMessage {
	for _, h := range xs.held {
		if h.dir != protocol.ClientToServer {
			continue
		}
		if h.in.Sent == nil {
			return nil
		}
		pm := protocol.Decode(h.in.Sent)
		if p, ok := protocol.ParseParams(pm.Params); ok {
			return p.ClientCapabilities
		}
		return nil
	}
	return nil
}

// attachHeld gives m the exchange's pending Intercepted for its
// direction, if any; it returns the message to record beside m (bytes
// that went on instead and are no JSON), or nil.
func (b *batcher) attachHeld(xs *exchange, m *Message) *Message {
	k := -1
	for i, h := range xs.held {
		if h.dir == m.Direction {
			k = i
			break
		}
	}
	if k < 0 {
		return nil
	}
	in := xs.held[k].in
	xs.held = append(xs.held[:k], xs.held[k+1:]...)
	if in.Sent == nil {
		m.Findings = append(m.Findings, Finding{FindingIntercepted, in.Note})
		return nil
	}
	sent, _ := b.red.body(in.Sent)
	if b.editor && json.Valid(sent) {
		m.Findings = append(m.Findings, Finding{FindingIntercepted, in.Note + "; what went on is version 1 of this message, what came in version 0"})
		b.edits = append(b.edits, pendingEdit{seq: m.Seq, raw: append([]byte(nil), sent...), note: in.Note})
		return nil
	}
	b.seq++
	extra := &Message{
		Seq: b.seq, SessionID: m.SessionID, ExchangeID: m.ExchangeID, Direction: m.Direction, Time: m.Time,
		Kind: protocol.KindInvalid, Batch: -1, Raw: append([]byte(nil), sent...),
		Findings: []Finding{{FindingIntercepted, fmt.Sprintf("%s: this is what went on instead of message #%d", in.Note, m.Seq)}},
	}
	if json.Valid(sent) {
		extra.Kind = protocol.KindFrame
	} else {
		extra.Findings = append(extra.Findings, Finding{FindingInvalidFrame, "not JSON: sent so on purpose"})
	}
	extra.Size = len(extra.Raw)
	m.Findings = append(m.Findings, Finding{FindingIntercepted, fmt.Sprintf("%s; what went on is recorded as message #%d", in.Note, extra.Seq)})
	return extra
}

// applyEdits stores the versions of a batch just written.
func (r *Recorder) applyEdits(b *Batch) {
	if len(b.edits) == 0 {
		return
	}
	ed, ok := r.store.(Editor)
	if !ok {
		return
	}
	for _, e := range b.edits {
		if _, err := ed.EditMessage(context.Background(), e.seq, e.raw, e.note); err != nil {
			r.log.Warn("storing what went on instead of an intercepted message", LogKeyError, err, "seq", e.seq)
		}
	}
}
