package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptape/mcptape/capture"
)

// DefaultMinFree is the free space a store keeps on its disk unless
// Options.MinFree says otherwise: under it, it stops writing records.
const DefaultMinFree = 256 << 20

// Why a full disk must never be reached: Badger writes its write-ahead log,
// its tables and its value log through memory-mapped files, and a write to
// a mapped page that the file system cannot back kills the process with
// SIGBUS — no error to handle, the proxy gone with it. So the store stops
// writing records well before: at the floor (Options.MinFree), which also
// leaves Badger room to flush its memtables and compact, and at the size
// bound (Options.MaxSize), after deleting the oldest finished sessions.
// A refused write is an error wrapping capture.ErrStoreFull whose text
// says why; the recorder counts the messages lost and marks their
// sessions. Writes resume by themselves once there is room again.

// minFloor is the least floor a store keeps when the floor is on: Badger's
// working room, a memtable's log (twice a memtable) and the table flushed
// from it, with room to spare.
func minFloor(memtable int64) int64 { return 6 * memtable }

// Retention (Options.MaxSize) deletes whole sessions, oldest first, down to
// retainTarget of the bound, starting when the store passes retainStart of
// it. Sessions still open, or with traffic in the last retainGrace, are
// kept: the recorder may still be writing them.
const (
	retainStartPct  = 95
	retainTargetPct = 90
	retainGrace     = 5 * time.Minute
	retainEvery     = 30 * time.Second
)

// pause says why writes are refused.
type pause uint8

const (
	pauseNone  pause = iota
	pauseFloor       // free space under the floor
	pauseSize        // the store at its size bound
)

// spaceError is a write refused for space; it wraps capture.ErrStoreFull.
type spaceError struct{ text string }

func (e *spaceError) Error() string        { return e.text }
func (e *spaceError) Is(target error) bool { return target == capture.ErrStoreFull }

// space is a store's guard against a full disk and its size bound.
type space struct {
	s       *Store
	floor   int64         // free space kept; 0 when the floor is off
	resume  int64         // free space at which a store paused at the floor writes again
	maxSize int64         // 0: no bound
	maxAge  time.Duration // 0: sessions are kept whatever their age

	mu    sync.Mutex
	why   pause
	text  string
	since time.Time
	free  int64 // the latest measurement, less what was admitted since; -1 when unknown
	// statAt is when free was measured (zero: never).
	statAt time.Time

	refused atomic.Int64 // messages refused for space
	deleted atomic.Int64 // sessions deleted to stay under the bound and the age limit

	// round is closed, and replaced, when a retention round ends; stuck
	// says the last round found nothing it may delete.
	round chan struct{}
	stuck bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newSpace(s *Store, o *Options, memtable int64) *space {
	g := &space{s: s, maxSize: max(o.MaxSize, 0), maxAge: max(o.MaxAge, 0), free: -1}
	if o.InMemory || o.ReadOnly {
		g.maxSize, g.maxAge = 0, 0
		return g
	}
	switch {
	case o.MinFree == 0:
		g.floor = DefaultMinFree
	case o.MinFree > 0:
		g.floor = max(o.MinFree, minFloor(memtable))
	}
	// Resume with a margin, so that a disk hovering at the floor does not
	// flip recording on and off with every write, nor when Badger frees
	// space of its own accord (a flushed memtable's log, twice a memtable).
	g.resume = g.floor + max(g.floor/10, 2*memtable+1<<20)
	return g
}

// start runs retention when the store has a size bound or an age limit.
func (g *space) start() {
	if g.maxSize == 0 && g.maxAge == 0 {
		return
	}
	g.kick = make(chan struct{}, 1)
	g.round = make(chan struct{})
	g.stop = make(chan struct{})
	g.done = make(chan struct{})
	go g.retain()
	g.wake()
}

// close stops retention and waits for it.
func (g *space) close() {
	if g.stop != nil {
		close(g.stop)
		<-g.done
	}
}

func (g *space) wake() {
	if g.kick == nil {
		return
	}
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// admission is what a write may store.
type admission uint8

const (
	admitAll      admission = iota
	admitSessions           // session records only: they mark sessions incomplete
	admitNone
)

// retainWait is how long a write over the size bound waits for retention
// to make room, before it is refused.
const retainWait = time.Second

// admit decides what a write of about need bytes may store, and returns
// the error that explains a refusal. Over the size bound, it waits up to
// retainWait for retention to delete old sessions.
func (g *space) admit(need int64) (admission, error) {
	if g.floor == 0 && g.maxSize == 0 {
		return admitAll, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.evaluate(need)
	if g.why == pauseSize && !g.stuck {
		timeout := time.NewTimer(retainWait)
		defer timeout.Stop()
		for g.why == pauseSize && !g.stuck {
			round := g.round
			g.mu.Unlock()
			g.wake()
			select {
			case <-round:
			case <-timeout.C:
			}
			g.mu.Lock()
			if round == g.round { // timed out
				break
			}
			g.evaluate(need)
		}
	}
	switch g.why {
	case pauseNone:
		return admitAll, nil
	case pauseFloor:
		// Session records are a few hundred bytes: written while at least
		// half the floor is free, so that sessions show they lost records.
		if g.free >= g.floor/2 {
			return admitSessions, &spaceError{g.text}
		}
		return admitNone, &spaceError{g.text}
	}
	return admitSessions, &spaceError{g.text}
}

// Far from the floor, a measurement of the free space stands for statEvery:
// the writes in between count against it. Measuring it is a system call
// that wakes the Go runtime's monitor thread, which then polls every 20 µs
// for a millisecond: at one call at a time, with a batch written every few
// tens of milliseconds, that kept it awake and cost several percent of the
// process's CPU. Within statMargin of the floor, every write measures; a
// disk filled faster than that by someone else fails Badger's write, which
// the store reports as it does any other.
const (
	statEvery  = time.Second
	statMargin = 1 << 30
)

// statFree measures the free space (freeBytes; tests count the calls).
var statFree = freeBytes

// evaluate measures the free space and the store's size and updates why
// writes are refused. g.mu is held.
func (g *space) evaluate(need int64) {
	why := pauseNone
	if g.floor > 0 {
		limit := g.floor
		if g.why == pauseFloor {
			limit = g.resume
		}
		free, err := g.free, error(nil)
		if now := time.Now(); now.Sub(g.statAt) >= statEvery || free-need < limit+statMargin { // (a zero statAt is long ago)
			if free, err = statFree(g.s.dir); err == nil {
				g.free, g.statAt = free, now
			}
		}
		if err == nil {
			if free-need < limit {
				why = pauseFloor
			} else {
				g.free -= need
			}
		}
	}
	if why == pauseNone && g.maxSize > 0 {
		size := g.s.effectiveSize()
		if size+need > g.maxSize*retainStartPct/100 {
			g.wake()
		}
		if size+need > g.maxSize {
			why = pauseSize
		}
	}
	if why == g.why {
		return
	}
	g.why, g.since = why, time.Now()
	switch why {
	case pauseFloor:
		g.text = fmt.Sprintf("recording paused: %s free on the disk of %s, under the %s kept free (--min-free); "+
			"traffic is forwarded but not recorded until there is room", humanBytes(g.free), g.s.dir, humanBytes(g.floor))
	case pauseSize:
		g.text = fmt.Sprintf("recording paused: the store in %s has reached its bound of %s (--max-store-size) "+
			"and holds no finished session old enough to delete; traffic is forwarded but not recorded",
			g.s.dir, humanBytes(g.maxSize))
		if !g.stuck {
			g.text = fmt.Sprintf("recording paused: the store in %s has reached its bound of %s (--max-store-size) "+
				"faster than its oldest sessions are deleted; traffic is forwarded but not recorded",
				g.s.dir, humanBytes(g.maxSize))
		}
	default:
		g.text = ""
	}
}

// check is admit for writes other than the recorder's (edits, labels):
// they are refused whenever recording is paused at the floor.
func (g *space) check() error {
	if g.floor == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.evaluate(0)
	if g.why == pauseFloor {
		return &spaceError{g.text}
	}
	return nil
}

// SpaceStatus is a store's room to record, for status pages and metrics.
type SpaceStatus struct {
	// Paused is set while the store refuses to record messages, and
	// Reason says why (free space under MinFree, or the size bound
	// reached), since Since.
	Paused bool      `json:"paused"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Free is the free space on the store's disk, -1 when not measured;
	// MinFree the floor kept free, 0 when off.
	Free    int64 `json:"free"`
	MinFree int64 `json:"minFree"`
	// Size is the store's size on disk (as Size reports it), MaxSize its
	// bound, 0 when none.
	Size    int64 `json:"size"`
	MaxSize int64 `json:"maxSize,omitempty"`
	// MaxAge is the age past which sessions are deleted, 0 when none.
	MaxAge time.Duration `json:"maxAge,omitempty"`
	// Refused counts the messages the store refused for space since it
	// opened; Deleted the sessions it deleted to stay under MaxSize and
	// MaxAge.
	Refused int64 `json:"refused"`
	Deleted int64 `json:"deleted"`
}

// Space reports the store's room to record, measured now: a store paused
// for space that has room again says so (and writes again) without
// waiting for the next write.
func (s *Store) Space() SpaceStatus {
	g := s.space
	g.mu.Lock()
	if g.floor > 0 || g.maxSize > 0 {
		g.evaluate(0)
	}
	st := SpaceStatus{Paused: g.why != pauseNone, Reason: g.text, Since: g.since, Free: g.free, MinFree: g.floor,
		MaxSize: g.maxSize, MaxAge: g.maxAge, Refused: g.refused.Load(), Deleted: g.deleted.Load()}
	g.mu.Unlock()
	if !st.Paused {
		st.Since = time.Time{}
	}
	st.Size, _ = s.Size()
	return st
}

// retain is the retention goroutine of a store with a size bound.
func (g *space) retain() {
	defer close(g.done)
	t := time.NewTicker(retainEvery)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-g.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-g.stop:
			return
		case <-g.kick:
		case <-t.C:
		}
		stuck, err := g.s.retainOnce(ctx)
		if err != nil && ctx.Err() == nil {
			g.s.log.Warn("badger store: deleting old sessions to stay under the size bound failed", logKeyErr, err)
		}
		g.mu.Lock()
		g.stuck = stuck
		close(g.round)
		g.round = make(chan struct{})
		g.mu.Unlock()
	}
}

// retainOnce deletes the finished sessions older than the age limit, then
// the oldest finished sessions while the store is over retainStartPct of
// its bound, down to retainTargetPct. stuck reports that it stopped over
// the bound for want of a session it may delete.
func (s *Store) retainOnce(ctx context.Context) (stuck bool, err error) {
	g := s.space
	if g.maxAge > 0 {
		if err := s.retainAge(ctx); err != nil {
			return false, err
		}
	}
	if g.maxSize == 0 {
		return false, nil
	}
	if _, err := s.measureSize(true); err != nil {
		return false, err
	}
	size := s.effectiveSize()
	if size <= g.maxSize*retainStartPct/100 {
		return false, nil
	}
	target := g.maxSize * retainTargetPct / 100
	freed := false
	for size > target && !stuck {
		ids, err := s.oldestFinished(ctx, 32, time.Now().Add(-retainGrace))
		if err != nil {
			return false, err
		}
		if len(ids) == 0 {
			stuck = size > g.maxSize
			break
		}
		for _, id := range ids {
			n, err := s.sessionBytes(ctx, id)
			if err != nil {
				return false, err
			}
			if err := s.DeleteSession(ctx, id); err != nil && !errors.Is(err, capture.ErrNotFound) {
				return false, err
			}
			s.size.deleted(n)
			g.deleted.Add(1)
			freed = true
			s.log.Info("badger store: deleted the oldest session to stay under the size bound",
				logKeySession, id, logKeyBytes, n, logKeyMaxSize, g.maxSize)
			if size = s.effectiveSize(); size <= target {
				break
			}
		}
	}
	if freed {
		// Exchanges with large headers live in the value log: give back
		// what the deleted ones took.
		s.reclaim(ctx, false)
	}
	return stuck, nil
}

// retainAge deletes the finished sessions whose latest traffic is older
// than the age limit (Options.MaxAge), as Prune would.
func (s *Store) retainAge(ctx context.Context) error {
	rep, err := s.prune(ctx, capture.PruneOptions{OlderThan: s.space.maxAge}, false)
	if rep != nil {
		s.space.deleted.Add(int64(len(rep.Deleted)))
	}
	return err
}

func (s *Store) runValueLogGC() bool {
	if err := s.gate.enter(); err != nil {
		return false
	}
	defer s.gate.leave()
	return s.db.RunValueLogGC(0.5) == nil
}

// oldestFinished returns up to n session ids, oldest first, of sessions
// that are not open and saw no traffic after before.
func (s *Store) oldestFinished(ctx context.Context, n int, before time.Time) ([]string, error) {
	var ids []string
	err := s.view(ctx, func(txn *badger.Txn) error {
		prefix := []byte(prefixTime)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid() && len(ids) < n; it.Next() {
			key := it.Item().Key()
			if len(key) < len(prefix)+timeKeyLen {
				continue
			}
			x, err := getSession(txn, string(key[len(prefix)+timeKeyLen:]))
			if err != nil {
				continue
			}
			if x.Status != capture.StatusOpen && x.End.Before(before) {
				ids = append(ids, x.ID)
			}
		}
		return nil
	})
	return ids, err
}

// sessionBytes estimates what deleting a session gives back: its raw
// bytes and records.
func (s *Store) sessionBytes(ctx context.Context, id string) (int64, error) {
	var n int64
	for m, err := range s.Messages(ctx, id, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return 0, err
		}
		n += int64(m.Size) + recordOverhead
	}
	for x, err := range s.Exchanges(ctx, id) {
		if err != nil {
			return 0, err
		}
		n += recordOverhead + headerBytes(x.RequestHeader) + headerBytes(x.ResponseHeader)
	}
	return n, nil
}

// recordOverhead is about what a message or exchange record takes besides
// its raw bytes and headers: keys, fields, the raw head, Badger's own.
const recordOverhead = 160

func headerBytes(h map[string][]string) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

// batchBytes estimates what a batch adds to the store on disk.
func batchBytes(b *capture.Batch) int64 {
	var n int64
	for _, m := range b.Messages {
		n += int64(len(m.Raw)) + recordOverhead
		if m.SSE != nil {
			n += int64(len(m.SSE.Prefix) + len(m.SSE.Suffix) + len(m.SSE.Whole))
		}
	}
	for _, x := range b.Exchanges {
		n += recordOverhead + headerBytes(x.RequestHeader) + headerBytes(x.ResponseHeader)
	}
	n += int64(len(b.Sessions)) * 2 * recordOverhead
	return n
}

func humanBytes(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// registerSpace registers the store's space metrics with reg; the
// returned func unregisters them.
func (s *Store) registerSpace(reg prometheus.Registerer) (func(), error) {
	g := s.space
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcptape_store_recording_paused",
			Help: "1 while the store refuses to record for space (free space under --min-free, or the store at --max-store-size), else 0."},
			func() float64 {
				if s.Space().Paused {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcptape_store_free_bytes",
			Help: "Free space on the store's disk (-1 when not measured)."},
			func() float64 {
				if n, err := freeBytes(s.dir); err == nil {
					return float64(n)
				}
				return -1
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcptape_store_messages_refused_total",
			Help: "Messages the store refused to record for space; they also count in mcptape_capture_messages_lost_total."},
			func() float64 { return float64(g.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcptape_store_sessions_deleted_total",
			Help: "Sessions deleted, oldest first, to keep the store under --max-store-size and --max-age."},
			func() float64 { return float64(g.deleted.Load()) }),
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("badgerstore: registering the store's metrics: %w", err)
		}
	}
	return func() {
		for _, c := range cs {
			reg.Unregister(c)
		}
	}, nil
}

// Log keys of the space guard.
const (
	logKeyErr      = "err"
	logKeyBytes    = "bytes"
	logKeyMaxSize  = "maxSize"
	logKeyExchange = "exchange"
	logKeySeq      = "seq"
	logKeyWhy      = "why"
)
