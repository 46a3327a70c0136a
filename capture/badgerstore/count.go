package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
)

// keySessions holds the number of session records, kept with them: each
// write that adds a session record, or deletes one, sets it in the same
// transaction. A store written before it existed counts its records once,
// when first asked (and keeps the count from then on, if it is writable).
const keySessions = "meta/sessions"

var _ capture.SessionCounter = (*Store)(nil)

// sessionCount is the count of session records, once known.
type sessionCount struct {
	mu    sync.Mutex
	n     int64
	known bool
}

func (c *sessionCount) get() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.known
}

func (c *sessionCount) set(n int64, known bool) {
	c.mu.Lock()
	c.n, c.known = n, known
	c.mu.Unlock()
}

// loadSessionCount reads keySessions, if the store has it.
func (s *Store) loadSessionCount(txn *badger.Txn) error {
	item, err := txn.Get([]byte(keySessions))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: %s", errCorrupt, keySessions)
		}
		s.sessions.set(int64(tail8(v)), true)
		return nil
	})
}

// CountSessions implements [capture.SessionCounter].
func (s *Store) CountSessions(ctx context.Context) (int, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.gate.leave()
	if n, ok := s.sessions.get(); ok {
		return int(n), nil
	}
	// Written before the count was kept: count the records, with writes
	// held off until the count is stored with them.
	if !s.readOnly {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		if n, ok := s.sessions.get(); ok {
			return int(n), nil
		}
	}
	var n int64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixSession), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if !s.readOnly {
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(keySessions), be8(nil, uint64(n))) }); err != nil {
			return 0, err
		}
	}
	s.sessions.set(n, true)
	return int(n), nil
}
