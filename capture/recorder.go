package capture

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// RecorderOptions configures a Recorder. Nil means defaults; every field's
// zero value is documented.
type RecorderOptions struct {
	// Logger receives the recorder's own events (store failures, loss).
	// Nil discards them.
	Logger *slog.Logger
	// Upstream is the upstream's base URL, stored on sessions. "" leaves
	// it empty.
	Upstream string
	// Redact configures write-time redaction; the zero value redacts the
	// default set.
	Redact RedactOptions
	// QueueSize bounds the events waiting between the proxy and the
	// pipeline. Zero means 4096.
	QueueSize int
	// QueueBytes bounds the body bytes waiting between the proxy and the
	// pipeline, and so the memory a burst of large results can take.
	// Zero means 8 MiB.
	QueueBytes int64
	// Backpressure is how long the proxy waits for room in a full queue
	// before it gives up on recording that event (counted as lost and
	// marked on the session). Zero means 5s.
	Backpressure time.Duration
	// IdleGap ends a modern (session-less) session: a request from the
	// same client fingerprint after this much silence starts a new one.
	// Zero means 5 minutes.
	IdleGap time.Duration
	// MaxMessageSize bounds one stored message; a larger one is cut and
	// marked oversize. Zero means 64 MiB.
	MaxMessageSize int
	// BatchSize bounds the records in one store write. Zero means 2048.
	BatchSize int
	// SpillDir, when set, is a directory where the recorder keeps an SSE
	// event's line in progress once it passes 2 MiB, instead of memory
	// (see protocol.SSEParser.Spill). A file that holds exactly a stored
	// message goes to the store with it (Message.File), which may move it
	// into place; the others are removed as their line ends, and files a
	// killed recorder left behind when the next recorder starts. "" keeps
	// every event in memory.
	SpillDir string
	// Now and NewSessionID make output deterministic in tests. Nil means
	// time.Now and a time-ordered id with random bits.
	Now          func() time.Time
	NewSessionID func(t time.Time) string
	// OnBatch, if set, is called after each successful store write with
	// the batch (tests and live tail). It must not retain or modify it.
	// The writer gathers what comes within tens of milliseconds into one
	// write, so a record reaches the store and OnBatch up to about 80 ms
	// after the proxy reported it (at once after a Sync).
	OnBatch func(*Batch)
	// Baselines, if set, gives the trusted tools/list of each upstream
	// (see BaselineFile): a complete tools/list that differs from its
	// upstream's gets drift findings. Nil checks nothing.
	Baselines BaselineSource
	// Registerer receives the recorder's Prometheus metrics (see the
	// package documentation). Nil means no metrics, at no cost. One
	// recorder per Registerer.
	Registerer prometheus.Registerer
}

// Stats are the recorder's counters, safe to read at any time.
type Stats struct {
	// Messages is the messages decoded; Stored those the store accepted;
	// Lost those that were not stored (store failure or backpressure
	// timeout). Messages == Stored + Lost once the pipeline is idle.
	Messages, Stored, Lost int64
	// Exchanges seen, and exchanges in flight.
	Exchanges, InFlight int64
	// QueueDepth is the events waiting for the pipeline now.
	QueueDepth int
	// Dropped is the proxy events that timed out on a full queue.
	Dropped int64
	// StoreErrors counts failed store writes; LastError is the latest.
	StoreErrors int64
	LastError   string
}

// Recorder turns proxied traffic into sessions, exchanges and messages in a
// Store. The proxy reports each HTTP exchange through a [Tap]; a pipeline
// goroutine decodes, correlates and redacts, and a writer goroutine writes
// batches. Create it with NewRecorder and stop it with Close.
type Recorder struct {
	store Writer
	opts  RecorderOptions
	log   *slog.Logger

	events chan event
	qbytes *semaphore.Weighted
	// wbytes bounds the raw bytes of batches handed to the writer and not
	// yet written (see writeBudget)
	wbytes  *semaphore.Weighted
	qlimit  int64
	batches chan *Batch
	hurry   chan struct{} // ends the writer's linger early (see writeLinger)
	// pipeHurry ends the pipeline's linger early (see pipeLinger)
	pipeHurry chan struct{}
	done      chan struct{} // closed when both goroutines have ended
	closing   atomic.Bool
	closeMu   sync.RWMutex // held for reading while sending to events

	nextExchange atomic.Uint64

	messages, stored, lost atomic.Int64
	exchanges, inflight    atomic.Int64
	dropped, storeErrors   atomic.Int64
	lastErr                atomic.Pointer[string]
	failing                atomic.Bool
	lossMu                 sync.Mutex
	lossBySession          map[string]lossNote
	pipe                   *pipeline
	met                    *recorderMetrics // nil without a Registerer
	bufs                   *bigBuffers      // nil unless the store is a RawCopier
	headers                headerCache      // response headers the Taps cloned
	drift                  *driftCheck      // nil without Baselines
}

type lossNote struct {
	n      int
	reason string
}

// NewRecorder starts a recorder writing to store. It continues the store's
// sequence numbers.
func NewRecorder(ctx context.Context, store Writer, opts *RecorderOptions) (*Recorder, error) {
	r := &Recorder{store: store, lossBySession: map[string]lossNote{}}
	if _, ok := store.(RawCopier); ok {
		r.bufs = &bigBuffers{}
	}
	if opts != nil {
		r.opts = *opts
	}
	o := &r.opts
	if o.QueueSize <= 0 {
		o.QueueSize = 4096
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 8 << 20
	}
	if o.Backpressure <= 0 {
		o.Backpressure = 5 * time.Second
	}
	if o.IdleGap <= 0 {
		o.IdleGap = 5 * time.Minute
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = 64 << 20
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 2048
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewSessionID == nil {
		o.NewSessionID = newSessionID
	}
	r.drift = newDriftCheck(o.Baselines)
	r.log = o.Logger
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if o.SpillDir != "" {
		if err := prepareSpillDir(o.SpillDir); err != nil {
			r.log.Warn("large SSE events will be held in memory: the spill directory cannot be used", LogKeyError, err)
			o.SpillDir = ""
		}
	}
	seq, xid, err := store.LastIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the store's last ids: %w", err)
	}
	r.nextExchange.Store(xid)
	r.events = make(chan event, o.QueueSize)
	r.qbytes, r.qlimit = semaphore.NewWeighted(o.QueueBytes), o.QueueBytes
	r.wbytes = semaphore.NewWeighted(writeBudget)
	r.batches = make(chan *Batch, 2)
	r.hurry = make(chan struct{}, 1)
	r.pipeHurry = make(chan struct{}, 1)
	r.done = make(chan struct{})
	if o.Registerer != nil {
		if r.met, err = newRecorderMetrics(r, o.Registerer); err != nil {
			return nil, err
		}
	}
	r.pipe = newPipeline(r, seq)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.pipe.run() }()
	go func() { defer wg.Done(); r.writeLoop() }()
	go func() { wg.Wait(); close(r.done) }()
	return r, nil
}

// Stats returns the current counters.
func (r *Recorder) Stats() Stats {
	s := Stats{
		Messages: r.messages.Load(), Stored: r.stored.Load(), Lost: r.lost.Load(),
		Exchanges: r.exchanges.Load(), InFlight: r.inflight.Load(),
		QueueDepth: len(r.events), Dropped: r.dropped.Load(), StoreErrors: r.storeErrors.Load(),
	}
	if p := r.lastErr.Load(); p != nil {
		s.LastError = *p
	}
	return s
}

// Sync waits until every event sent before the call is decoded and written
// (or counted lost). Tests use it before reading the store.
func (r *Recorder) Sync(ctx context.Context) error {
	ch := make(chan struct{})
	if !r.send(event{kind: evSync, sync: ch}, true) {
		return ErrClosed
	}
	r.hurryUp()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the recorder: it finishes the exchanges in flight as aborted,
// closes open sessions, writes what is pending and waits, up to ctx. It does
// not close the store.
func (r *Recorder) Close(ctx context.Context) error {
	if r.closing.Swap(true) {
		<-r.done
		return nil
	}
	r.closeMu.Lock() // no sender is mid-send after this
	close(r.events)
	r.closeMu.Unlock()
	r.hurryUp()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("recorder did not finish writing: %w", ctx.Err())
	}
}

// send queues an event, waiting up to the backpressure bound when the
// queue is full. It reports whether the event was queued.
func (r *Recorder) send(ev event, wait bool) bool {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closing.Load() {
		return false
	}
	var deadline <-chan time.Time
	if ev.weight > 0 {
		ev.weight = min(ev.weight, r.qlimit)
		if !r.qbytes.TryAcquire(ev.weight) {
			if !wait {
				return false
			}
			r.hurryUp() // the queue's bytes are spent: the pipeline should not linger
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.Backpressure)
			err := r.qbytes.Acquire(ctx, ev.weight)
			cancel()
			if err != nil {
				return false
			}
		}
		r.met.addQueued(ev.weight)
	}
	select {
	case r.events <- ev:
		if r.deep() {
			r.hurryUp()
		}
		return true
	default:
	}
	r.hurryUp()
	if wait {
		t := time.NewTimer(r.opts.Backpressure)
		defer t.Stop()
		deadline = t.C
		select {
		case r.events <- ev:
			return true
		case <-deadline:
		}
	}
	if ev.weight > 0 {
		r.qbytes.Release(ev.weight)
		r.met.addQueued(-ev.weight)
	}
	return false
}

// writeLinger is how long the writer waits for more batches to write with
// the one in hand: every store write has a fixed cost (a Badger commit, and
// several goroutine wakeups inside Badger), and at one call at a time each
// call's records would otherwise be a write of their own. Most batches come
// gathered already (the pipeline lingers for pipeLinger before handing one
// over) and are written at once with whatever else is queued; for the rest
// (the pipeline's periodic flush) the writer sleeps through the linger
// instead of waiting on r.batches, so that batches queue there, and once it
// is full the proxy's events queue in r.events, without waking anyone for
// each one. A Sync, Close or a deep event queue cuts the sleep short
// (r.hurry); a batch already large (see smallBatch) is written without
// sleeping. It delays
// only storing, never traffic: a record reaches the store, readers and
// OnBatch at most about 2×writeLinger (plus the writes) after the proxy
// reported it, and a Sync at once. Each batch has a fixed cost (the
// goroutine hand-offs, Badger's commit, the session record): at one call
// at a time, 40 ms gathers about 40 calls a batch where 15 ms gathered 15.
// Measured on the project's 2-core benchmark machine with a single caller
// in steady traffic (`mcptape bench --scenarios echo1 --targets
// direct,mcptape --interleave batches`), the process's CPU per call fell
// from 234-311 µs to 193-258 and the added p50 from +155-293 µs to +68-164
// (four runs of each, alternately); at 3 ms, the recorder's wakeups and
// commits were a sixth of the process's CPU. A deep queue or spent queue
// bytes cut the linger short (see send), so a busy proxy's batches stay
// bounded; a live page still sees a call well within a second.
const writeLinger = 40 * time.Millisecond

// writeBudget bounds the raw bytes of the batches between the pipeline and
// the writer: past it the pipeline waits for the writer (and the proxy, once
// the event queue is full, for the pipeline) rather than holding more large
// results in memory. Four 10 MiB results in flight otherwise sat decoded
// in up to four batches at once, on top of the four still arriving. A
// batch larger than the budget goes alone.
const writeBudget = maxBatchBytes

// lingerRecords: a batch of this many records or more means the pipeline is
// busy; the writer then gathers without sleeping, as batches come.
const lingerRecords = 64

// lingerBytes: a batch holding this many raw bytes or more is written
// without lingering, so that large results do not wait in memory.
const lingerBytes = maxBatchBytes / 8

// smallBatch reports whether a batch of records records and raw bytes is
// small enough for the pipeline and the writer to linger over.
func smallBatch(records, raw int) bool { return records < lingerRecords && raw < lingerBytes }

// hurryUp ends the pipeline's and the writer's lingers early, if they are
// lingering.
func (r *Recorder) hurryUp() {
	select {
	case r.pipeHurry <- struct{}{}:
	default:
	}
	select {
	case r.hurry <- struct{}{}:
	default:
	}
}

// deep reports that the events queue holds enough for the writer not to
// sleep: the pipeline is behind, and storing should not wait.
func (r *Recorder) deep() bool { return len(r.events) >= max(cap(r.events)/16, 1) }

// gather merges into b the batches that arrive within writeLinger.
func (r *Recorder) gather(b *Batch) (*Batch, bool) {
	if len(b.syncs) > 0 {
		return b, true
	}
	raw := b.rawBytes()
	// A nil timeout takes only what is queued: so for a batch the pipeline
	// has gathered over a linger already.
	var timeout <-chan time.Time
	if !b.lingered {
		t := time.NewTimer(writeLinger)
		defer t.Stop()
		timeout = t.C
		if smallBatch(b.Len(), raw) && len(r.batches) < cap(r.batches) && !r.deep() {
			select {
			case <-t.C:
				timeout = nil
			case <-r.hurry:
			}
		}
	}
	for b.Len() < r.opts.BatchSize && raw < maxBatchBytes {
		var nb *Batch
		var ok bool
		if timeout == nil {
			select {
			case nb, ok = <-r.batches:
			default:
				return b, true
			}
		} else {
			select {
			case nb, ok = <-r.batches:
			case <-timeout:
				return b, true
			}
		}
		if !ok {
			return b, false
		}
		raw += nb.rawBytes()
		b.held += nb.held
		b.Sessions = append(b.Sessions, nb.Sessions...)
		b.Exchanges = append(b.Exchanges, nb.Exchanges...)
		b.Messages = append(b.Messages, nb.Messages...)
		b.syncs = append(b.syncs, nb.syncs...)
		b.edits = append(b.edits, nb.edits...)
		b.bufs = append(b.bufs, nb.bufs...)
		if len(nb.foreign) > 0 {
			if b.foreign == nil {
				b.foreign = map[*Message]struct{}{}
			}
			for m := range nb.foreign {
				b.foreign[m] = struct{}{}
			}
		}
		if len(nb.syncs) > 0 {
			return b, true
		}
	}
	return b, true
}

func (r *Recorder) writeLoop() {
	ctx := context.Background()
	defer r.markFinalLoss(ctx) // loss.go
	more := true
	for more {
		b, ok := <-r.batches
		if !ok {
			return
		}
		b, more = r.gather(b)
		n := int64(len(b.Messages))
		err := r.store.Write(ctx, b)
		for _, m := range b.Messages {
			if m.File != nil {
				_ = m.File.Close() // a no-op for a file the store moved into place
			}
		}
		if b.held > 0 {
			r.wbytes.Release(b.held)
		}
		if err != nil {
			r.writeFailed(b, err) // loss.go
			continue
		}
		r.stored.Add(n)
		r.applyEdits(b)
		if n > 0 && r.failing.Swap(false) {
			r.log.Warn("store writes succeed again", LogKeyLost, r.lost.Load())
		}
		if r.opts.OnBatch != nil {
			r.opts.OnBatch(b)
		}
		for _, buf := range b.bufs {
			r.bufs.put(buf) // written: no one reads its messages now
		}
		for _, c := range b.syncs {
			close(c)
		}
	}
}

// noteLoss tells the pipeline which sessions lost records, so it marks them
// incomplete on its next write.
func (r *Recorder) noteLoss(b *Batch, err error) {
	r.lossMu.Lock()
	defer r.lossMu.Unlock()
	add := func(id string, n int) {
		if id == "" {
			return
		}
		l := r.lossBySession[id]
		l.n += n
		l.reason = lossReason(err)
		r.lossBySession[id] = l
	}
	for _, m := range b.Messages {
		add(m.SessionID, 1)
	}
	for _, s := range b.Sessions {
		add(s.ID, 0)
	}
	for _, x := range b.Exchanges {
		add(x.SessionID, 0)
	}
}

func (r *Recorder) takeLoss() map[string]lossNote {
	r.lossMu.Lock()
	defer r.lossMu.Unlock()
	if len(r.lossBySession) == 0 {
		return nil
	}
	m := r.lossBySession
	r.lossBySession = map[string]lossNote{}
	return m
}

// Log keys used by the recorder and the proxy.
const (
	LogKeyError    = "err"
	LogKeyLost     = "lost"
	LogKeySession  = "session"
	LogKeyExchange = "exchange"
	LogKeyUpstream = "upstream"
)

// newSessionID is time-ordered (so ids sort by start) and readable.
func newSessionID(t time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return t.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}
