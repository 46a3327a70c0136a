package badgerstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/y"
)

// Replaying Badger's memtable logs (*.mem) in a rebuild. A memtable's log
// holds what was written since its table was last flushed: a store killed
// or damaged before that flush has its newest records only there. Badger
// replays the log itself when the store opens; a rebuild, for a store that
// does not open, reads it here, as Badger does (badger/v4 memtable.go,
// logFile.iterate), never writing it.
//
// After the log's header, entries follow one another until the first that
// does not read (the log is preallocated and zeroed):
//
//	meta, userMeta byte; key length, value length, expiry as uvarints;
//	key (with its version, y.KeyWithTs); value; CRC-32C of all the above,
//	big endian.
//
// Entries of a transaction carry the bitTxn meta and are valid only once
// the entry that ends it (bitFinTxn, its value the commit's version in
// decimal) has been read: a transaction cut by the damage is not applied.

// Badger's meta bits for transactions (badger/v4 value.go).
const (
	bitTxn    = 1 << 6
	bitFinTxn = 1 << 7
)

// badgerInternal prefixes Badger's own keys (the transaction marker).
var badgerInternal = []byte("!badger!")

// replayMemLogs writes into wb every record of the memtable logs in dir
// that reads, at its version, oldest log first. It returns how many
// records it wrote, and what it could not read (empty when a log ended
// where its writer had stopped).
func replayMemLogs(dir string, wb *badger.WriteBatch) (n int, lost []string) {
	names, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	// Named by a growing number, zero-padded (00001.mem): sorted by name
	// is oldest first.
	slices.Sort(names)
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			lost = append(lost, fmt.Sprintf("%s does not read: %v", filepath.Base(name), err))
			continue
		}
		k, why := replayMemLog(b, wb)
		n += k
		if why != "" {
			lost = append(lost, filepath.Base(name)+": "+why)
		}
	}
	return n, lost
}

// replayMemLog replays one log's bytes into wb; why says where and why it
// stopped before the log's end, if it did.
func replayMemLog(b []byte, wb *badger.WriteBatch) (n int, why string) {
	type rec struct {
		key     []byte
		version uint64
		vs      y.ValueStruct
	}
	var txn []rec
	var txnVersion uint64
	apply := func(r rec) error {
		if bytes.HasPrefix(r.key, badgerInternal) {
			return nil
		}
		if err := copyRecord(wb, r.key, r.version, r.vs); err != nil {
			return err
		}
		n++
		return nil
	}
	off := logHeaderSize
	if len(b) < off {
		return 0, "shorter than its header"
	}
	for off < len(b) {
		e, size, ok := readLogEntry(b[off:])
		if !ok {
			if !allZero(b[off:min(len(b), off+64)]) {
				why = fmt.Sprintf("an entry at byte %d does not read (damaged or cut): what follows it is lost", off)
			}
			break
		}
		if len(e.key) < 8 {
			why = fmt.Sprintf("an entry at byte %d has no version: what follows it is lost", off)
			break
		}
		r := rec{key: y.ParseKey(e.key), version: y.ParseTs(e.key),
			vs: y.ValueStruct{Value: e.value, Meta: e.meta, UserMeta: e.userMeta, ExpiresAt: e.expiresAt}}
		switch {
		case e.meta&bitFinTxn != 0:
			v, err := strconv.ParseUint(string(e.value), 10, 64)
			if err != nil || v != txnVersion {
				why = fmt.Sprintf("a transaction's end at byte %d does not match its entries: what follows it is lost", off)
				return n, why
			}
			for _, r := range txn {
				if err := apply(r); err != nil {
					return n, "writing its records: " + err.Error()
				}
			}
			txn, txnVersion = txn[:0], 0
		case e.meta&bitTxn != 0:
			if txnVersion == 0 {
				txnVersion = r.version
			}
			if r.version != txnVersion {
				why = fmt.Sprintf("a transaction at byte %d was never ended: what follows it is lost", off)
				return n, why
			}
			r.vs.Meta &^= bitTxn
			txn = append(txn, r)
		default:
			if txnVersion != 0 {
				why = fmt.Sprintf("a transaction at byte %d was never ended: what follows it is lost", off)
				return n, why
			}
			if err := apply(r); err != nil {
				return n, "writing its records: " + err.Error()
			}
		}
		off += size
	}
	if len(txn) > 0 && why == "" {
		why = fmt.Sprintf("its last transaction (%d record(s)) was cut before its end, and is not applied", len(txn))
	}
	return n, why
}

type logEntry struct {
	meta, userMeta byte
	key, value     []byte
	expiresAt      uint64
}

// readLogEntry reads the entry at the start of b and its size; ok is false
// when none reads there (the zeroed end, a cut entry, a bad checksum).
func readLogEntry(b []byte) (e logEntry, size int, ok bool) {
	if len(b) < 2 {
		return e, 0, false
	}
	e.meta, e.userMeta = b[0], b[1]
	i := 2
	var v [3]uint64
	for j := range v {
		x, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return e, 0, false
		}
		v[j], i = x, i+k
	}
	klen, vlen := v[0], v[1]
	e.expiresAt = v[2]
	if klen == 0 || klen > uint64(len(b)) || vlen > uint64(len(b)) || uint64(i)+klen+vlen+4 > uint64(len(b)) {
		return e, 0, false
	}
	end := i + int(klen) + int(vlen)
	if crc32.Checksum(b[:end], y.CastagnoliCrcTable) != binary.BigEndian.Uint32(b[end:]) {
		return e, 0, false
	}
	e.key, e.value = b[i:i+int(klen)], b[i+int(klen):end]
	return e, end + 4, true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
