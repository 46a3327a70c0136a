package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
)

var _ capture.Editor = (*Store)(nil)

// Keys of the dashboard's edits (see the package documentation).
const (
	prefixEdit  = "e/"
	prefixLabel = "l/"
)

func editPrefix(b []byte, seq uint64) []byte { return be8(append(b, prefixEdit...), seq) }

func editKey(b []byte, seq uint64, version uint32) []byte {
	return binary.BigEndian.AppendUint32(editPrefix(b, seq), version)
}

func editChunkKey(b []byte, seq uint64, version, i uint32) []byte {
	return binary.BigEndian.AppendUint32(editKey(b, seq, version), i)
}

func labelKey(sid string) []byte { return append([]byte(prefixLabel), sid...) }

// editHeadLen is the length of an edit head's key; chunk keys are 4 longer.
const editHeadLen = len(prefixEdit) + 8 + 4

// extras remembers which messages have edits and which sessions have
// labels, so that reads of the (many) others cost no lookup. It is loaded
// when the store opens and marked before an edit commits: a reader that
// finds a mark but no edit in its snapshot reads the record as it is.
type extras struct {
	mu       sync.RWMutex
	edited   map[uint64]bool
	labelled map[string]bool
}

func (e *extras) isEdited(seq uint64) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.edited[seq]
}

func (e *extras) isLabelled(sid string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.labelled[sid]
}

// loadExtras scans the edit and label keys.
func (s *Store) loadExtras(txn *badger.Txn) error {
	s.extras.edited = map[uint64]bool{}
	s.extras.labelled = map[string]bool{}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixEdit)})
	for it.Rewind(); it.Valid(); it.Next() {
		if k := it.Item().Key(); len(k) == editHeadLen {
			s.extras.edited[binary.BigEndian.Uint64(k[len(prefixEdit):])] = true
		}
	}
	it.Close()
	it = txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixLabel)})
	for it.Rewind(); it.Valid(); it.Next() {
		s.extras.labelled[string(it.Item().Key()[len(prefixLabel):])] = true
	}
	it.Close()
	return nil
}

// appendEditHead encodes an edit head: time, note, the number of further
// chunks, then the first chunk.
func appendEditHead(b []byte, t time.Time, note string, chunks uint32) []byte {
	b = appendTime(b, t)
	b = appendString(b, note)
	return binary.AppendUvarint(b, uint64(chunks))
}

// editHeads returns the head keys of message seq's edits, oldest first.
func editHeads(txn *badger.Txn, seq uint64) [][]byte {
	prefix := editPrefix(nil, seq)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	var heads [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		if k := it.Item().Key(); len(k) == editHeadLen {
			heads = append(heads, it.Item().KeyCopy(nil))
		}
	}
	return heads
}

// readEdit reads the edit under head key k.
func readEdit(txn *badger.Txn, k []byte) (capture.Edit, error) {
	item, err := txn.Get(k)
	if err != nil {
		return capture.Edit{}, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return capture.Edit{}, err
	}
	d := decoder{b: v}
	e := capture.Edit{Version: int(binary.BigEndian.Uint32(k[len(k)-4:]))}
	e.Time = d.time()
	e.Note = d.string()
	chunks := d.uvarint()
	if d.err != nil || chunks > 1<<31 {
		return capture.Edit{}, fmt.Errorf("%w: edit %q", errCorrupt, k)
	}
	raw := append([]byte(nil), d.b...)
	for i := uint32(1); i <= uint32(chunks); i++ {
		item, err := txn.Get(binary.BigEndian.AppendUint32(bytes.Clone(k), i))
		if err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				err = errCorrupt
			}
			return capture.Edit{}, fmt.Errorf("edit %q chunk %d of %d: %w", k, i, chunks, err)
		}
		if err := item.Value(func(v []byte) error { raw = append(raw, v...); return nil }); err != nil {
			return capture.Edit{}, err
		}
	}
	e.Raw = raw
	return e, nil
}

// applyEdits gives m its latest edit, if the snapshot holds one; with
// noRaw it reads the edit all the same, for Size.
func (s *Store) applyEdits(txn *badger.Txn, m *capture.Message, noRaw bool) error {
	if !s.extras.isEdited(m.Seq) {
		return nil
	}
	heads := editHeads(txn, m.Seq)
	if len(heads) == 0 {
		return nil
	}
	e, err := readEdit(txn, heads[len(heads)-1])
	if err != nil {
		return fmt.Errorf("badgerstore: edits of message %d: %w", m.Seq, err)
	}
	m.Edited += len(heads)
	m.Size = len(e.Raw)
	if !noRaw {
		m.Raw = e.Raw
	}
	return nil
}

// withLabels gives x the labels set with SetLabels, if any.
func (s *Store) withLabels(txn *badger.Txn, x *capture.Session) error {
	if !s.extras.isLabelled(x.ID) {
		return nil
	}
	item, err := txn.Get(labelKey(x.ID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return item.Value(func(v []byte) error {
		d := decoder{b: v}
		n := d.count(1)
		labels := make([]string, n)
		for i := range labels {
			labels[i] = d.string()
		}
		if err := d.done("labels of session " + x.ID); err != nil {
			return err
		}
		x.Labels = labels
		if n == 0 {
			x.Labels = nil
		}
		return nil
	})
}

// EditMessage implements [capture.Editor]. An edit is written with its
// chunks first and its head last, so an interrupted edit is not seen.
func (s *Store) EditMessage(ctx context.Context, seq uint64, raw []byte, note string) (int, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.gate.leave()
	if err := s.writable(); err != nil {
		return 0, err
	}
	if !json.Valid(raw) {
		return 0, fmt.Errorf("badgerstore: edit of message %d: the new content is not valid JSON: %w", seq, capture.ErrInvalidEdit)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	w := s.newWriter()
	defer w.discard()
	if _, err := w.txn.Get(rawKey(nil, seq)); errors.Is(err, badger.ErrKeyNotFound) {
		return 0, fmt.Errorf("badgerstore: message %d: %w", seq, capture.ErrNotFound)
	} else if err != nil {
		return 0, fmt.Errorf("badgerstore: edit of message %d: %w", seq, err)
	}
	if len(note) > w.rawLimit/2 {
		return 0, fmt.Errorf("badgerstore: edit of message %d: the note is too long: %w", seq, capture.ErrInvalidEdit)
	}
	version := uint32(len(editHeads(w.txn, seq)) + 1)
	// Chunked like raw bytes; the head holds the time, the note and the
	// chunk count before its chunk.
	first, rest := chunkEdit(raw, 32+len(note), w.rawLimit)
	for i, c := range rest {
		if err := w.set(editChunkKey(nil, seq, version, uint32(i+1)), c); err != nil {
			return 0, fmt.Errorf("badgerstore: edit of message %d: %w", seq, err)
		}
	}
	head := append(appendEditHead(nil, time.Now(), note, uint32(len(rest))), first...)
	if err := w.set(editKey(nil, seq, version), head); err != nil {
		return 0, fmt.Errorf("badgerstore: edit of message %d: %w", seq, err)
	}
	s.extras.mu.Lock()
	s.extras.edited[seq] = true
	s.extras.mu.Unlock()
	if err := w.commit(); err != nil {
		return 0, fmt.Errorf("badgerstore: edit of message %d: %w", seq, err)
	}
	return int(version), nil
}

// MessageEdits implements [capture.Editor].
func (s *Store) MessageEdits(ctx context.Context, seq uint64) ([]capture.Edit, error) {
	var out []capture.Edit
	err := s.view(ctx, func(txn *badger.Txn) error {
		sid, raw, err := getRaw(txn, s.blobs, seq)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("badgerstore: message %d: %w", seq, capture.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("badgerstore: message %d: %w", seq, err)
		}
		item, err := txn.Get(messageKey(nil, sid, seq))
		if err != nil {
			return fmt.Errorf("badgerstore: message %d of session %q: %w", seq, sid, err)
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		m, err := decodeMessage(seq, sid, v)
		if err != nil {
			return err
		}
		out = append(out, capture.Edit{Version: 0, Time: m.Time, Raw: raw})
		if !s.extras.isEdited(seq) {
			return nil
		}
		for _, k := range editHeads(txn, seq) {
			e, err := readEdit(txn, k)
			if err != nil {
				return fmt.Errorf("badgerstore: edits of message %d: %w", seq, err)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// SetLabels implements [capture.Editor].
func (s *Store) SetLabels(ctx context.Context, sessionID string, labels []string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.leave()
	if err := s.writable(); err != nil {
		return err
	}
	if slices.Contains(labels, "") {
		return fmt.Errorf("badgerstore: labels of session %q: a label is empty: %w", sessionID, capture.ErrInvalidEdit)
	}
	v := binary.AppendUvarint(nil, uint64(len(labels)))
	for _, l := range labels {
		v = appendString(v, l)
	}
	if len(v) > s.rawLimit {
		return fmt.Errorf("badgerstore: labels of session %q: too long: %w", sessionID, capture.ErrInvalidEdit)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(sessionKey(sessionID)); errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("badgerstore: session %q: %w", sessionID, capture.ErrNotFound)
		} else if err != nil {
			return err
		}
		s.extras.mu.Lock()
		s.extras.labelled[sessionID] = true
		s.extras.mu.Unlock()
		return txn.Set(labelKey(sessionID), v)
	})
}

// deleteEdits deletes message seq's edits through del.
func deleteEdits(txn *badger.Txn, seq uint64, del func([]byte) error) error {
	prefix := editPrefix(nil, seq)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if err := del(it.Item().KeyCopy(nil)); err != nil {
			return err
		}
	}
	return nil
}

// chunkEdit splits raw into a first chunk that fits beside room bytes of
// head, and chunks of at most limit bytes.
func chunkEdit(raw []byte, room, limit int) (first []byte, rest [][]byte) {
	n := max(limit-room, 1)
	if len(raw) <= n {
		return raw, nil
	}
	first, raw = raw[:n], raw[n:]
	for len(raw) > 0 {
		c := min(len(raw), limit)
		rest = append(rest, raw[:c:c])
		raw = raw[c:]
	}
	return first, rest
}

// writable returns why the store takes no edits now, or nil: it is open
// read-only, or short of space.
func (s *Store) writable() error {
	if s.readOnly {
		return ErrReadOnly
	}
	return s.space.check()
}
