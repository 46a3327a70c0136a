package spool

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// Dir is the spool folder inside a data directory.
const Dir = "spool"

// Ext ends every spool file's name.
const Ext = ".spool"

const magic = "mcptape-spool 1\n"

// maxRecord bounds one record's payload: a recorder batch is at most a few
// MiB of raw bytes (plus one message up to its size limit).
const maxRecord = 512 << 20

// ErrFormat is returned for a file that is not a spool of this version.
var ErrFormat = errors.New("not an mcptape spool file")

// ErrLowDisk is returned by Write when the disk holding the spool has less
// free space than Options.MinFree: recording stops before the disk fills.
var ErrLowDisk = errors.New("the disk is nearly full")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is one frame's payload.
type record struct {
	Sessions  []*capture.Session
	Exchanges []*capture.Exchange
	Messages  []*capture.Message
	// End is set on the last record of a wrap that ended cleanly.
	End bool
}

// Options configures a Writer. Nil means defaults.
type Options struct {
	// SyncEvery bounds how long written records may wait before an fsync.
	// Zero means one second.
	SyncEvery time.Duration
	// MinFree is the free space below which Write refuses (ErrLowDisk)
	// instead of filling the disk. Zero means 256 MiB; negative turns the
	// check off.
	MinFree int64
}

// Writer is a [capture.Writer] that appends a recorder's batches to a spool
// file. It is safe for concurrent use.
type Writer struct {
	mu       sync.Mutex
	f        *os.File
	path     string
	o        Options
	synced   time.Time
	dirty    bool
	freeAt   time.Time // when free space was last measured
	lowDisk  bool
	closed   bool
	enc      bytes.Buffer
	unlocker func()
}

var _ capture.Writer = (*Writer)(nil)

// Create makes a new spool in dataDir/spool and locks it for this process.
// name (the wrapped server's) goes into the file name, for people looking
// at the folder.
func Create(dataDir, name string, opts *Options) (*Writer, error) {
	dir := filepath.Join(dataDir, Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	base := fmt.Sprintf("%s-%d-%s", time.Now().UTC().Format("20060102-150405"), os.Getpid(), hex.EncodeToString(rb[:]))
	if n := fileSafe(name); n != "" {
		base += "-" + n
	}
	// Made under a name the ingester does not look at, locked, then
	// renamed: an owner never sees a spool whose wrap has not locked it.
	path := filepath.Join(dir, base+Ext)
	tmp := filepath.Join(dir, "."+base+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating a spool file: %w", err)
	}
	unlock, err := lock(f)
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("locking %s: %w", tmp, err)
	}
	w := &Writer{f: f, path: tmp, unlocker: unlock}
	if opts != nil {
		w.o = *opts
	}
	if w.o.SyncEvery <= 0 {
		w.o.SyncEvery = time.Second
	}
	if w.o.MinFree == 0 {
		w.o.MinFree = 256 << 20
	}
	if _, err := f.WriteString(magic); err != nil {
		w.abandon()
		return nil, fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		w.abandon()
		return nil, fmt.Errorf("naming the spool file: %w", err)
	}
	w.path = path
	return w, nil
}

// fileSafe keeps the letters, digits, '-' and '_' of s, at most 40.
func fileSafe(s string) string {
	var b []byte
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b = append(b, c)
		}
		if len(b) == 40 {
			break
		}
	}
	return string(b)
}

func (w *Writer) abandon() {
	w.unlocker()
	w.f.Close()
	os.Remove(w.path)
}

// Path is the spool file's path.
func (w *Writer) Path() string { return w.path }

// LastIDs implements capture.Writer: a spool numbers from 1, and the owner
// renumbers on ingest.
func (w *Writer) LastIDs(context.Context) (uint64, uint64, error) { return 0, 0, nil }

// Write implements capture.Writer: it appends b as one record.
func (w *Writer) Write(ctx context.Context, b *capture.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return w.append(&record{Sessions: b.Sessions, Exchanges: b.Exchanges, Messages: b.Messages})
}

func (w *Writer) append(r *record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return capture.ErrClosed
	}
	if err := w.checkFree(); err != nil {
		return err
	}
	w.enc.Reset()
	w.enc.Write(make([]byte, 8))
	if err := gob.NewEncoder(&w.enc).Encode(r); err != nil {
		return fmt.Errorf("encoding a spool record: %w", err)
	}
	frame := w.enc.Bytes()
	payload := frame[8:]
	if len(payload) > maxRecord {
		return fmt.Errorf("a spool record of %d bytes is over the %d-byte bound", len(payload), maxRecord)
	}
	binary.BigEndian.PutUint32(frame[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(frame[4:8], crc32.Checksum(payload, castagnoli))
	if _, err := w.f.Write(frame); err != nil {
		return fmt.Errorf("writing %s: %w", w.path, err)
	}
	w.dirty = true
	if time.Since(w.synced) >= w.o.SyncEvery || r.End {
		w.sync()
	}
	return nil
}

func (w *Writer) sync() {
	if w.dirty {
		_ = w.f.Sync()
		w.dirty = false
	}
	w.synced = time.Now()
}

// freeEvery bounds how often Write measures the free space.
const freeEvery = 2 * time.Second

func (w *Writer) checkFree() error {
	if w.o.MinFree < 0 {
		return nil
	}
	if time.Since(w.freeAt) >= freeEvery {
		w.freeAt = time.Now()
		if free, err := freeSpace(filepath.Dir(w.path)); err == nil {
			w.lowDisk = free < w.o.MinFree
		}
	}
	if w.lowDisk {
		return fmt.Errorf("%w: less than %d MiB free where the spool is (%s); recording stops until there is room again", ErrLowDisk, w.o.MinFree>>20, filepath.Dir(w.path))
	}
	return nil
}

// Close writes the End record, syncs, and releases the file: the owner
// may now ingest the rest and delete it.
func (w *Writer) Close() error {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return nil
	}
	err := w.append(&record{End: true})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.sync()
	w.unlocker()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Record is one record read back from a spool.
type Record struct {
	// Batch holds the record's sessions, exchanges and messages.
	Batch *capture.Batch
	// End is set on the last record of a wrap that ended cleanly.
	End bool
	// Offset is where the next record starts in the file.
	Offset int64
}

// Read yields the readable records of the spool at path from byte offset
// from (0: the start). It stops at the end of the file, or at a frame cut
// short or failing its checksum (a record being written, or the last one
// of a wrap that died mid-write): such a frame is never yielded. Only an
// unreadable file, or one that is not a spool, yields an error.
func Read(path string, from int64) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(nil, err)
			return
		}
		defer f.Close()
		if from < int64(len(magic)) {
			head := make([]byte, len(magic))
			if _, err := io.ReadFull(f, head); err != nil || string(head) != magic {
				if err == io.ErrUnexpectedEOF || err == io.EOF {
					return // still being created
				}
				yield(nil, fmt.Errorf("%s: %w", path, ErrFormat))
				return
			}
			from = int64(len(magic))
		} else if _, err := f.Seek(from, io.SeekStart); err != nil {
			yield(nil, err)
			return
		}
		fi, err := f.Stat()
		if err != nil {
			yield(nil, err)
			return
		}
		size := fi.Size()
		br := bufio.NewReaderSize(f, 64<<10)
		off := from
		var hdr [8]byte
		for {
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(hdr[0:4])
			if n > maxRecord || off+8+int64(n) > size {
				return // cut short (or a length no writer wrote)
			}
			payload := make([]byte, n)
			if _, err := io.ReadFull(br, payload); err != nil {
				return
			}
			if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(hdr[4:8]) {
				return
			}
			var r record
			if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&r); err != nil {
				return
			}
			off += 8 + int64(n)
			rec := &Record{Batch: &capture.Batch{Sessions: r.Sessions, Exchanges: r.Exchanges, Messages: r.Messages}, End: r.End, Offset: off}
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// Files lists the spool files in dataDir, oldest name first.
func Files(dataDir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dataDir, Dir, "*"+Ext))
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Running reports whether the wrap that writes path still runs (holds its
// lock).
func Running(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return held(f)
}
