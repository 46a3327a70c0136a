package badgerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// ErrUnclean is returned by a read-only Open of a store that a process was
// killed in (or crashed in) before it closed it: Badger must replay its
// log first, which writes. Any read-write Open does that (and
// RepairOpenSessions then fixes the sessions left open).
var ErrUnclean = errors.New("the store was not closed cleanly")

// StaleReason is the LossReason RepairOpenSessions gives the sessions it
// repairs.
const StaleReason = "mcptape stopped without closing this session (it was killed, or the machine went down): " +
	"its counts were recounted from the stored messages, and messages in flight then may be missing"

// RepairOpenSessions fixes the session records a recorder left behind when
// it was killed before it could close them: every session still open
// (in a store this process holds, no recorder is writing it) gets counts
// recounted from its stored messages and exchanges, and is marked
// incomplete with StaleReason. It returns the ids repaired. A recorder
// calls it when it opens a store, before it records.
func (s *Store) RepairOpenSessions(ctx context.Context) ([]string, error) {
	if s.readOnly {
		return nil, ErrReadOnly
	}
	var open []*capture.Session
	err := s.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixSession)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			id := string(it.Item().Key()[len(prefixSession):])
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			x, err := decodeSession(id, v)
			if err != nil {
				return err
			}
			if x.Status == capture.StatusOpen {
				open = append(open, x)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("badgerstore: finding sessions left open: %w", err)
	}
	var ids []string
	for _, x := range open {
		if err := s.recount(ctx, x); err != nil {
			return ids, fmt.Errorf("badgerstore: recounting session %q: %w", x.ID, err)
		}
		x.Status, x.LossReason = capture.StatusIncomplete, StaleReason
		if err := s.Write(ctx, &capture.Batch{Sessions: []*capture.Session{x}}); err != nil {
			return ids, fmt.Errorf("badgerstore: repairing session %q: %w", x.ID, err)
		}
		ids = append(ids, x.ID)
		s.log.Info("badger store: repaired a session left open by a recorder that did not close it", logKeySession, x.ID)
	}
	return ids, nil
}

// recount sets x's counts and End from its stored messages and exchanges,
// as the recorder counts them.
func (s *Store) recount(ctx context.Context, x *capture.Session) error {
	x.Messages, x.Calls, x.Errors, x.Findings, x.Exchanges = 0, 0, 0, 0, 0
	for m, err := range s.Messages(ctx, x.ID, capture.MessageQuery{}) {
		if err != nil {
			return err
		}
		x.Messages++
		x.Findings += len(m.Findings)
		switch {
		case m.Kind == protocol.KindRequest && m.Direction == protocol.ClientToServer:
			x.Calls++
		case m.Kind == protocol.KindError:
			x.Errors++
		case m.Kind == protocol.KindResult:
			for _, pm := range protocol.Split(m.Raw) {
				if r, ok := protocol.ParseResult(pm.Result); ok && r.IsError {
					x.Errors++
				}
			}
		}
		if m.Time.After(x.End) {
			x.End = m.Time
		}
	}
	for e, err := range s.Exchanges(ctx, x.ID) {
		if err != nil {
			return err
		}
		x.Exchanges++
		x.Findings += len(e.FindingList)
		if e.End.After(x.End) {
			x.End = e.End
		}
	}
	return nil
}
