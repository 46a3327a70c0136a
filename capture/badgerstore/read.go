package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"os"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
)

// view runs fn in a read transaction while holding the gate.
func (s *Store) view(ctx context.Context, fn func(txn *badger.Txn) error) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.leave()
	return s.db.View(fn)
}

// scan runs fn in a read transaction held for a whole iteration, which is
// the snapshot the iteration sees. fn's next reports whether to go on to
// another record: it checks ctx and Close, and yields the error if either
// stops the iteration.
func scan[T any](s *Store, ctx context.Context, yield func(T, error) bool,
	fn func(txn *badger.Txn, next func() bool) error) {
	var zero T
	if err := s.enter(ctx); err != nil {
		yield(zero, err)
		return
	}
	defer s.gate.leave()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	scanIn(s, txn, ctx, yield, fn)
}

// scanIn is scan in the read transaction txn, which the caller holds (and
// the gate with it).
func scanIn[T any](s *Store, txn *badger.Txn, ctx context.Context, yield func(T, error) bool,
	fn func(txn *badger.Txn, next func() bool) error) {
	var zero T
	stopped := false
	next := func() bool {
		err := ctx.Err()
		if err == nil && s.gate.closed.Load() {
			err = capture.ErrClosed
		}
		if err != nil {
			stopped = true
			yield(zero, err)
			return false
		}
		return true
	}
	if err := fn(txn, next); err != nil && !stopped {
		yield(zero, err)
	}
}

// Session implements [capture.Store].
func (s *Store) Session(ctx context.Context, id string) (*capture.Session, error) {
	var x *capture.Session
	err := s.view(ctx, func(txn *badger.Txn) error {
		var err error
		x, err = s.sessionIn(txn, id)
		return err
	})
	return x, err
}

// sessionIn is Session in txn.
func (s *Store) sessionIn(txn *badger.Txn, id string) (*capture.Session, error) {
	x, err := getSession(txn, id)
	if err != nil {
		return nil, err
	}
	return x, s.withLabels(txn, x)
}

func getSession(txn *badger.Txn, id string) (*capture.Session, error) {
	item, err := txn.Get(sessionKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("badgerstore: session %q: %w", id, capture.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("badgerstore: session %q: %w", id, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("badgerstore: session %q: %w", id, err)
	}
	return decodeSession(id, v)
}

// Sessions implements [capture.Store]. It walks the time index backwards
// and loads each session record.
func (s *Store) Sessions(ctx context.Context, q capture.SessionQuery) iter.Seq2[*capture.Session, error] {
	return func(yield func(*capture.Session, error) bool) {
		scan(s, ctx, yield, func(txn *badger.Txn, next func() bool) error {
			return s.sessionsIn(txn, q, next, yield, func(id string) (*capture.Session, error) { return getSession(txn, id) })
		})
	}
}

// sessionsIn is Sessions' iteration in txn; get reads a session's record
// (getSession, or a snapshot's cursor).
func (s *Store) sessionsIn(txn *badger.Txn, q capture.SessionQuery, next func() bool, yield func(*capture.Session, error) bool,
	get func(id string) (*capture.Session, error)) error {
	prefix := []byte(prefixTime)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	var until, since timeKey
	if q.Until.IsZero() {
		it.Seek(prefixEnd(prefixTime))
	} else {
		until = makeTimeKey(q.Until)
		it.Seek(timeIndexKey(nil, until, ""))
	}
	if !q.Since.IsZero() {
		since = makeTimeKey(q.Since)
	}
	n := 0
	var dmg damage
	for ; it.Valid(); it.Next() {
		key := it.Item().Key()
		if len(key) < len(prefix)+timeKeyLen {
			dmg.add(fmt.Sprintf("%q", key), "a time index key too short")
			continue
		}
		tk := key[len(prefix) : len(prefix)+timeKeyLen]
		if !q.Until.IsZero() && bytes.Compare(tk, until[:]) >= 0 {
			continue // the exact Until key of an empty ID: Until is exclusive
		}
		if !q.Since.IsZero() && bytes.Compare(tk, since[:]) < 0 {
			return nil
		}
		if !next() {
			return nil
		}
		id := string(key[len(prefix)+timeKeyLen:])
		x, err := get(id)
		if errors.Is(err, capture.ErrNotFound) {
			dmg.add(id, "listed in the time index, but its record is missing")
			continue
		}
		if errors.Is(err, capture.ErrDamaged) {
			dmg.add(id, "its record does not read")
			continue
		}
		if err == nil {
			err = s.withLabels(txn, x)
		}
		if err != nil {
			return err
		}
		if !yield(x, nil) {
			return nil
		}
		if n++; q.Limit > 0 && n >= q.Limit {
			return nil
		}
	}
	return dmg.err("the session list")
}

// Exchanges implements [capture.Store].
func (s *Store) Exchanges(ctx context.Context, sessionID string) iter.Seq2[*capture.Exchange, error] {
	return func(yield func(*capture.Exchange, error) bool) {
		scan(s, ctx, yield, func(txn *badger.Txn, next func() bool) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: exchangePrefix(nil, sessionID)})
			defer it.Close()
			return exchangesIn(&cursor{it: it}, sessionID, next, yield)
		})
	}
}

// exchangesIn is Exchanges' iteration with c, a cursor over the session's
// exchanges or over more.
func exchangesIn(c *cursor, sessionID string, next func() bool, yield func(*capture.Exchange, error) bool) error {
	prefix := exchangePrefix(nil, sessionID)
	it := c.seek(prefix, prefix)
	var dmg damage
	for ; it.ValidForPrefix(prefix); it.Next() {
		if !next() {
			return nil
		}
		item := it.Item()
		if len(item.Key()) != len(prefix)+8 {
			dmg.add(fmt.Sprintf("%q", item.Key()), "an exchange key of the wrong length")
			continue
		}
		id := tail8(item.Key())
		v, err := item.ValueCopy(nil)
		if err != nil {
			dmg.add(fmt.Sprintf("exchange %d", id), err.Error())
			continue
		}
		x, err := decodeExchange(id, sessionID, v)
		if err != nil {
			dmg.add(fmt.Sprintf("exchange %d", id), "its record does not decode")
			continue
		}
		if !yield(x, nil) {
			return nil
		}
	}
	c.past()
	return dmg.err(fmt.Sprintf("session %s: exchanges", sessionID))
}

// Exchange implements [capture.Store].
func (s *Store) Exchange(ctx context.Context, id uint64) (*capture.Exchange, error) {
	var x *capture.Exchange
	err := s.view(ctx, func(txn *badger.Txn) error {
		var err error
		x, err = exchangeIn(txn, id)
		return err
	})
	return x, err
}

// exchangeIn is Exchange in txn.
func exchangeIn(txn *badger.Txn, id uint64) (*capture.Exchange, error) {
	sid, _, err := getSID(txn, xindexKey(nil, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("badgerstore: exchange %d: %w", id, capture.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("badgerstore: exchange %d: %w", id, err)
	}
	item, err := txn.Get(exchangeKey(nil, sid, id))
	if err != nil {
		return nil, fmt.Errorf("badgerstore: exchange %d of session %q: %w", id, sid, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	return decodeExchange(id, sid, v)
}

// cursor positions an iterator for one session's records after another's.
// Read in ID order, a session's records begin right where the previous
// session's end, so that when the previous read ran to its end the
// iterator is there already, or a few steps before: a seek, which loads a
// block on every level, is spared.
type cursor struct {
	it *badger.Iterator
	// careful makes every positioning a seek (see snapshot.careful).
	careful *bool
	prefix  []byte // the last read's prefix
	// end is just past prefix's keys once the read went past them (nil
	// until then): no key lies from end up to the iterator's.
	end, buf []byte
}

// cursorSteps is how many keys seek steps over before it seeks.
const cursorSteps = 8

// seek positions the iterator at the first key at or after target, which
// lies in prefix (the keys a read goes over), and returns it. The caller
// calls past once its read has gone past the last key in prefix.
func (c *cursor) seek(target, prefix []byte) *badger.Iterator {
	it := c.it
	switch {
	case it.Valid() && bytes.Equal(it.Item().Key(), target):
		// In place (a session's record read again).
	case c.end != nil && bytes.Compare(target, c.end) >= 0 && (c.careful == nil || !*c.careful):
		// Nothing lies between end and the iterator's key: a target in
		// between finds the iterator in place, and one a little farther
		// a few steps on. Unless the iterator is then on a key in
		// prefix, it seeks all the same: a table block that fails its
		// checksum ends a table's iterator, and what follows it in the
		// table is read again only by a seek.
		for steps := 0; it.Valid() && bytes.Compare(it.Item().Key(), target) < 0 && steps < cursorSteps; steps++ {
			it.Next()
		}
		if !it.ValidForPrefix(prefix) || bytes.Compare(it.Item().Key(), target) < 0 {
			it.Seek(target)
		}
	default:
		it.Seek(target)
	}
	c.prefix, c.end = append(c.prefix[:0], prefix...), nil
	return it
}

// past notes that the read from the last seek went past the last key of
// its prefix.
func (c *cursor) past() {
	end := append(c.buf[:0], c.prefix...)
	c.buf = end
	for i := len(end) - 1; i >= 0; i-- {
		if end[i]++; end[i] != 0 {
			c.end = end[:i+1]
			return
		}
	}
	// The prefix was all 0xff: no key comes after its keys, and end stays
	// unknown.
}

// getSID reads a value that starts with a session ID (an exchange's index
// entry, a message's raw bytes) and returns the ID and the rest, copied.
func getSID(txn *badger.Txn, key []byte) (string, []byte, error) {
	item, err := txn.Get(key)
	if err != nil {
		return "", nil, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return "", nil, err
	}
	sid, rest, err := splitSID(v)
	if err != nil {
		return "", nil, fmt.Errorf("%w: key %q", err, key)
	}
	if len(rest) == 0 {
		rest = nil
	}
	return sid, rest, nil
}

// getRaw reads a message's session ID and raw bytes.
func getRaw(txn *badger.Txn, blobs string, seq uint64) (string, []byte, error) {
	key := rawKey(nil, seq)
	item, err := txn.Get(key)
	if err != nil {
		return "", nil, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return "", nil, err
	}
	return rawFromHead(txn, blobs, seq, key, v)
}

// rawCursor reads the raw bytes of messages in increasing seq order, as a
// session's listing asks for them, with one iterator over the raw keys:
// a session's messages are mostly neighbours there, so a step or two of
// the iterator replaces a point lookup (which probes every level) per
// message. It falls back to a seek when the next message is farther.
type rawCursor struct {
	txn   *badger.Txn
	blobs string
	it    *badger.Iterator
	key   []byte
}

// rawCursorSteps is how many keys the cursor steps over before it seeks.
const rawCursorSteps = 8

func newRawCursor(txn *badger.Txn, blobs string) *rawCursor {
	return &rawCursor{txn: txn, blobs: blobs,
		it: txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixRaw), PrefetchValues: false})}
}

func (c *rawCursor) Close() { c.it.Close() }

// read is getRaw for seq: a few steps forward from the last seq read, or
// a seek.
func (c *rawCursor) read(seq uint64) (string, []byte, error) {
	c.key = rawKey(c.key[:0], seq)
	it := c.it
	steps := 0
	for it.Valid() && bytes.Compare(it.Item().Key(), c.key) < 0 && steps < rawCursorSteps {
		it.Next()
		steps++
	}
	if !it.Valid() || !bytes.Equal(it.Item().Key(), c.key) {
		it.Seek(c.key) // farther on, or behind: a snapshot's cursor serves session after session
	}
	if !it.Valid() || !bytes.Equal(it.Item().Key(), c.key) {
		return "", nil, badger.ErrKeyNotFound
	}
	v, err := it.Item().ValueCopy(nil)
	if err != nil {
		return "", nil, err
	}
	return rawFromHead(c.txn, c.blobs, seq, c.key, v)
}

// rawFromHead completes a message's raw bytes from the value under its
// raw key: the first chunk, then the further chunks or the blob file.
func rawFromHead(txn *badger.Txn, blobs string, seq uint64, key, v []byte) (string, []byte, error) {
	sid, chunks, raw, err := splitRawHead(v)
	if err != nil {
		return "", nil, fmt.Errorf("%w: key %q", err, key)
	}
	if chunks == blobMarker {
		if blobs == "" {
			return "", nil, fmt.Errorf("%w: key %q points at a blob file in an in-memory store", errCorrupt, key)
		}
		sum := raw
		raw, err := os.ReadFile(blobPath(blobs, seq))
		if err != nil {
			return "", nil, fmt.Errorf("badgerstore: raw bytes of message %d: %w: %w", seq, capture.ErrDamaged, err)
		}
		if len(sum) == 4 && binary.BigEndian.Uint32(sum) != crc32.Checksum(raw, crcTable) {
			return "", nil, fmt.Errorf("badgerstore: raw bytes of message %d: the file %s fails its checksum: %w",
				seq, blobPath(blobs, seq), capture.ErrDamaged)
		}
		return sid, raw, nil
	}
	if chunks == packMarker {
		sum, r, ok := parsePackHead(raw)
		if !ok || blobs == "" {
			return "", nil, fmt.Errorf("%w: key %q: a pack reference that does not read", errCorrupt, key)
		}
		raw, err := readPacked(blobs, r)
		if err != nil {
			return "", nil, fmt.Errorf("badgerstore: raw bytes of message %d: %w: %w", seq, capture.ErrDamaged, err)
		}
		if sum != crc32.Checksum(raw, crcTable) {
			return "", nil, fmt.Errorf("badgerstore: raw bytes of message %d: the blob at %d of %s (%d bytes) fails its checksum: %w",
				seq, r.off, packPath(blobs, r.id), r.n, capture.ErrDamaged)
		}
		return sid, raw, nil
	}
	if len(raw) == 0 && chunks == 0 {
		return sid, nil, nil
	}
	raw = raw[:len(raw):len(raw)]
	if chunks > 0 {
		raw = slices.Grow(raw, int(chunks)*len(raw))
	}
	for i := uint32(1); i <= chunks; i++ {
		item, err := txn.Get(rawChunkKey(nil, seq, i))
		if err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				err = errCorrupt // not ErrNotFound: the message exists
			}
			return "", nil, fmt.Errorf("chunk %d of %d: %w", i, chunks, err)
		}
		if err := item.Value(func(v []byte) error {
			raw = append(raw, v...)
			return nil
		}); err != nil {
			return "", nil, err
		}
	}
	return sid, raw, nil
}

// Messages implements [capture.Store]. It walks the session's index records
// and, unless q.NoRaw, reads each message's raw bytes beside them.
func (s *Store) Messages(ctx context.Context, sessionID string, q capture.MessageQuery) iter.Seq2[*capture.Message, error] {
	return func(yield func(*capture.Message, error) bool) {
		scan(s, ctx, yield, func(txn *badger.Txn, next func() bool) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: messagePrefix(nil, sessionID)})
			defer it.Close()
			var raws *rawCursor
			if !q.NoRaw {
				raws = newRawCursor(txn, s.blobs)
				defer raws.Close()
			}
			return s.messagesIn(ctx, txn, &cursor{it: it}, raws, sessionID, q, next, yield)
		})
	}
}

// messagesIn is Messages' iteration in txn with c, a cursor over the
// session's messages or over more, and raws (nil with q.NoRaw).
func (s *Store) messagesIn(ctx context.Context, txn *badger.Txn, c *cursor, raws *rawCursor, sessionID string, q capture.MessageQuery,
	next func() bool, yield func(*capture.Message, error) bool) error {
	if q.After == 1<<64-1 {
		return nil
	}
	prefix := messagePrefix(nil, sessionID)
	n := 0
	var dmg damage
	it := c.seek(be8(bytes.Clone(prefix), q.After+1), prefix)
	for ; it.ValidForPrefix(prefix); it.Next() {
		if !next() {
			return nil
		}
		item := it.Item()
		if len(item.Key()) != len(prefix)+8 {
			dmg.add(fmt.Sprintf("%q", item.Key()), "a message key of the wrong length")
			continue
		}
		seq := tail8(item.Key())
		v, err := item.ValueCopy(nil)
		if err != nil {
			dmg.add(fmt.Sprintf("message %d", seq), err.Error())
			continue
		}
		m, err := decodeMessage(seq, sessionID, v)
		if err != nil {
			dmg.add(fmt.Sprintf("message %d", seq), "its record does not decode")
			continue
		}
		if !q.NoRaw {
			if _, m.Raw, err = raws.read(seq); err != nil {
				if errors.Is(err, capture.ErrClosed) || ctx.Err() != nil {
					return err
				}
				why := "its raw bytes do not read: " + err.Error()
				switch {
				case errors.Is(err, badger.ErrKeyNotFound):
					why = "its raw bytes are missing"
				case errors.Is(err, capture.ErrDamaged):
					why = "its raw bytes do not read: " + strings.TrimPrefix(err.Error(), "badgerstore: ")
					why = strings.TrimSuffix(why, ": "+capture.ErrDamaged.Error())
				}
				dmg.add(fmt.Sprintf("message %d", seq), why)
				continue
			}
		}
		if err := s.applyEdits(txn, m, q.NoRaw); err != nil {
			return err
		}
		if !yield(m, nil) {
			return nil
		}
		if n++; q.Limit > 0 && n >= q.Limit {
			return nil
		}
	}
	c.past()
	return dmg.err(fmt.Sprintf("session %s", sessionID))
}

// Message implements [capture.Store].
func (s *Store) Message(ctx context.Context, seq uint64) (*capture.Message, error) {
	var m *capture.Message
	err := s.view(ctx, func(txn *badger.Txn) error {
		var err error
		m, err = s.messageIn(txn, seq)
		return err
	})
	return m, err
}

// messageIn is Message in txn.
func (s *Store) messageIn(txn *badger.Txn, seq uint64) (*capture.Message, error) {
	sid, raw, err := getRaw(txn, s.blobs, seq)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("badgerstore: message %d: %w", seq, capture.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("badgerstore: message %d: %w", seq, err)
	}
	item, err := txn.Get(messageKey(nil, sid, seq))
	if err != nil {
		return nil, fmt.Errorf("badgerstore: message %d of session %q: %w", seq, sid, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	m, err := decodeMessage(seq, sid, v)
	if err != nil {
		return nil, err
	}
	m.Raw = raw
	return m, s.applyEdits(txn, m, false)
}

// LastIDs implements [capture.Store]. The values are high-water marks kept
// under their own key: deleting the session that held them does not lower
// them, so IDs are never handed out twice.
func (s *Store) LastIDs(ctx context.Context) (seq, exchange uint64, err error) {
	if err := s.enter(ctx); err != nil {
		return 0, 0, err
	}
	defer s.gate.leave()
	return s.lastSeq.Load(), s.lastX.Load(), nil
}

// damage collects what an iteration could not read, to report after
// everything it could: the error it makes wraps capture.ErrDamaged.
// (Records in a table block that fails its checksum are not met at all:
// Badger's iterators skip what they cannot read. Verify finds those.)
type damage struct {
	n     int      // records that did not read
	first []string // the first few of them, described
}

// damageShown is how many damaged records an error names.
const damageShown = 5

func (d *damage) add(what, why string) {
	if d.n++; len(d.first) < damageShown {
		d.first = append(d.first, what+" ("+why+")")
	}
}

// err is nil when nothing was damaged.
func (d *damage) err(where string) error {
	if d.n == 0 {
		return nil
	}
	more := ""
	if d.n > len(d.first) {
		more = fmt.Sprintf(", and %d more", d.n-len(d.first))
	}
	return &damageError{where, fmt.Sprintf("%d record(s) cannot be read: %s%s", d.n, strings.Join(d.first, ", "), more), d.n}
}

// damageError is what an iteration could not read (n records), where.
type damageError struct {
	where, what string
	n           int
}

func (e *damageError) Error() string { return "badgerstore: " + e.where + ": " + e.what }
func (e *damageError) Unwrap() error { return capture.ErrDamaged }
