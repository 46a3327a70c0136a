package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/mcptape/mcptape/capture"
)

var _ capture.Verifier = (*Store)(nil)

// crcTable is CRC-32C, which hardware computes: the checksum of blob files.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Verify implements [capture.Verifier]: it reads the whole store and
// reports its damage: every block of
// every table against its checksum (naming the damaged table files), then
// every session, exchange and message record and every message's raw
// bytes (the blob files against their checksums), and each session's
// messages against its count. It reads only; what it cannot read it
// reports rather than fails on. The error is for Verify itself failing
// (the context ended, the store closed).
func (s *Store) Verify(ctx context.Context) (*capture.VerifyReport, error) {
	r := &capture.VerifyReport{}
	if s.blobs != "" {
		r.Tables, r.Damage = VerifyTables(s.dir)
	}
	// Sessions: the time index and the records must name the same ones.
	indexed := map[string]bool{}
	var sessions []*capture.Session
	err := s.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixTime), PrefetchValues: false})
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); len(k) >= len(prefixTime)+timeKeyLen {
				indexed[string(k[len(prefixTime)+timeKeyLen:])] = true
			}
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixSession)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			id := string(it.Item().Key()[len(prefixSession):])
			v, err := it.Item().ValueCopy(nil)
			var x *capture.Session
			if err == nil {
				x, err = decodeSession(id, v)
			}
			if err != nil {
				r.Damage = append(r.Damage, capture.Damage{Where: "session " + id, What: "its record does not read: " + err.Error()})
				continue
			}
			if !indexed[id] {
				r.Damage = append(r.Damage, capture.Damage{Where: "session " + id, What: "missing from the time index: listings leave it out"})
			}
			delete(indexed, id)
			sessions = append(sessions, x)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range indexed {
			if !yield(id) {
				return
			}
		}
	}) {
		r.Damage = append(r.Damage, capture.Damage{Where: "session " + id, What: "listed in the time index, but its record is missing"})
	}
	r.Sessions = len(sessions)
	for _, x := range sessions {
		if err := s.verifySession(ctx, x, r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// verifySession reads one session's exchanges and messages, raw bytes
// included.
func (s *Store) verifySession(ctx context.Context, x *capture.Session, r *capture.VerifyReport) error {
	where := "session " + x.ID
	for _, err := range s.Exchanges(ctx, x.ID) {
		switch {
		case err == nil:
			r.Exchanges++
		case errors.Is(err, capture.ErrDamaged):
			r.Damage = append(r.Damage, capture.Damage{Where: where, What: damageText(err)})
		default:
			return err
		}
	}
	n, bad := 0, 0
	for _, err := range s.Messages(ctx, x.ID, capture.MessageQuery{}) {
		switch {
		case err == nil:
			n++
		case errors.Is(err, capture.ErrDamaged):
			r.Damage = append(r.Damage, capture.Damage{Where: where, What: damageText(err)})
			var de *damageError
			if errors.As(err, &de) {
				bad += de.n
			}
		default:
			return err
		}
	}
	r.Messages += n
	// Records in a damaged table block are not met at all: a finished
	// session's record counts every message decoded, Lost those never
	// stored.
	if want := x.Messages - x.Lost; x.Status != capture.StatusOpen && n+bad < want {
		r.Damage = append(r.Damage, capture.Damage{Where: where, What: fmt.Sprintf(
			"%d of the %d messages its record counts are missing (a damaged table block holds them or hides them)", want-n-bad, want)})
	}
	return nil
}

// damageText is what a damage error says was damaged, without where.
func damageText(err error) string {
	var de *damageError
	if errors.As(err, &de) {
		return de.what
	}
	return strings.TrimPrefix(err.Error(), "badgerstore: ")
}

// VerifyTables checks every block of every table file in dir against its
// checksum, without opening the store (so also when a damaged table keeps
// Badger from opening it). It returns how many tables it read and what is
// damaged.
func VerifyTables(dir string) (int, []capture.Damage) {
	names, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		return 0, []capture.Damage{{Where: dir, What: err.Error()}}
	}
	slices.Sort(names)
	n := 0
	var out []capture.Damage
	for _, name := range names {
		d, ok := verifyTable(name)
		if !ok {
			continue // compacted away meanwhile
		}
		n++
		if d != "" {
			out = append(out, capture.Damage{Where: "table " + filepath.Base(name), What: d})
		}
	}
	return n, out
}

// verifyTable checks one table file; ok is false when the file is gone.
func verifyTable(name string) (damage string, ok bool) {
	mf, err := z.OpenMmapFile(name, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", false
		}
		return "it does not open: " + err.Error(), true
	}
	// The store's own table options (Badger's defaults, which it builds
	// tables with): blocks compressed with Snappy, checksums on read.
	t, err := table.OpenTable(mf, table.Options{ReadOnly: true, ChkMode: options.OnBlockRead,
		BlockSize: badger.DefaultOptions("").BlockSize, Compression: options.Snappy})
	if err != nil {
		// OpenTable closed mf. A table whose index is damaged keeps
		// Badger from opening the store at all.
		return "its index is damaged, so the store does not open: `mcptape verify --repair` recovers the rest " +
			"into a new directory (the records in this table are lost): " + err.Error(), true
	}
	// Never DecrRef a table opened here: at zero references Badger
	// deletes the file. Unmap it instead.
	defer func() { _ = t.MmapFile.Close(-1) }()
	if err := verifyChecksum(t); err == nil {
		return "", true
	}
	return fmt.Sprintf("a data block fails its checksum: reads skip the records it holds, and listings what follows it "+
		"(the table holds %d records in all)", t.KeyCount()), true
}

// verifyChecksum is Table.VerifyChecksum, which dereferences a nil block
// on the very damage it looks for (Badger v4.9.6): the panic is the
// answer too.
func verifyChecksum(t *table.Table) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("checksum verification failed: %v", p)
		}
	}()
	return t.VerifyChecksum()
}
