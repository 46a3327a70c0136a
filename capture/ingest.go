package capture

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// Remap carries the numbering of one foreign source (a stdio wrap's spool)
// into a recorder's: message Seqs and exchange IDs as the source numbered
// them, to the ones they were given here. Keep one per source across
// [Recorder.Ingest] calls, so that a record written again (an upsert) or a
// link to an earlier message finds its number.
type Remap struct {
	Seq      map[uint64]uint64
	Exchange map[uint64]uint64
	// asked holds the times of the source's client requests not answered
	// yet, for the call-duration metric.
	asked map[uint64]time.Time
	leg   Leg
}

// NewRemap returns an empty Remap.
func NewRemap() *Remap {
	return &Remap{Seq: map[uint64]uint64{}, Exchange: map[uint64]uint64{}, asked: map[uint64]time.Time{}}
}

// ErrIngest is returned by Ingest when the store refused the write (the
// disk is nearly full, say): the records were not stored, nor counted lost,
// and ingesting them again (with the same Remap) stores them once.
var ErrIngest = errors.New("the store did not take the ingested records")

type ingestReq struct {
	b    *Batch
	m    *Remap
	done chan struct{}
}

// Ingest stores records another recorder produced (sessions, exchanges and
// messages, decoded, linked and redacted already) through this recorder,
// renumbering messages and exchanges into its sequence with m — links
// included — and waits until they are written. Records already numbered
// in m keep their number, so ingesting the same records twice stores them
// once. Live readers (OnBatch) see them like recorded traffic.
func (r *Recorder) Ingest(ctx context.Context, b *Batch, m *Remap) error {
	if b.Len() == 0 {
		return nil
	}
	before := r.storeErrors.Load()
	done := make(chan struct{})
	if !r.send(event{kind: evIngest, ingest: &ingestReq{b: b, m: m, done: done}}, true) {
		return ErrClosed
	}
	r.hurryUp()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.storeErrors.Load() != before {
		return ErrIngest
	}
	return nil
}

// ingest renumbers a foreign batch into the pipeline's next one.
func (p *pipeline) ingest(q *ingestReq) {
	m := q.m
	xid := func(old uint64) uint64 {
		if old == 0 {
			return 0
		}
		if n, ok := m.Exchange[old]; ok {
			return n
		}
		n := p.r.nextExchange.Add(1)
		m.Exchange[old] = n
		return n
	}
	seq := func(old uint64) uint64 {
		if old == 0 {
			return 0
		}
		if n, ok := m.Seq[old]; ok {
			return n
		}
		p.out.seq++
		m.Seq[old] = p.out.seq
		return p.out.seq
	}
	msgs := slices.Clone(q.b.Messages)
	slices.SortStableFunc(msgs, func(a, b *Message) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	for _, s := range q.b.Sessions {
		m.leg = s.Leg
	}
	for _, old := range msgs {
		p.ingestMetrics(m, old)
		nm := *old
		nm.Seq = seq(old.Seq)
		nm.ExchangeID = xid(old.ExchangeID)
		l := &nm.Links
		for _, v := range []*uint64{&l.Request, &l.Parent, &l.Previous, &l.Task} {
			if *v != 0 {
				n, ok := m.Seq[*v]
				if !ok {
					n = 0 // a link to a record the source never wrote
				}
				*v = n
			}
		}
		p.out.msgs = append(p.out.msgs, &nm)
		if p.out.foreignM == nil {
			p.out.foreignM = map[*Message]struct{}{}
		}
		p.out.foreignM[&nm] = struct{}{}
		p.out.batchBytes += len(nm.Raw)
		p.r.messages.Add(1)
		var pm *protocol.Message
		if nm.Kind == protocol.KindError {
			d := protocol.Decode(nm.Raw)
			pm = &d
		}
		p.r.met.message(&nm, pm)
	}
	for _, old := range q.b.Exchanges {
		nx := *old
		nx.ID = xid(old.ID)
		p.out.foreignX = append(p.out.foreignX, &nx)
	}
	for _, s := range q.b.Sessions {
		ns := *s
		p.out.foreignS = append(p.out.foreignS, &ns)
	}
	p.syncs = append(p.syncs, q.done)
}

// maxAsked bounds the requests a Remap remembers for the call metric.
const maxAsked = 10000

// ingestMetrics feeds the metrics a recorder derives while linking (call
// durations, tool errors), which a foreign recorder computed without them.
func (p *pipeline) ingestMetrics(m *Remap, msg *Message) {
	if p.r.met == nil {
		return
	}
	if m.asked == nil {
		m.asked = map[uint64]time.Time{}
	}
	switch {
	case msg.Direction == protocol.ClientToServer && msg.Kind == protocol.KindRequest:
		if _, seen := m.Seq[msg.Seq]; !seen && len(m.asked) < maxAsked {
			m.asked[msg.Seq] = msg.Time
		}
	case msg.Direction == protocol.ServerToClient && msg.Kind.IsResponse() && msg.Links.Request != 0:
		at, ok := m.asked[msg.Links.Request]
		if !ok {
			return
		}
		delete(m.asked, msg.Links.Request)
		p.r.met.call(msg.Method, msg.Name, m.leg, msg.Time.Sub(at))
		if msg.Kind == protocol.KindResult && msg.Method == protocol.MethodToolsCall {
			if res, _ := protocol.ParseResult(protocol.Decode(msg.Raw).Result); res.IsError {
				p.r.met.toolError(msg.Method, msg.Name)
			}
		}
	}
}
