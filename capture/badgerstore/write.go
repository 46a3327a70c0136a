package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
)

var _ capture.RawCopier = (*Store)(nil)

// CopiesRaw implements capture.RawCopier: Write keeps no message's Raw.
func (s *Store) CopiesRaw() {}

// Write implements [capture.Store]. A batch is one Badger transaction, so it
// is atomic, unless it exceeds Badger's transaction size (about 15% of
// MemTableSize, 1.2 MiB by default, so a batch of some two thousand typical
// messages, or one holding a Raw of a megabyte or more): then it is
// committed in several transactions, in order, and a failure can leave a
// prefix of it stored.
//
// When Badger refuses a batch for one of its records (a value too large
// for it), Write stores the batch again record by record, so that only
// that record is lost: it returns a [*capture.PartialWriteError] naming
// the records it could not store. When space is short (see
// [Options.MinFree] and [Options.MaxSize]) it refuses the batch's messages
// and exchanges, writing only its session records while it can, with an
// error wrapping [capture.ErrStoreFull].
//
// Write copies what it needs; it neither keeps nor changes b.
func (s *Store) Write(ctx context.Context, b *capture.Batch) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.leave()
	if s.readOnly {
		return ErrReadOnly
	}
	if b == nil || b.Len() == 0 {
		return nil
	}
	if err := validate(b); err != nil {
		return err
	}
	// Admission first: over the size bound it waits for retention, which
	// deletes through DeleteSession and so needs wmu.
	need := batchBytes(b)
	adm, why := s.space.admit(need)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	switch adm {
	case admitSessions:
		refused := &capture.Batch{Exchanges: b.Exchanges, Messages: b.Messages}
		s.space.refused.Add(int64(len(b.Messages)))
		if len(b.Sessions) > 0 {
			if err := s.writeBatch(&capture.Batch{Sessions: b.Sessions}); err != nil {
				return fmt.Errorf("badgerstore: write: %w (and %w)", err, why)
			}
		}
		if refused.Len() == 0 {
			return nil
		}
		return &capture.PartialWriteError{Refused: refused, Err: why}
	case admitNone:
		s.space.refused.Add(int64(len(b.Messages)))
		return why
	}
	err := s.writeBatch(b)
	if err != nil && recordFault(ctx, err) {
		return s.writeEach(ctx, b, err)
	}
	if err == nil {
		s.size.wrote(need)
	}
	return err
}

// recordFault reports whether a failed write may have failed for one of
// its records (Badger refusing a value), so that writing its records one
// by one would store the others: not when the context ended, the store
// closed, or the file system failed.
func recordFault(ctx context.Context, err error) bool {
	var errno syscall.Errno
	switch {
	case ctx.Err() != nil, errors.Is(err, capture.ErrClosed), errors.Is(err, badger.ErrDBClosed),
		errors.Is(err, badger.ErrBlockedWrites), errors.As(err, &errno):
		return false
	}
	return true
}

// writeEach writes b record by record, after the batch as a whole failed
// with first: every record Badger accepts is stored, and the error names
// the others.
func (s *Store) writeEach(ctx context.Context, b *capture.Batch, first error) error {
	refused := &capture.Batch{}
	var why error
	one := func(r *capture.Batch) bool {
		err := s.writeBatch(r)
		if err == nil {
			s.size.wrote(batchBytes(r))
			return true
		}
		if why == nil {
			why = err
		}
		return false
	}
	for _, x := range b.Sessions {
		if !one(&capture.Batch{Sessions: []*capture.Session{x}}) {
			refused.Sessions = append(refused.Sessions, x)
		}
	}
	for _, x := range b.Exchanges {
		if !one(&capture.Batch{Exchanges: []*capture.Exchange{x}}) {
			refused.Exchanges = append(refused.Exchanges, x)
			s.log.Warn("badger store: an exchange record was refused; the rest of its batch is stored",
				logKeySession, x.SessionID, logKeyExchange, x.ID, logKeyErr, why)
		}
	}
	for _, m := range b.Messages {
		if !one(&capture.Batch{Messages: []*capture.Message{m}}) {
			refused.Messages = append(refused.Messages, m)
			s.log.Warn("badger store: a message was refused; the rest of its batch is stored",
				logKeySession, m.SessionID, logKeySeq, m.Seq, logKeyErr, why)
		}
	}
	if refused.Len() == 0 {
		return nil
	}
	if refused.Len() == b.Len() {
		return fmt.Errorf("badgerstore: write: %w", first)
	}
	return &capture.PartialWriteError{Refused: refused, Err: fmt.Errorf("badgerstore: write: %w", why)}
}

// writeBatch writes b as one transaction, split when Badger says it is too
// big. s.wmu is held.
func (s *Store) writeBatch(b *capture.Batch) (err error) {
	w := s.newWriter()
	defer w.discard()
	defer func() {
		switch {
		case err != nil:
			// Part of it may be committed (a split), with its part of
			// the count: the store counts again when asked.
			s.sessions.set(0, false)
		case w.counted:
			s.sessions.set(w.sessions, true)
		}
	}()
	// One arena for all keys and values: slices of it stay valid as it
	// grows, since append never overwrites bytes already handed out.
	size := 64 * b.Len()
	for _, m := range b.Messages {
		size += 96 + len(m.SessionID)*2 + len(m.Method) + len(m.ID)
		if isBlob(s.blobs, m.Raw) {
			size += 64 // a blob's head, not its bytes
		} else {
			size += min(len(m.Raw), s.rawLimit)
		}
		if m.SSE != nil {
			size += len(m.SSE.Prefix) + len(m.SSE.Suffix) + len(m.SSE.Whole)
		}
	}
	for _, x := range b.Exchanges {
		size += 256
		for _, h := range [...]map[string][]string{x.RequestHeader, x.ResponseHeader} {
			for k, vs := range h {
				size += len(k) + 2
				for _, v := range vs {
					size += len(v) + 1
				}
			}
		}
	}
	for _, x := range b.Sessions {
		size += 256 + len(x.ClientCapabilities) + len(x.ServerCapabilities)
	}
	w.arena = make([]byte, 0, size)

	for _, x := range b.Sessions {
		if err := w.session(x); err != nil {
			return err
		}
	}
	// IDs above the high-water mark cannot be stored yet, unless earlier
	// in this batch: only the others need a look at what they replace.
	// (A batch's exchanges come in no particular order: comparing with
	// the highest so far instead looked up half of them, in vain.)
	lastX, lastSeq := s.lastX.Load(), s.lastSeq.Load()
	mark := lastX
	var seen map[uint64]struct{} // this batch's exchanges above mark, once there are two
	for i, x := range b.Exchanges {
		existing := x.ID <= mark
		if !existing && i > 0 {
			if seen == nil {
				seen = make(map[uint64]struct{}, len(b.Exchanges))
				for _, y := range b.Exchanges[:i] {
					seen[y.ID] = struct{}{}
				}
			}
			_, existing = seen[x.ID]
		}
		if err := w.exchange(x, existing); err != nil {
			return err
		}
		if seen != nil {
			seen[x.ID] = struct{}{}
		}
		lastX = max(lastX, x.ID)
	}
	for _, m := range b.Messages {
		if err := w.message(m, m.Seq <= lastSeq); err != nil {
			return err
		}
		lastSeq = max(lastSeq, m.Seq)
	}
	if lastX != s.lastX.Load() || lastSeq != s.lastSeq.Load() {
		if err := w.set([]byte(keyLast), be8(be8(nil, lastSeq), lastX)); err != nil {
			return err
		}
	}
	// Raise the marks before committing, so that LastIDs is never below a
	// record a reader can see, and keep them on failure: part of the batch
	// may have been committed, and marks too high only cost a lookup.
	s.lastX.Store(lastX)
	s.lastSeq.Store(lastSeq)
	if err := w.commit(); err != nil {
		return fmt.Errorf("badgerstore: write: %w", err)
	}
	return nil
}

func validate(b *capture.Batch) error {
	// A session id is in the key of every record of its session: one
	// past the bound is refused before a key is built for it.
	for _, x := range b.Sessions {
		if x == nil {
			return errors.New("badgerstore: nil session in batch")
		}
		if len(x.ID) > capture.MaxSessionIDLen {
			return fmt.Errorf("badgerstore: session: %w", capture.CheckSessionID(x.ID))
		}
	}
	for _, x := range b.Exchanges {
		if x == nil {
			return errors.New("badgerstore: nil exchange in batch")
		}
		if len(x.SessionID) > capture.MaxSessionIDLen {
			return fmt.Errorf("badgerstore: exchange %d: %w", x.ID, capture.CheckSessionID(x.SessionID))
		}
	}
	for _, m := range b.Messages {
		if m == nil {
			return errors.New("badgerstore: nil message in batch")
		}
		if len(m.SessionID) > capture.MaxSessionIDLen {
			return fmt.Errorf("badgerstore: message %d: %w", m.Seq, capture.CheckSessionID(m.SessionID))
		}
	}
	return nil
}

// writer is one Write's transaction, split in several when Badger says it
// is too big. Its Gets see its own pending writes, so several records with
// one ID in a batch behave like consecutive batches.
type writer struct {
	db  *badger.DB
	txn *badger.Txn
	// sessions is the count of session records with the batch's new ones,
	// kept when counted is (see keySessions).
	sessions int64
	counted  bool
	arena    []byte
	rawLimit int
	blobs    string
	cache    *blobCache
	packs    *packs
}

func (s *Store) newWriter() *writer {
	w := &writer{db: s.db, txn: s.db.NewTransaction(true), rawLimit: s.rawLimit, blobs: s.blobs, cache: s.blobCache, packs: s.packs}
	w.sessions, w.counted = s.sessions.get()
	return w
}

// cut returns what was appended to the arena since start.
func (w *writer) cut(start int) []byte {
	return w.arena[start:len(w.arena):len(w.arena)]
}

func (w *writer) set(k, v []byte) error {
	err := w.txn.Set(k, v)
	if errors.Is(err, badger.ErrTxnTooBig) {
		if err = w.split(); err == nil {
			err = w.txn.Set(k, v)
		}
	}
	return err
}

func (w *writer) delete(k []byte) error {
	err := w.txn.Delete(k)
	if errors.Is(err, badger.ErrTxnTooBig) {
		if err = w.split(); err == nil {
			err = w.txn.Delete(k)
		}
	}
	return err
}

func (w *writer) split() error {
	if err := w.txn.Commit(); err != nil {
		return err
	}
	w.txn = w.db.NewTransaction(true)
	return nil
}

func (w *writer) commit() error { return w.txn.Commit() }

func (w *writer) discard() { w.txn.Discard() }

// get calls fn with the value under k, reporting whether there was one.
func (w *writer) get(k []byte, fn func(v []byte) error) (bool, error) {
	item, err := w.txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, item.Value(fn)
}

func (w *writer) session(x *capture.Session) error {
	key := sessionKey(x.ID)
	var old timeKey
	found, err := w.get(key, func(v []byte) error {
		if len(v) < timeKeyLen {
			return fmt.Errorf("%w: session %q", errCorrupt, x.ID)
		}
		copy(old[:], v)
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case !found && w.counted:
		// In the transaction that adds the record: a write split in
		// several leaves the count of what it committed.
		w.sessions++
		if err := w.set([]byte(keySessions), be8(nil, uint64(w.sessions))); err != nil {
			return err
		}
	case !found:
		// Not counted: a count stored before must not outlive this.
		if err := w.delete([]byte(keySessions)); err != nil {
			return err
		}
	}
	tk := makeTimeKey(x.Start)
	if found && old != tk {
		if err := w.delete(timeIndexKey(nil, old, x.ID)); err != nil {
			return err
		}
	}
	start := len(w.arena)
	w.arena = appendSession(w.arena, x)
	if err := w.set(key, w.cut(start)); err != nil {
		return err
	}
	return w.set(timeIndexKey(nil, tk, x.ID), nil)
}

// exchange writes x; existing says an exchange with its ID may be stored
// already, possibly under another session.
func (w *writer) exchange(x *capture.Exchange, existing bool) error {
	xi := xindexKey(nil, x.ID)
	if existing {
		var old string
		found, err := w.get(xi, func(v []byte) error {
			var err error
			old, _, err = splitSID(v)
			return err
		})
		if err != nil {
			return err
		}
		if found && old != x.SessionID {
			if err := w.delete(exchangeKey(nil, old, x.ID)); err != nil {
				return err
			}
		}
	}
	start := len(w.arena)
	w.arena = exchangeKey(w.arena, x.SessionID, x.ID)
	key := w.cut(start)
	start = len(w.arena)
	w.arena = appendExchange(w.arena, x)
	if err := w.set(key, w.cut(start)); err != nil {
		return err
	}
	start = len(w.arena)
	w.arena = appendSID(w.arena, x.SessionID)
	return w.set(xi, w.cut(start))
}

// message writes m's index record and raw bytes; existing says a message
// with its Seq may be stored already, possibly under another session. This
// is the hot path: keys and small values go into the arena, and chunks past
// the first are slices of m.Raw, which Badger copies on commit.
func (w *writer) message(m *capture.Message, existing bool) error {
	var first []byte
	var rest [][]byte
	var chunks uint32
	if !isBlob(w.blobs, m.Raw) {
		first, rest = chunkRaw(m.Raw, m.SessionID, w.rawLimit)
		chunks = uint32(len(rest))
	} else {
		// Written before the index that points at it is committed: a crash
		// in between leaves an unreferenced file or pack tail, never a
		// dangling index. The head holds the blob's CRC-32C, which reads
		// check: a blob file has no checksum of its own. (Older heads hold
		// none.)
		sum := crc32.Checksum(m.Raw, crcTable)
		first, chunks = binary.BigEndian.AppendUint32(nil, sum), blobMarker
		var err error
		switch {
		case w.moveBlob(m):
		case w.packs != nil:
			var r packRef
			if r, err = w.packs.add(m.Seq, m.Raw); err == nil {
				// Before the head, in its transaction or an earlier one (a
				// split commits what came before): a recorded end is never
				// short of a recorded blob.
				err = w.set(packEndKey(r.id), be8(nil, uint64(r.off+r.n)))
			}
			first, chunks = appendPackHead(nil, sum, r), packMarker
		default:
			err = writeBlob(blobPath(w.blobs, m.Seq), m.Raw, w.cache)
		}
		if err != nil {
			return fmt.Errorf("badgerstore: writing raw bytes of message %d: %w", m.Seq, err)
		}
	}
	start := len(w.arena)
	w.arena = rawKey(w.arena, m.Seq)
	rk := w.cut(start)
	if existing {
		var old string
		var oldChunks uint32
		var oldPack packRef
		var oldPacked bool
		found, err := w.get(rk, func(v []byte) error {
			var err error
			var first []byte
			old, oldChunks, first, err = splitRawHead(v)
			oldPack, oldPacked = packRefOf(oldChunks, first)
			return err
		})
		if err != nil {
			return err
		}
		if found && old != m.SessionID {
			if err := w.delete(messageKey(nil, old, m.Seq)); err != nil {
				return err
			}
		}
		switch oldChunks {
		case blobMarker:
			if chunks != blobMarker {
				_ = os.Remove(blobPath(w.blobs, m.Seq))
			}
			oldChunks = 0
		case packMarker:
			if oldPacked {
				w.packs.remove([]packRef{oldPack})
			}
			oldChunks = 0
		}
		for i := uint32(len(rest)) + 1; i <= oldChunks; i++ {
			if err := w.delete(rawChunkKey(nil, m.Seq, i)); err != nil {
				return err
			}
		}
	}
	start = len(w.arena)
	w.arena = messageKey(w.arena, m.SessionID, m.Seq)
	mk := w.cut(start)
	start = len(w.arena)
	w.arena = appendMessage(w.arena, m)
	if err := w.set(mk, w.cut(start)); err != nil {
		return err
	}
	start = len(w.arena)
	w.arena = append(appendRawHead(w.arena, m.SessionID, chunks), first...)
	if err := w.set(rk, w.cut(start)); err != nil {
		return err
	}
	for i, c := range rest {
		if err := w.set(rawChunkKey(nil, m.Seq, uint32(i+1)), c); err != nil {
			return err
		}
	}
	return nil
}

// DeleteSession implements [capture.Store]. It deletes the session's
// messages and exchanges in batches, and the session record with its time
// index entry last, in one transaction: an interrupted delete leaves the
// session listed, to be deleted again.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.leave()
	if s.readOnly {
		return ErrReadOnly
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()

	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	item, err := txn.Get(sessionKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("badgerstore: session %q: %w", id, capture.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("badgerstore: delete session %q: %w", id, err)
	}
	var tk timeKey
	if err := item.Value(func(v []byte) error {
		if len(v) < timeKeyLen {
			return fmt.Errorf("%w: session %q", errCorrupt, id)
		}
		copy(tk[:], v)
		return nil
	}); err != nil {
		return err
	}

	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	n := 0
	del := func(key []byte) error {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return wb.Delete(key)
	}
	keysOnly := badger.IteratorOptions{PrefetchValues: false}
	var deleted []uint64 // edited messages
	var packed []packRef // blobs in packs, punched out once the delete is written
	// Messages: each index record, then its raw chunks, found with a
	// second iterator that only moves forward since Seqs ascend.
	scanMessages := func() error {
		opts := keysOnly
		opts.Prefix = messagePrefix(nil, id)
		it := txn.NewIterator(opts)
		defer it.Close()
		opts.Prefix = []byte(prefixRaw)
		raw := txn.NewIterator(opts)
		defer raw.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			if err := del(key); err != nil {
				return err
			}
			rk := rawKey(nil, tail8(key))
			if s.extras.isEdited(tail8(key)) {
				if err := deleteEdits(txn, tail8(key), del); err != nil {
					return err
				}
				deleted = append(deleted, tail8(key))
			}
			if s.blobs != "" {
				_ = os.Remove(blobPath(s.blobs, tail8(key)))
			}
			raw.Seek(rk)
			if raw.ValidForPrefix(rk) && bytes.Equal(raw.Item().Key(), rk) {
				if r, ok := itemPackRef(raw.Item()); ok {
					packed = append(packed, r)
				}
			}
			for ; raw.ValidForPrefix(rk); raw.Next() {
				if err := del(raw.Item().KeyCopy(nil)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	scanExchanges := func() error {
		opts := keysOnly
		opts.Prefix = exchangePrefix(nil, id)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			if err := del(key); err != nil {
				return err
			}
			if err := del(xindexKey(nil, tail8(key))); err != nil {
				return err
			}
		}
		return nil
	}
	err = scanMessages()
	if err == nil {
		err = scanExchanges()
	}
	if err == nil {
		err = wb.Flush()
	}
	if err == nil {
		s.packs.remove(packed)
	}
	if err == nil {
		count, counted := s.sessions.get()
		err = s.db.Update(func(txn *badger.Txn) error {
			if err := txn.Delete(timeIndexKey(nil, tk, id)); err != nil {
				return err
			}
			if err := txn.Delete(labelKey(id)); err != nil {
				return err
			}
			if counted {
				if err := txn.Set([]byte(keySessions), be8(nil, uint64(max(count-1, 0)))); err != nil {
					return err
				}
			} else if err := txn.Delete([]byte(keySessions)); err != nil {
				return err
			}
			return txn.Delete(sessionKey(id))
		})
		if counted {
			if err == nil {
				s.sessions.set(max(count-1, 0), true)
			} else {
				s.sessions.set(0, false)
			}
		}
	}
	if err == nil {
		s.extras.mu.Lock()
		for _, seq := range deleted {
			delete(s.extras.edited, seq)
		}
		delete(s.extras.labelled, id)
		s.extras.mu.Unlock()
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return err
		}
		return fmt.Errorf("badgerstore: delete session %q: %w", id, err)
	}
	return nil
}

// isBlob says whether raw goes to a blob (a file or a pack) in a store
// with a blob directory, rather than into Badger.
func isBlob(blobs string, raw []byte) bool { return blobs != "" && len(raw) >= blobThreshold }

// itemPackRef is where the blob of the raw head item is, when it is in a
// pack.
func itemPackRef(item *badger.Item) (r packRef, ok bool) {
	_ = item.Value(func(v []byte) error {
		if _, chunks, first, err := splitRawHead(v); err == nil {
			r, ok = packRefOf(chunks, first)
		}
		return nil
	})
	return r, ok
}

// moveBlob moves m.File, which holds Raw already (a result that arrived
// through a spill file), into place as m's blob file, and reports whether
// it did.
func (w *writer) moveBlob(m *capture.Message) bool {
	if m.File == nil {
		return false
	}
	f, err := m.File.MoveTo(blobPath(w.blobs, m.Seq))
	if err != nil {
		return false
	}
	w.cache.written(f)
	return true
}

// writeBlob writes a blob file and hands it to c (see blobCache). A new
// file is created without O_TRUNC: on ext4 (auto_da_alloc) truncating on
// open makes close start writing the file back at once. A blob already
// there (a message stored again) is replaced whole.
func writeBlob(path string, b []byte, c *blobCache) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	c.written(f)
	return nil
}

// blobMarker, as a raw head's chunk count, says the raw bytes are in a blob
// file (blobs/<seq as 16 hex digits>) rather than in Badger.
const blobMarker = ^uint32(0)

func blobPath(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%016x", seq))
}
