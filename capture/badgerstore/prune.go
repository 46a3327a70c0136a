package badgerstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
)

var _ capture.Pruner = (*Store)(nil)

// Prune implements [capture.Pruner]: it deletes the sessions o selects,
// oldest first, then gives their disk space back: blobs are punched out
// of their packs as each session goes, and the LSM tree is compacted
// (Badger drops deleted keys only as it compacts) and the value log
// collected. Sessions that are open or saw traffic within
// capture.PruneGrace are kept.
func (s *Store) Prune(ctx context.Context, o capture.PruneOptions) (*capture.PruneReport, error) {
	return s.prune(ctx, o, true)
}

// prune is Prune; compact says whether to compact the LSM tree after
// (retention, which runs every retainEvery, leaves that to Badger).
func (s *Store) prune(ctx context.Context, o capture.PruneOptions, compact bool) (*capture.PruneReport, error) {
	if s.readOnly {
		return nil, ErrReadOnly
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	rep := &capture.PruneReport{DryRun: o.DryRun, Deleted: []capture.PrunedSession{}, SizeBefore: -1, SizeAfter: -1}
	if o.OlderThan <= 0 && o.MaxSize <= 0 {
		return rep, nil
	}
	size, serr := s.measureSize(true)
	if serr == nil {
		rep.SizeBefore = size
	}
	chosen, kept, err := s.prunePlan(ctx, o, size)
	if err != nil {
		return nil, err
	}
	rep.Kept = kept
	var freed int64
	for _, p := range chosen {
		freed += p.Bytes
		if o.DryRun {
			rep.Deleted = append(rep.Deleted, p)
			continue
		}
		if err := s.DeleteSession(ctx, p.ID); err != nil && !errors.Is(err, capture.ErrNotFound) {
			return rep, err
		}
		s.size.deleted(p.Bytes)
		rep.Deleted = append(rep.Deleted, p)
		s.log.Info("badger store: pruned a session", logKeySession, p.ID, logKeyBytes, p.Bytes, logKeyWhy, p.Why)
	}
	if o.DryRun {
		if serr == nil {
			rep.SizeAfter = max(0, size-freed)
		}
		return rep, nil
	}
	if len(rep.Deleted) > 0 {
		s.reclaim(ctx, compact)
	}
	if after, err := s.measureSize(true); err == nil {
		rep.SizeAfter = after
	}
	return rep, nil
}

// prunePlan picks the sessions o selects, oldest first, and counts those
// it keeps for being open or recent. size is the store's size on disk; a
// session's share of it is its estimated bytes (sessionBytes) scaled to
// what the directory really takes, compression and Badger's own overhead
// included.
func (s *Store) prunePlan(ctx context.Context, o capture.PruneOptions, size int64) (chosen []capture.PrunedSession, kept int, err error) {
	// By age alone, only sessions that began before the cutoff can have
	// ended before it: the time index (by Start) stops the scan there.
	var q capture.SessionQuery
	if o.MaxSize <= 0 {
		q.Until = o.Now.Add(-o.OlderThan)
	}
	var all []*capture.Session
	for x, err := range s.Sessions(ctx, q) {
		if err != nil {
			return nil, 0, err
		}
		all = append(all, x)
	}
	slices.Reverse(all) // oldest first
	est := make([]int64, len(all))
	var total int64
	for i, x := range all {
		n, err := s.sessionBytes(ctx, x.ID)
		if err != nil {
			return nil, 0, err
		}
		est[i], total = n, total+n
	}
	share := func(i int) int64 {
		if size <= 0 || total <= 0 || o.MaxSize <= 0 {
			return est[i]
		}
		return int64(float64(est[i]) / float64(total) * float64(size))
	}
	recent := o.Now.Add(-capture.PruneGrace)
	deletable := func(x *capture.Session) bool { return x.Status != capture.StatusOpen && x.End.Before(recent) }
	taken := make([]bool, len(all))
	left := size
	take := func(i int, why string) {
		x := all[i]
		taken[i] = true
		left -= share(i)
		chosen = append(chosen, capture.PrunedSession{ID: x.ID, Start: x.Start, End: x.End, Bytes: share(i), Why: why})
	}
	if o.OlderThan > 0 {
		cutoff := o.Now.Add(-o.OlderThan)
		for i, x := range all {
			switch {
			case !x.End.Before(cutoff):
			case deletable(x):
				take(i, "age")
			default:
				kept++
			}
		}
	}
	if o.MaxSize > 0 && size > 0 {
		for i, x := range all {
			if left <= o.MaxSize {
				break
			}
			switch {
			case taken[i]:
			case deletable(x):
				take(i, "size")
			default:
				kept++
			}
		}
	}
	slices.SortStableFunc(chosen, func(a, b capture.PrunedSession) int { return a.Start.Compare(b.Start) })
	return chosen, kept, nil
}

// reclaim gives deleted records' disk space back: the value log collected
// while it has garbage, and with compact the LSM tree compacted into one
// level, which drops the deleted keys (else they go as Badger compacts
// by itself, which may take long, or never for tables it leaves alone).
func (s *Store) reclaim(ctx context.Context, compact bool) {
	if compact {
		if err := s.compact(); err != nil {
			s.log.Warn("badger store: compacting after deleting sessions failed", logKeyErr, err)
		}
	}
	g := s.space
	g.mu.Lock()
	short := g.why == pauseFloor
	g.mu.Unlock()
	// A value-log rewrite needs room: not while space is short.
	for !short && ctx.Err() == nil && s.runValueLogGC() {
	}
}

// keyFlush is a key written only to be dropped: dropping a prefix is the
// one way Badger offers to flush its memtables on demand.
const keyFlush = "meta/flush"

// compact flushes the memtables, which hold the deletes' tombstones, to
// tables, then compacts every level into one: what the tombstones delete
// leaves the disk.
func (s *Store) compact() error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	// Badger refuses writes while it drops a prefix: the recorder's wait
	// for wmu instead.
	s.wmu.Lock()
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(keyFlush), nil) })
	if err == nil {
		err = s.db.DropPrefix([]byte(keyFlush))
	}
	s.wmu.Unlock()
	if err != nil {
		return err
	}
	return s.db.Flatten(1)
}
