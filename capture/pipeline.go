package capture

import (
	"context"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// pipeline is the recorder's loop: it runs the events the proxy reports,
// each on the exchange it belongs to ([exchange], which decodes it), and
// hands the writer what they produced ([batcher]) in batches. The grouper
// files exchanges into sessions, whose own state links their messages
// ([linker]). Only its goroutine touches any of them.
type pipeline struct {
	r      *Recorder
	o      *RecorderOptions
	out    *batcher
	groups *grouper
	xs     map[uint64]*exchange // in flight
	syncs  []chan struct{}      // closed once the next batch is written
}

func newPipeline(r *Recorder, seq uint64) *pipeline {
	_, editor := r.store.(Editor)
	out := newBatcher(&r.opts, seq, r.met, &r.messages, editor, r.bufs)
	out.drift = r.drift
	return &pipeline{r: r, o: &r.opts, out: out, groups: newGrouper(out), xs: map[uint64]*exchange{}}
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
	return len(p.syncs) == 0 && smallBatch(p.out.records(), p.out.batchBytes) &&
		!p.r.deep() && !p.r.closing.Load()
}

// drain handles the events already queued, up to a batch's worth. It
// reports false when the queue was closed (the pipeline has then finished
// and flushed).
func (p *pipeline) drain() bool {
	for p.out.records() < p.o.BatchSize && p.out.batchBytes < maxBatchBytes {
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

// flush hands what is pending to the writer as one batch. Sessions whose
// record was written less than sessionWriteInterval ago wait, unless force
// is set or a Sync is waiting.
func (p *pipeline) flush(force bool) { p.flushBatch(force, false) }

// flushBatch is flush; lingered marks a batch the pipeline already waited
// pipeLinger to gather, which the writer writes without lingering again.
func (p *pipeline) flushBatch(force, lingered bool) {
	for id, l := range p.r.takeLoss() {
		if st := p.groups.sessions[id]; st != nil {
			st.s.Status = StatusIncomplete
			st.s.Lost += l.n
			st.s.LossReason = l.reason
			st.urgent = true
			p.out.dirtyS[id] = st
		}
	}
	b := p.out.take(force || len(p.syncs) > 0, time.Now())
	if b == nil {
		if len(p.syncs) == 0 {
			return
		}
		b = &Batch{}
	}
	b.syncs, b.lingered, p.syncs = p.syncs, lingered, nil
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
				xs.reqEnd(ev.at)
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
		xs.noteHeld(ev.dir, ev.held)
	case evReqBody:
		xs.reqBody(ev.data)
		releaseChunk(ev.data, ev.pooled)
	case evReqEnd:
		xs.reqEnd(ev.at)
		for _, d := range xs.deferred {
			p.handle(d)
		}
		xs.deferred = nil
	case evResp:
		xs.response(ev)
	case evRespBody:
		if ev.resp != nil {
			xs.response(*ev.resp)
		}
		if !xs.respBody(ev.data, ev.at) {
			releaseChunk(ev.data, ev.pooled)
		}
	case evEnd:
		if !xs.reqDone {
			xs.reqCut = ev.aborted
			xs.reqEnd(ev.at)
			for _, d := range xs.deferred {
				p.handle(d)
			}
			xs.deferred = nil
		}
		if ev.resp != nil {
			xs.response(*ev.resp)
		}
		delete(p.xs, xs.x.ID)
		xs.end(ev)
	}
}

// begin starts decoding an exchange (evBegin).
func (p *pipeline) begin(ev event) {
	xs := newExchange(ev, p.out, p.groups)
	p.xs[ev.x] = xs
	xs.noteHeld(protocol.ClientToServer, ev.begin.Intercepted)
	if ev.begin.Body != nil {
		xs.reqBodyOwned(ev.begin.Body) // Begin's copy
		ev.begin.Body = nil            // the Tap holds beginInfo for as long as the exchange lasts
	}
}

// writeInFlight writes the exchanges that have been open for a second or
// more (long SSE streams), so readers see them before they end even when
// no message has come in them; the others are written with their messages
// and when they end.
func (p *pipeline) writeInFlight(now time.Time) {
	for id, xs := range p.xs {
		if xs.reqDone && now.Sub(xs.x.Start) >= time.Second {
			p.out.dirtyX[id] = xs
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
	for _, st := range p.groups.sessions {
		if st.s.Status == StatusOpen {
			st.s.Status = StatusClosed
			p.out.dirtyS[st.s.ID] = st
		}
	}
}

// purge forgets sessions idle for long enough that new traffic belongs to
// a new session anyway.
func (p *pipeline) purge(now time.Time) {
	for _, st := range p.groups.sessions {
		limit := p.o.IdleGap
		if st.keyed {
			limit = 24 * time.Hour
		}
		if now.Sub(st.last) < limit || p.hasExchanges(st) {
			continue
		}
		p.groups.forget(st)
	}
}

func (p *pipeline) hasExchanges(st *linker) bool {
	for _, xs := range p.xs {
		if xs.sess == st {
			return true
		}
	}
	return false
}
