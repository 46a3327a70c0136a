package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptape/mcptape/capture"
)

var _ capture.Store = (*Store)(nil)

// schemaVersion is the version of the key layout and record encodings this
// package writes and reads. Version 2 appended the upstream's instants
// (Exchange.Forwarded, UpstreamHeaders) to exchange records, version 3 a
// session's leg, route and command (Session.Leg, Route, Command) and an
// exchange's Rewritten (after its instants, only when set); an older
// store is read as it is (its records lack them) and marked with the
// current version on open, so that an older mcptape refuses it rather than
// misreading new records.
const schemaVersion = 3

// Errors callers branch on.
var (
	// ErrLocked is returned by Open when another process (or another Store
	// in this one) has the directory open. Badger allows one per directory.
	ErrLocked = errors.New("store directory is locked")
	// ErrSchema is returned by Open when the directory holds a store of a
	// schema version this build does not read, or something that is not an
	// mcptape store at all.
	ErrSchema = errors.New("unsupported store schema")
	// ErrReadOnly is returned by the writing methods of a store opened
	// with Options.ReadOnly.
	ErrReadOnly = errors.New("the store is open read-only")
)

// Options configures Open. A nil *Options means the defaults; every zero
// field means its default.
type Options struct {
	// Logger receives Badger's warnings and errors (its info messages at
	// debug level) and the store's own. Nil discards them.
	Logger *slog.Logger
	// InMemory keeps everything in memory and ignores the directory, for
	// tests. False stores on disk.
	InMemory bool
	// SyncWrites makes every Write fsync before it returns, so a batch
	// survives a power loss. False (the default) leaves that to the OS: a
	// written batch survives the process crashing but not the machine.
	// Syncing costs about two orders of magnitude of write throughput.
	SyncWrites bool
	// MemTableSize is the size of one memtable, Badger's in-memory write
	// buffer, and of the level-0 tables flushed from it. Up to four
	// memtables exist at a time and table building needs a few times the
	// size again, so under sustained load the store's memory is a few
	// dozen times this. Larger memtables absorb longer bursts and write a
	// little faster. It also bounds an atomic Write to about 15% of it.
	// Zero means 4 MiB (Badger's own default is 64 MiB); less than 1 MiB
	// is raised to 1 MiB.
	MemTableSize int64
	// BlockCacheSize is the cache of decompressed table blocks that reads
	// go through. Zero means 16 MiB (Badger's own default is 256 MiB); less
	// than 1 MiB is raised to 1 MiB.
	BlockCacheSize int64
	// MinFree is the free space, in bytes, the store keeps on its disk:
	// when a write would leave less, Write refuses the batch's messages
	// and exchanges (see Write) until there is room again. Badger writes
	// through memory-mapped files, and a full disk would kill the process
	// with SIGBUS, so this is what keeps a full disk from stopping the
	// proxy. Zero means DefaultMinFree (256 MiB); a positive value below
	// six memtables (24 MiB by default), Badger's working room, is
	// raised to that; negative turns the floor off. Ignored in memory.
	MinFree int64
	// MaxSize, when positive, bounds the store's size on disk (as Size
	// measures it): past 95% of it, the oldest sessions that are neither
	// open nor active in the last five minutes are deleted, whole, down
	// to 90%; when none can go, Write refuses messages as for MinFree.
	// Badger gives deleted records' space back as it compacts, so the
	// directory can stay above the bound for a while. Zero means no bound.
	MaxSize int64
	// MaxAge, when positive, deletes sessions whose latest traffic is
	// older than this, checked every 30 seconds: sessions that are open
	// or active in the last five minutes are kept (see Prune). Zero keeps
	// sessions whatever their age.
	MaxAge time.Duration
	// ReadOnly opens the store for reading only: nothing in the directory
	// is written, so it opens on a full disk, and Write, DeleteSession and
	// the edits return ErrReadOnly. A store a process was killed in
	// before it closed needs one read-write open (which replays Badger's
	// log) before it opens read-only.
	ReadOnly bool
	// BulkLoad sizes the store for one large write, such as an import: its
	// memtables (unless MemTableSize says otherwise) and tables are
	// smaller, so that the table builders of Badger's compactions, which
	// Badger keeps eight of at the size they grew to, stay small; and on
	// Linux the pages of the table files Badger has mapped are let go of
	// as the writes go, every 250ms (see releaseMapped; a store for
	// recording lets go of them every 5s), so that what was written does
	// not stay in the process's resident memory. False sizes it for
	// recording.
	BulkLoad bool
	// Registerer, if set, receives the store's metrics
	// (mcptape_store_recording_paused, _free_bytes,
	// _messages_refused_total, _sessions_deleted_total); Close
	// unregisters them.
	Registerer prometheus.Registerer
}

const (
	// bulkMemTableSize and bulkTableSize are Options.BulkLoad's memtable
	// and base table sizes.
	bulkMemTableSize = 1 << 20
	bulkTableSize    = 512 << 10

	defaultMemTableSize   = 4 << 20
	defaultBlockCacheSize = 16 << 20
	minSize               = 1 << 20
	// valueLogFileSize bounds Badger's value-log files. Raw bytes are
	// chunked below the value threshold, so nothing goes there: keep the
	// (sparse, preallocated) file small.
	valueLogFileSize = 16 << 20
	// blobThreshold: on disk, raw bytes this large or larger are written to
	// a file of their own in blobs/, not into Badger. Through the LSM tree,
	// compactions rewrite (decompress, recompress) every large tool result
	// several times, and Badger's memory-mapped value log would keep them in
	// the process's RSS: both cost hundreds of MB with a few 10 MiB results
	// streaming at once.
	blobThreshold = 256 << 10
	blobDir       = "blobs"
)

// badgerOptions turns Options into Badger's, avoiding the combinations on
// which badger.Open panics or fails: the value threshold must stay below
// 15% of the memtable, and the block cache must exist since compression is
// on.
//
// It also returns the largest value the store writes: raw bytes are cut
// into chunks below Badger's value threshold, so that every value stays in
// the LSM tree (Badger refuses larger values in memory, and on disk the
// value log would need garbage collection to give back deleted space).
// Raw bytes of blobThreshold or more go to files on disk instead.
func (o *Options) badgerOptions(dir string) (badger.Options, int) {
	memtable, table := o.MemTableSize, int64(1<<20)
	if memtable == 0 {
		memtable = defaultMemTableSize
		if o.BulkLoad {
			memtable = bulkMemTableSize
		}
	}
	if o.BulkLoad {
		table = bulkTableSize
	}
	memtable = max(memtable, minSize)
	cache := o.BlockCacheSize
	if cache == 0 {
		cache = defaultBlockCacheSize
	}
	cache = max(cache, minSize)
	// Values at or above the threshold go to the value log.
	threshold := min(int64(1<<20), memtable*15/100/2)
	limit := int(threshold - 1)

	var bo badger.Options
	if o.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	} else {
		bo = badger.DefaultOptions(dir)
	}
	var logger badger.Logger // a nil interface: Badger checks for it
	if o.Logger != nil {
		logger = badgerLogger{o.Logger}
	}
	return bo.
		WithLogger(logger).
		WithReadOnly(o.ReadOnly && !o.InMemory).
		// Corruption must not pass for missing records: every table
		// block read from disk, and every value from the value log, is
		// checked against its checksum (a CRC in hardware, next to free
		// beside decompression).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithSyncWrites(o.SyncWrites).
		WithMemTableSize(memtable).
		WithNumMemtables(4).
		// Table builders keep their buffers in a pool of eight (up to
		// twice a table's uncompressed size each, released only after
		// seconds of idleness): small tables keep that pool small.
		WithBaseTableSize(table).
		WithNumLevelZeroTables(5).
		WithNumLevelZeroTablesStall(15).
		WithBlockCacheSize(cache).
		WithValueThreshold(threshold).
		WithValueLogFileSize(valueLogFileSize).
		WithNumCompactors(2).
		WithMetricsEnabled(false).
		// Writes are serialized by the store, and reads use their own
		// snapshots: conflict detection would only cost.
		WithDetectConflicts(false), limit
}

// Store is a [capture.Store] on Badger. Open one with [Open]; close it with
// [Store.Close].
type Store struct {
	db       *badger.DB
	dir      string
	log      *slog.Logger
	rawLimit int // the largest value written; raw bytes are chunked to fit

	// wmu serializes Write and DeleteSession: they read old state (a
	// session's previous Start, an exchange's previous session) before
	// writing, which must not interleave.
	wmu sync.Mutex

	lastSeq atomic.Uint64 // high-water marks, persisted under keyLast
	lastX   atomic.Uint64

	// Every method holds the gate while it uses db, so that Close does not
	// pull the database out from under a running iterator.
	gate      gate
	closeOnce sync.Once
	closeErr  error
	blobs     string // directory of large raw bytes; "" in memory
	blobCache *blobCache
	packs     *packs // nil where blobs keep a file each
	extras    extras // which messages have edits, which sessions labels
	sessions  sessionCount
	size      sizeCache
	space     *space // the free-space floor and the size bound
	readOnly  bool
	// unmapper lets go of the mapped table files' pages now and then
	// (a writable store on disk; often for Options.BulkLoad); nil
	// otherwise.
	unmapper *unmapper
	unreg    func() // unregisters the metrics
}

// Open opens the store in dir, creating the directory and an empty store if
// needed. It fails with an error wrapping [ErrLocked] if another process has
// the directory open, and [ErrSchema] if the directory holds something this
// version cannot read.
func Open(dir string, opts *Options) (s *Store, err error) {
	if opts == nil {
		opts = &Options{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !opts.InMemory {
		if opts.ReadOnly {
			if err := existingDir(dir); err != nil {
				return nil, err
			}
		} else if err := prepareDir(dir); err != nil {
			return nil, err
		}
	}
	bopts, rawLimit := opts.badgerOptions(dir)
	db, err := openBadger(bopts)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("badgerstore: %s is in use by another mcptape process: stop it, "+
				"or use the running recorder's API or dashboard instead of opening the store: %w", dir, ErrLocked)
		}
		// Badger wraps the cause as text, not with %w.
		if opts.ReadOnly && strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error()) {
			return nil, fmt.Errorf("badgerstore: %s: %w: the process that wrote it was killed before closing it, "+
				"and reading it needs Badger to replay its log, which writes", dir, ErrUnclean)
		}
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}
	s = &Store{db: db, dir: dir, log: log, rawLimit: rawLimit, readOnly: opts.ReadOnly}
	s.space = newSpace(s, opts, bopts.MemTableSize)
	if !opts.InMemory {
		s.blobs = filepath.Join(dir, blobDir)
		if !opts.ReadOnly {
			if err := os.MkdirAll(s.blobs, 0o700); err != nil {
				db.Close()
				return nil, fmt.Errorf("badgerstore: %w", err)
			}
		}
	}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	if opts.Registerer != nil {
		if s.unreg, err = s.registerSpace(opts.Registerer); err != nil {
			db.Close()
			return nil, err
		}
	}
	if s.blobs != "" && !opts.ReadOnly {
		s.blobCache = newBlobCache()
		s.packs = newPacks(s.blobs, s.blobCache)
		if s.packs != nil {
			s.trimPacks(log)
		}
	}
	s.space.start()
	if !opts.InMemory && !opts.ReadOnly {
		s.unmapper = startUnmapper(dir, opts.BulkLoad)
	}
	log.Debug("badger store open", logKeyDir, dir, logKeyLastSeq, s.lastSeq.Load(), logKeyLastExchange, s.lastX.Load())
	return s, nil
}

func prepareDir(dir string) error {
	if dir == "" {
		return errors.New("badgerstore: no directory given (set Options.InMemory for a store in memory)")
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("badgerstore: create store directory: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("badgerstore: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("badgerstore: %s is a file, not a directory: give the directory the store lives in (it is created if missing)", dir)
	}
	return nil
}

// existingDir checks that dir is a store's directory, for a read-only open.
func existingDir(dir string) error {
	if dir == "" {
		return errors.New("badgerstore: no directory given")
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("badgerstore: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("badgerstore: %s is a file, not a store's directory", dir)
	}
	return nil
}

// openBadger is badger.Open, with its option panics turned into errors.
func openBadger(o badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("badger rejected the options: %v", r)
		}
	}()
	return badger.Open(o)
}

// init checks the schema version, writing it into an empty store, and loads
// the high-water marks.
func (s *Store) init() error {
	if s.readOnly {
		return s.db.View(s.initTxn)
	}
	return s.db.Update(s.initTxn)
}

// initTxn is init's work in txn, which is read-only (and then never
// written to) when the store is.
func (s *Store) initTxn(txn *badger.Txn) error {
	item, err := txn.Get([]byte(keyVersion))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		it := txn.NewIterator(badger.IteratorOptions{})
		it.Rewind()
		empty := !it.Valid()
		it.Close()
		if !empty {
			return fmt.Errorf("badgerstore: %s holds a Badger database with no mcptape schema version: "+
				"it is not an mcptape store; give an empty or new directory: %w", s.dir, ErrSchema)
		}
		if s.readOnly {
			break // an empty store: nothing to read
		}
		if err := txn.Set([]byte(keyVersion), []byte(strconv.Itoa(schemaVersion))); err != nil {
			return err
		}
		if err := txn.Set([]byte(keySessions), be8(nil, 0)); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("badgerstore: read schema version: %w", err)
	default:
		v, err := item.ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("badgerstore: read schema version: %w", err)
		}
		n, perr := strconv.Atoi(string(v))
		switch {
		case perr != nil:
			return fmt.Errorf("badgerstore: %s: schema version %q is not a number: the store is corrupt: %w", s.dir, v, ErrSchema)
		case n > schemaVersion:
			return fmt.Errorf("badgerstore: %s: schema version %d is newer than this mcptape reads (%d): upgrade mcptape: %w", s.dir, n, schemaVersion, ErrSchema)
		case n >= 1 && n < schemaVersion:
			// Additive: older records decode as they are.
			if s.readOnly {
				break
			}
			if err := txn.Set([]byte(keyVersion), []byte(strconv.Itoa(schemaVersion))); err != nil {
				return err
			}
		case n != schemaVersion:
			return fmt.Errorf("badgerstore: %s: unknown schema version %d (this mcptape reads %d): %w", s.dir, n, schemaVersion, ErrSchema)
		}
	}
	if err := s.loadExtras(txn); err != nil {
		return err
	}
	if err := s.loadSessionCount(txn); err != nil {
		return err
	}
	return s.loadLast(txn)
}

// loadLast loads the high-water marks: the larger of keyLast and the
// highest keys present, in case a write was cut short after its records
// but before keyLast.
func (s *Store) loadLast(txn *badger.Txn) error {
	var seq, x uint64
	item, err := txn.Get([]byte(keyLast))
	switch {
	case err == nil:
		err = item.Value(func(v []byte) error {
			if len(v) != 16 {
				return fmt.Errorf("%w: %s", errCorrupt, keyLast)
			}
			seq, x = tail8(v[:8]), tail8(v[8:])
			return nil
		})
		if err != nil {
			return err
		}
	case !errors.Is(err, badger.ErrKeyNotFound):
		return err
	}
	last := func(prefix string) uint64 {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), Reverse: true})
		defer it.Close()
		it.Seek(prefixEnd(prefix))
		// Raw chunk keys have 4 bytes after the Seq: read the 8 after
		// the prefix.
		if !it.Valid() {
			return 0
		}
		if key := it.Item().Key(); len(key) >= len(prefix)+8 {
			return tail8(key[:len(prefix)+8])
		}
		return 0
	}
	s.lastSeq.Store(max(seq, last(prefixRaw)))
	s.lastX.Store(max(x, last(prefixXIndex)))
	return nil
}

// prefixEnd is the smallest key after every key with the prefix, for
// reverse seeks. Prefixes here end in '/', so incrementing the last byte
// never carries.
func prefixEnd(prefix string) []byte {
	b := []byte(prefix)
	b[len(b)-1]++
	return b
}

// Close waits for running calls and iterations to end (an iteration stops at
// its next record with ErrClosed), then flushes and closes the database.
// Later calls return [capture.ErrClosed]; closing again returns nil. Do not
// call Close from inside a loop over one of the store's iterators: it would
// wait for that loop.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.space.close() // retention deletes through the gate: stop it first
		if s.unreg != nil {
			s.unreg()
		}
		s.gate.close()
		s.unmapper.stop()
		s.packs.close()
		s.blobCache.close()
		s.closeErr = s.db.Close()
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("badgerstore: close: %w", s.closeErr)
		}
	})
	if !first {
		return nil
	}
	return s.closeErr
}

// gate counts the calls using the database and turns new ones away once
// closed.
type gate struct {
	mu     sync.Mutex
	closed atomic.Bool
	wg     sync.WaitGroup
}

// enter admits a call, or returns ErrClosed; a call admitted must leave.
func (g *gate) enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() {
		return capture.ErrClosed
	}
	g.wg.Add(1)
	return nil
}

func (g *gate) leave() { g.wg.Done() }

func (g *gate) close() {
	g.mu.Lock()
	g.closed.Store(true)
	g.mu.Unlock()
	g.wg.Wait()
}

// enter admits a call with ctx: ctx's error first, then ErrClosed.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.gate.enter()
}

// Log keys.
const (
	logKeyDir          = "dir"
	logKeyLastSeq      = "lastSeq"
	logKeyLastExchange = "lastExchange"
	logKeyComponent    = "component"
	logKeySession      = "session"
	logKeyError        = "error"
	logKeyPack         = "pack"
)

// badgerLogger sends Badger's log lines to slog. Badger logs routine events
// (table opens, compactions) at info, so those go to debug.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug-4, f, a) }

func (b badgerLogger) log(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if !b.l.Enabled(ctx, level) {
		return
	}
	b.l.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(f, a...)), logKeyComponent, "badger")
}
