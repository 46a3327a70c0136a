package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"iter"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
)

var _ capture.Snapshotter = (*Store)(nil)

// Snapshot implements [capture.Snapshotter]: a Reader of one read
// transaction, whose exchange, message and raw-byte iterators serve session
// after session (a seek each) instead of being opened for each. Its
// iterations are not to be nested: one that starts while another of its
// kind runs opens iterators of its own.
func (s *Store) Snapshot(ctx context.Context) (capture.Reader, func(), error) {
	if err := s.enter(ctx); err != nil {
		return nil, nil, err
	}
	sn := &snapshot{s: s, txn: s.db.NewTransaction(false)}
	return sn, sn.release, nil
}

// snapshot is a Store's Snapshot.
type snapshot struct {
	s        *Store
	txn      *badger.Txn
	released bool
	// The shared iterators, opened on first use; busy while an iteration
	// holds them.
	ss, xs, ms     *cursor // over session records, exchanges, messages
	raws           *rawCursor
	xsBusy, msBusy bool
	// careful is set once a session read fewer exchanges or messages than
	// its record counts: a table block that fails its checksum ends its
	// table's iterator, and the rest of the table is then read only by a
	// seek, which the cursors no longer spare.
	careful bool
}

// cursor opens a cursor over the keys with prefix.
func (sn *snapshot) cursor(prefix string) *cursor {
	return &cursor{it: sn.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)}), careful: &sn.careful}
}

// record is session id's record as stored, nil when it does not read.
func (sn *snapshot) record(id string) *capture.Session {
	if sn.ss == nil {
		sn.ss = sn.cursor(prefixSession)
	}
	key := sessionKey(id)
	it := sn.ss.seek(key, key)
	if !it.Valid() || !bytes.Equal(it.Item().Key(), key) {
		return nil
	}
	sn.ss.past() // nothing lies between key and the iterator, which is at key
	v, err := it.Item().ValueCopy(nil)
	if err != nil {
		return nil
	}
	x, err := decodeSession(id, v)
	if err != nil {
		return nil
	}
	return x
}

// after looks at a whole read of session id's exchanges or messages (the
// other count is -1) through c: damage met, or fewer records than the
// session's record counts, makes the snapshot careful.
func (sn *snapshot) after(err error, c *cursor, id string, exchanges, messages int) {
	switch {
	case errors.Is(err, capture.ErrDamaged):
		sn.careful = true
	case err != nil || c.end == nil: // stopped, not at its end
	default:
		if rec := sn.record(id); rec != nil && (exchanges >= 0 && exchanges < rec.Exchanges || messages >= 0 && messages < rec.Messages-rec.Lost) {
			sn.careful = true
		}
	}
}

func (sn *snapshot) release() {
	if sn.released {
		return
	}
	sn.released = true
	for _, c := range []*cursor{sn.ss, sn.xs, sn.ms} {
		if c != nil {
			c.it.Close()
		}
	}
	if sn.raws != nil {
		sn.raws.Close()
	}
	sn.txn.Discard()
	sn.s.gate.leave()
}

func (sn *snapshot) check(ctx context.Context) error {
	if sn.released {
		return capture.ErrClosed
	}
	return ctx.Err()
}

// Session implements [capture.Reader].
func (sn *snapshot) Session(ctx context.Context, id string) (*capture.Session, error) {
	if err := sn.check(ctx); err != nil {
		return nil, err
	}
	// A session's record is its key's only one: the cursor spares the
	// lookup a Get makes on every level when sessions come in ID order.
	x := sn.record(id)
	if x == nil {
		return sn.s.sessionIn(sn.txn, id) // its error
	}
	return x, sn.s.withLabels(sn.txn, x)
}

// Sessions implements [capture.Reader].
func (sn *snapshot) Sessions(ctx context.Context, q capture.SessionQuery) iter.Seq2[*capture.Session, error] {
	return func(yield func(*capture.Session, error) bool) {
		if err := sn.check(ctx); err != nil {
			yield(nil, err)
			return
		}
		scanIn(sn.s, sn.txn, ctx, yield, func(txn *badger.Txn, next func() bool) error {
			// The session records, newest first as the time index lists
			// them, through a cursor going the same way: a step or two
			// from one to the next instead of a lookup on every level.
			// What it does not find, a lookup looks for (and names a
			// damaged record as such).
			rc := &rcursor{it: txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixSession), Reverse: true})}
			defer rc.it.Close()
			return sn.s.sessionsIn(txn, q, next, yield, func(id string) (*capture.Session, error) {
				if v := rc.get(sessionKey(id)); v != nil {
					if x, err := decodeSession(id, v); err == nil {
						return x, nil
					}
				}
				return getSession(txn, id)
			})
		})
	}
}

// Exchanges implements [capture.Reader].
func (sn *snapshot) Exchanges(ctx context.Context, sessionID string) iter.Seq2[*capture.Exchange, error] {
	return func(yield func(*capture.Exchange, error) bool) {
		if err := sn.check(ctx); err != nil {
			yield(nil, err)
			return
		}
		scanIn(sn.s, sn.txn, ctx, yield, func(txn *badger.Txn, next func() bool) error {
			if sn.xsBusy {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: exchangePrefix(nil, sessionID)})
				defer it.Close()
				return exchangesIn(&cursor{it: it}, sessionID, next, yield)
			}
			if sn.xs == nil {
				sn.xs = sn.cursor(prefixExchange)
			}
			sn.xsBusy = true
			defer func() { sn.xsBusy = false }()
			n := 0
			err := exchangesIn(sn.xs, sessionID, next, func(x *capture.Exchange, err error) bool {
				n++
				return yield(x, err)
			})
			sn.after(err, sn.xs, sessionID, n, -1)
			return err
		})
	}
}

// Exchange implements [capture.Reader].
func (sn *snapshot) Exchange(ctx context.Context, id uint64) (*capture.Exchange, error) {
	if err := sn.check(ctx); err != nil {
		return nil, err
	}
	return exchangeIn(sn.txn, id)
}

// Messages implements [capture.Reader].
func (sn *snapshot) Messages(ctx context.Context, sessionID string, q capture.MessageQuery) iter.Seq2[*capture.Message, error] {
	return func(yield func(*capture.Message, error) bool) {
		if err := sn.check(ctx); err != nil {
			yield(nil, err)
			return
		}
		scanIn(sn.s, sn.txn, ctx, yield, func(txn *badger.Txn, next func() bool) error {
			if sn.msBusy {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: messagePrefix(nil, sessionID)})
				defer it.Close()
				var raws *rawCursor
				if !q.NoRaw {
					raws = newRawCursor(txn, sn.s.blobs)
					defer raws.Close()
				}
				return sn.s.messagesIn(ctx, txn, &cursor{it: it}, raws, sessionID, q, next, yield)
			}
			if sn.ms == nil {
				sn.ms = sn.cursor(prefixMessage)
				sn.raws = newRawCursor(txn, sn.s.blobs)
			}
			sn.msBusy = true
			defer func() { sn.msBusy = false }()
			raws := sn.raws
			if q.NoRaw {
				raws = nil
			}
			n := 0
			err := sn.s.messagesIn(ctx, txn, sn.ms, raws, sessionID, q, next, func(m *capture.Message, err error) bool {
				n++
				return yield(m, err)
			})
			if q.After == 0 && q.Limit == 0 {
				sn.after(err, sn.ms, sessionID, -1, n)
			}
			return err
		})
	}
}

// Message implements [capture.Reader].
func (sn *snapshot) Message(ctx context.Context, seq uint64) (*capture.Message, error) {
	if err := sn.check(ctx); err != nil {
		return nil, err
	}
	return sn.s.messageIn(sn.txn, seq)
}

// LastIDs implements [capture.Reader]: the store's marks now, which are at
// or above the snapshot's records.
func (sn *snapshot) LastIDs(ctx context.Context) (uint64, uint64, error) {
	if err := sn.check(ctx); err != nil {
		return 0, 0, err
	}
	return sn.s.lastSeq.Load(), sn.s.lastX.Load(), nil
}

// rcursor reads records by key from an iterator going backwards, for keys
// asked for in (mostly) descending order.
type rcursor struct{ it *badger.Iterator }

// get returns a copy of key's value, or nil when the cursor did not find
// it: a few steps back from where it is, else after a seek. A key it
// misses may still be there (a table block that fails its checksum ends
// its table's iterator): the caller looks it up.
func (c *rcursor) get(key []byte) []byte {
	it := c.it
	for steps := 0; it.Valid() && bytes.Compare(it.Item().Key(), key) > 0 && steps < cursorSteps; steps++ {
		it.Next()
	}
	if !it.Valid() || !bytes.Equal(it.Item().Key(), key) {
		it.Seek(key) // backwards: the last key at or before key
		if !it.Valid() || !bytes.Equal(it.Item().Key(), key) {
			return nil
		}
	}
	v, err := it.Item().ValueCopy(nil) // a fresh copy: a decoded record may keep it
	if err != nil {
		return nil
	}
	return v
}
