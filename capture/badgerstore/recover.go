package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/mcptape/mcptape/capture"
)

// Recovering a damaged store (mcptape verify --repair). The damaged store
// is never written: Recover copies it into a new directory and mends the
// copy, in two steps, each only when needed:
//
//  1. Badger's log files (the value log, *.vlog, and the memtable's log,
//     *.mem) begin with the id of the key that encrypts them. The store is
//     never encrypted, so that id is zero; damaged, it keeps Badger from
//     opening the store at all ("Invalid datakey id"). The copy gets it
//     back, and is opened once, which replays the memtable's log into the
//     tables.
//  2. When the copy still does not open (a damaged MANIFEST, a table whose
//     index is damaged), or its tables hold blocks that fail their
//     checksums, the store is rebuilt from its tables: every record of
//     every block that reads, at its version, into a new Badger store
//     (which keeps the newest version of each key, as the old one did).
//
// Then each session whose messages are fewer than its record counts is
// marked incomplete, the missing ones counted lost with a reason, and the
// new store is verified.

// logHeaderSize is the header of Badger's log files: the key id (8
// bytes), then the base IV of the encryption (12).
const logHeaderSize = 20

// VerifyLogs checks the headers of Badger's log files in dir (*.vlog,
// *.mem) without opening the store: a key id other than zero, in a store
// that is never encrypted, is damage that keeps the store from opening.
func VerifyLogs(dir string) []capture.Damage {
	var out []capture.Damage
	for _, name := range logFiles(dir) {
		if bad, id := damagedLogHeader(name); bad {
			out = append(out, capture.Damage{Where: logKind(name) + " " + filepath.Base(name), What: fmt.Sprintf(
				"its header is damaged (it names encryption key %d; this store is not encrypted), so the store does not open: "+
					"`mcptape verify --repair` recovers the store into a new directory", id)})
		}
	}
	return out
}

func logFiles(dir string) []string {
	var names []string
	for _, pat := range []string{"*.vlog", "*.mem"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		names = append(names, m...)
	}
	slices.Sort(names)
	return names
}

func logKind(name string) string {
	if strings.HasSuffix(name, ".mem") {
		return "memtable log"
	}
	return "value log"
}

// damagedLogHeader reports whether the log file at name names a key id,
// and which.
func damagedLogHeader(name string) (bool, uint64) {
	f, err := os.Open(name)
	if err != nil {
		return false, 0
	}
	defer f.Close()
	var h [8]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return false, 0 // shorter than a header: Badger rewrites it
	}
	id := binary.BigEndian.Uint64(h[:])
	return id != 0, id
}

// RecoverReport is what Recover did and found.
type RecoverReport struct {
	// Mended lists what was mended in the copy (log headers).
	Mended []string
	// Rebuilt is set when the store was rebuilt from its tables; Tables
	// is then how many were read, Records how many records they gave,
	// and Lost what could not be read (damaged blocks, tables that do not
	// open).
	Rebuilt bool
	Tables  int
	Records int
	Lost    []capture.Damage
	// Marked are the sessions marked with messages lost to the damage.
	Marked []string
	// Verify is the new store's own check.
	Verify *capture.VerifyReport
}

// Recover copies the store in src into the new directory dst, mending
// what it can (see above), and reports what it recovered and lost. src is
// only read; dst must not exist, and is removed again if Recover fails.
// No process may hold src while it runs.
func Recover(ctx context.Context, src, dst string, log *slog.Logger) (rep *RecoverReport, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Stat(dst); err == nil {
		return nil, fmt.Errorf("badgerstore: %s exists already: give a new directory to recover into", dst)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return nil, fmt.Errorf("badgerstore: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dst)
		}
	}()
	if err := copyTree(ctx, src, dst); err != nil {
		return nil, fmt.Errorf("badgerstore: copying %s to %s: %w", src, dst, err)
	}
	rep = &RecoverReport{}
	for _, name := range logFiles(dst) {
		if bad, id := damagedLogHeader(name); bad {
			if err := zeroKeyID(name); err != nil {
				return nil, fmt.Errorf("badgerstore: mending %s: %w", name, err)
			}
			rep.Mended = append(rep.Mended, fmt.Sprintf("the header of %s %s (it named encryption key %d)", logKind(name), filepath.Base(name), id))
		}
	}
	opts := &Options{Logger: log, MinFree: -1}
	rebuild := true
	if st, err := Open(dst, opts); err == nil {
		// Opened: Badger replayed its log; closing flushes it to a table.
		if err := st.Close(); err != nil {
			return nil, err
		}
		_, damage := VerifyTables(dst)
		rebuild = len(damage) > 0
	} else {
		log.Info("badger store: the copy does not open; rebuilding it from its tables", logKeyError, err)
	}
	if rebuild {
		if err := rep.rebuild(ctx, dst, log); err != nil {
			return nil, err
		}
	}
	st, err := Open(dst, opts)
	if err != nil {
		return nil, fmt.Errorf("badgerstore: the recovered store in %s does not open: %w", dst, err)
	}
	defer st.Close()
	if rep.Marked, err = st.markLost(ctx); err != nil {
		return nil, err
	}
	if rep.Verify, err = st.Verify(ctx); err != nil {
		return nil, err
	}
	return rep, nil
}

// zeroKeyID writes a zero key id into the header of the log file at name.
func zeroKeyID(name string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(make([]byte, 8), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyTree copies the regular files and directories under src to dst
// (which exists), but Badger's lock file.
func copyTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case !d.Type().IsRegular() || rel == "LOCK":
			return nil
		}
		return copyFile(path, to)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// badgerFiles are the names of Badger's own files in a store's directory.
func badgerFiles(dir string) []string {
	var out []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir():
		case strings.HasSuffix(n, ".sst"), strings.HasSuffix(n, ".vlog"), strings.HasSuffix(n, ".mem"),
			n == "MANIFEST", n == "KEYREGISTRY", n == "DISCARD", n == "LOCK":
			out = append(out, n)
		}
	}
	return out
}

// rebuild replaces the Badger files in dir by a store holding every record
// their tables give: the old files are moved aside, read table by table
// (a block that fails its checksum is skipped, the blocks after it are
// read), and written, each record at its version, into a new store.
func (rep *RecoverReport) rebuild(ctx context.Context, dir string, log *slog.Logger) error {
	rep.Rebuilt = true
	old, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), "."+filepath.Base(dir)+".tables-")
	if err != nil {
		return fmt.Errorf("badgerstore: %w", err)
	}
	defer os.RemoveAll(old)
	for _, n := range badgerFiles(dir) {
		if err := os.Rename(filepath.Join(dir, n), filepath.Join(old, n)); err != nil {
			return fmt.Errorf("badgerstore: %w", err)
		}
	}
	bopts, _ := (&Options{Logger: log}).badgerOptions(dir)
	db, err := badger.OpenManaged(bopts)
	if err != nil {
		return fmt.Errorf("badgerstore: creating the recovered store in %s: %w", dir, err)
	}
	wb := db.NewManagedWriteBatch()
	names, _ := filepath.Glob(filepath.Join(old, "*.sst"))
	slices.Sort(names)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			wb.Cancel()
			db.Close()
			return err
		}
		n, lost := copyTable(name, wb)
		rep.Records += n
		if lost != "" {
			rep.Lost = append(rep.Lost, capture.Damage{Where: "table " + filepath.Base(name), What: lost})
		} else {
			rep.Tables++
		}
	}
	// Then what was written after the last table, newer than any record
	// in one: the memtable logs, as Badger would have replayed them.
	n, lost := replayMemLogs(old, wb)
	rep.Records += n
	for _, l := range lost {
		rep.Lost = append(rep.Lost, capture.Damage{Where: "the memtable log", What: l})
	}
	err = wb.Flush()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("badgerstore: writing the recovered store in %s: %w", dir, err)
	}
	return nil
}

// copyTable writes every record of the table file at name that reads into
// wb, at its version, and says what it could not read.
func copyTable(name string, wb *badger.WriteBatch) (n int, lost string) {
	mf, err := z.OpenMmapFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, "it does not open: " + err.Error()
	}
	t, err := table.OpenTable(mf, table.Options{ReadOnly: true, ChkMode: options.OnBlockRead,
		BlockSize: badger.DefaultOptions("").BlockSize, Compression: options.Snappy})
	if err != nil {
		return 0, fmt.Sprintf("its index is damaged: its records are lost (%v)", err)
	}
	// Never DecrRef a table opened here: at zero references Badger
	// deletes the file (the iterator's own reference is given back).
	defer func() { _ = t.MmapFile.Close(-1) }()
	starts := t.KeySplits(1<<30, nil) // the first key of every block
	it := t.NewIterator(table.NOCACHE)
	defer it.Close()
	bad := 0
	for i, start := range starts {
		var next []byte
		if i+1 < len(starts) {
			next = []byte(starts[i+1])
		}
		got := 0
		for it.Seek([]byte(start)); it.Valid(); it.Next() {
			k := it.Key()
			if next != nil && y.CompareKeys(k, next) >= 0 {
				break
			}
			got++
			if bytes.HasPrefix(k, []byte("!badger!")) {
				continue
			}
			vs := it.ValueCopy()
			if err := copyRecord(wb, y.ParseKey(k), y.ParseTs(k), vs); err != nil {
				return n, "writing its records: " + err.Error()
			}
			n++
		}
		if got == 0 {
			bad++
		}
	}
	if bad > 0 {
		return n, fmt.Sprintf("%d of its %d blocks fail their checksums: the records in them are lost (the table held %d records in all)",
			bad, len(starts), t.KeyCount())
	}
	return n, ""
}

// Badger's meta bits (badger/v4 value.go).
const (
	bitDelete       = 1 << 0
	bitValuePointer = 1 << 1
)

func copyRecord(wb *badger.WriteBatch, key []byte, version uint64, vs y.ValueStruct) error {
	key = slices.Clone(key)
	switch {
	case vs.Meta&bitDelete != 0:
		return wb.DeleteAt(key, version)
	case vs.Meta&bitValuePointer != 0:
		return nil // in the value log, which this store does not use
	}
	e := badger.NewEntry(key, slices.Clone(vs.Value)).WithMeta(vs.UserMeta)
	e.ExpiresAt = vs.ExpiresAt
	return wb.SetEntryAt(e, version)
}

// lostReason is the LossReason of a session markLost marks.
func lostReason(n int, when time.Time) string {
	return fmt.Sprintf("%d message(s) were in a damaged part of the store and could not be recovered (mcptape verify --repair, %s)",
		n, when.Format(time.DateOnly))
}

// markLost finishes a recovered store: the messages whose raw bytes are
// gone or damaged are removed (their records alone would only fail every
// read), and every finished session that holds fewer messages than its
// record counts is marked incomplete, the missing ones counted lost. It
// returns the ids of the sessions marked.
func (s *Store) markLost(ctx context.Context) ([]string, error) {
	var sessions []*capture.Session
	for x, err := range s.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			return nil, err
		}
		sessions = append(sessions, x)
	}
	var ids []string
	now := time.Now()
	for _, x := range sessions {
		bad, err := s.unreadable(ctx, x.ID)
		if err == nil && len(bad) > 0 {
			err = s.dropMessages(ctx, x.ID, bad)
		}
		if err != nil {
			return ids, fmt.Errorf("badgerstore: recovering session %q: %w", x.ID, err)
		}
		if x.Status == capture.StatusOpen {
			continue // the next recorder recounts it (RepairOpenSessions)
		}
		n := 0
		for _, err := range s.Messages(ctx, x.ID, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				return ids, err
			}
			n++
		}
		missing := x.Messages - x.Lost - n
		if missing <= 0 {
			continue
		}
		x.Lost += missing
		x.Status, x.LossReason = capture.StatusIncomplete, lostReason(missing, now)
		if err := s.Write(ctx, &capture.Batch{Sessions: []*capture.Session{x}}); err != nil {
			return ids, fmt.Errorf("badgerstore: marking session %q: %w", x.ID, err)
		}
		ids = append(ids, x.ID)
	}
	return ids, nil
}

// unreadable lists the messages of a session whose raw bytes do not read.
func (s *Store) unreadable(ctx context.Context, sid string) ([]uint64, error) {
	var bad []uint64
	err := s.view(ctx, func(txn *badger.Txn) error {
		prefix := messagePrefix(nil, sid)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		defer it.Close()
		raws := newRawCursor(txn, s.blobs)
		defer raws.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if len(it.Item().Key()) != len(prefix)+8 {
				continue
			}
			seq := tail8(it.Item().Key())
			if _, _, err := raws.read(seq); err != nil {
				if errors.Is(err, capture.ErrClosed) || ctx.Err() != nil {
					return err
				}
				bad = append(bad, seq)
			}
		}
		return nil
	})
	return bad, err
}

// dropMessages deletes messages of a session, raw bytes and edits
// included.
func (s *Store) dropMessages(ctx context.Context, sid string, seqs []uint64) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.leave()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, seq := range seqs {
		if err := wb.Delete(messageKey(nil, sid, seq)); err != nil {
			return err
		}
		rk := rawKey(nil, seq)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: rk, PrefetchValues: false})
		for it.Rewind(); it.Valid(); it.Next() {
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				it.Close()
				return err
			}
		}
		it.Close()
		if s.extras.isEdited(seq) {
			if err := deleteEdits(txn, seq, wb.Delete); err != nil {
				return err
			}
		}
		if s.blobs != "" {
			_ = os.Remove(blobPath(s.blobs, seq))
		}
	}
	return wb.Flush()
}
