package spool

import (
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
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// Dir is the spool folder inside a data directory.
const Dir = "spool"

// DamagedDir is the folder, inside Dir, where an owner keeps the spools it
// could not read whole, for a person to look at.
const DamagedDir = "damaged"

// Ext ends every spool file's name.
const Ext = ".spool"

// The first line of a spool says its format: 2 is written; 1 (records
// without a sync marker, count or raw bytes after the gob) is still read.
const (
	magic1 = "mcptape-spool 1\n"
	magic2 = "mcptape-spool 2\n"
)

// syncMark begins every frame of a version 2 spool, so that a reader can
// find the next whole frame past damaged bytes.
var syncMark = [4]byte{0xf5, 'M', 'T', 0x02}

// frameHead is a version 2 frame's header: syncMark, the payload's length,
// the CRC-32C of the message count and the payload, the message count.
const frameHead = 16

// maxFrame bounds one frame's payload by what a live recorder puts in one
// batch: one message up to its MaxMessageSize (64 MiB by default) beside at
// most 8 MiB of others, and their records. A reader takes a frame that
// claims more for damage, and never allocates for it.
const maxFrame = 80 << 20

// splitAt is the payload size past which a writer writes a batch as
// several records.
const splitAt = 64<<20 + 8<<20

// ErrFormat is returned for a file that is not a spool of a version this
// mcptape reads.
var ErrFormat = errors.New("not an mcptape spool file")

// ErrLowDisk is returned by Write when the disk holding the spool has less
// free space than Options.MinFree: recording stops before the disk fills.
var ErrLowDisk = errors.New("the disk is nearly full")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is one frame's payload: an encoding/gob stream of one record, then
// (version 2) the raw bytes of the messages in Blobs, one after the other.
type record struct {
	Sessions  []*capture.Session
	Exchanges []*capture.Exchange
	Messages  []*capture.Message
	// End is set on the last record of a wrap that ended cleanly.
	End bool
	// Traced says the wrap exports these records' calls as spans itself
	// (Options.Traced); an owner does not export them again.
	Traced bool
	// Written counts the messages the spool's writer has written, this
	// record's included: past damaged bytes, the next record says how
	// many were lost.
	Written int64
	// Blobs are the messages whose raw bytes follow the gob (their Raw is
	// nil in it): a long stream frame the writer read from its file.
	Blobs []blob
}

type blob struct {
	Index int   // in Messages
	Len   int64 // bytes
}

// Options configures a Writer. Nil means defaults.
type Options struct {
	// SyncEvery bounds how long written records may wait before an fsync.
	// Zero means one second.
	SyncEvery time.Duration
	// Traced says the writer's process exports its calls as spans itself
	// (`wrap --otlp`): every record says so, and an owner that exports
	// spans too leaves them out (IngestOptions.Traced), so that no call is
	// exported twice.
	Traced bool
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
	size     int64 // the file's length: where the next frame starts
	written  int64 // messages written
}

var (
	_ capture.Writer         = (*Writer)(nil)
	_ capture.RawReaderTaker = (*Writer)(nil)
)

// TakesRawReaders implements capture.RawReaderTaker: a message whose raw
// bytes are in a file (a long line) is copied from it into the spool,
// never held in memory whole.
func (w *Writer) TakesRawReaders() {}

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
	w.size = int64(len(magic2))
	if _, err := f.WriteString(magic2); err != nil {
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

// Write implements capture.Writer: it appends b as one record, or as
// several when it is larger than a frame may be.
func (w *Writer) Write(ctx context.Context, b *capture.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &record{Sessions: b.Sessions, Exchanges: b.Exchanges}
	var files []capture.RawReader
	size := 0
	for _, m := range b.Messages {
		n := len(m.Raw)
		rr, isFile := m.File.(capture.RawReader)
		isFile = isFile && m.Raw == nil
		if isFile {
			n = int(rr.Len())
		}
		if size+n > splitAt && len(r.Messages) > 0 {
			if err := w.append(r, files); err != nil {
				return err
			}
			r, files, size = &record{}, nil, 0
		}
		if m.File != nil {
			// The file is the recorder's, and not for gob.
			c := *m
			c.File = nil
			m = &c
		}
		if isFile {
			r.Blobs = append(r.Blobs, blob{Index: len(r.Messages), Len: rr.Len()})
			files = append(files, rr)
		}
		r.Messages = append(r.Messages, m)
		size += n + 512
	}
	return w.append(r, files)
}

// append writes r as one frame, with the raw bytes of files (r.Blobs)
// after its gob.
func (w *Writer) append(r *record, files []capture.RawReader) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return capture.ErrClosed
	}
	if err := w.checkFree(); err != nil {
		return err
	}
	r.Written = w.written + int64(len(r.Messages))
	r.Traced = w.o.Traced
	w.enc.Reset()
	w.enc.Write(make([]byte, frameHead+4))
	if err := gob.NewEncoder(&w.enc).Encode(r); err != nil {
		return fmt.Errorf("encoding a spool record: %w", err)
	}
	frame := w.enc.Bytes()
	payload := int64(len(frame) - frameHead)
	for _, f := range files {
		payload += f.Len()
	}
	if payload > maxFrame {
		return fmt.Errorf("a spool record of %d bytes is over the %d-byte bound", payload, maxFrame)
	}
	copy(frame[0:4], syncMark[:])
	binary.BigEndian.PutUint32(frame[4:8], uint32(payload))
	binary.BigEndian.PutUint32(frame[12:16], uint32(len(r.Messages)))
	binary.BigEndian.PutUint32(frame[16:20], uint32(len(frame)-frameHead-4))
	crc := crc32.Update(0, castagnoli, frame[12:16])
	crc = crc32.Update(crc, castagnoli, frame[frameHead:])
	var err error
	for _, f := range files {
		if crc, err = crcOf(crc, f); err != nil {
			return fmt.Errorf("reading a long message for the spool: %w", err)
		}
	}
	binary.BigEndian.PutUint32(frame[8:12], crc)
	start := w.size
	_, err = w.f.Write(frame)
	for _, f := range files {
		if err == nil {
			_, err = io.Copy(w.f, io.NewSectionReader(f, 0, f.Len()))
		}
	}
	if err != nil {
		// Take the partial frame back, so the next one follows a whole
		// one.
		if terr := w.f.Truncate(start); terr == nil {
			_, _ = w.f.Seek(start, io.SeekStart)
		}
		return fmt.Errorf("writing %s: %w", w.path, err)
	}
	w.size = start + frameHead + payload
	w.written = r.Written
	w.dirty = true
	if time.Since(w.synced) >= w.o.SyncEvery || r.End {
		w.sync()
	}
	return nil
}

// crcOf continues crc over f's bytes, a piece at a time.
func crcOf(crc uint32, f capture.RawReader) (uint32, error) {
	buf := make([]byte, 256<<10)
	for off := int64(0); off < f.Len(); {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), f.Len()-off)], off)
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += int64(n)
		if err != nil && (!errors.Is(err, io.EOF) || off < f.Len()) {
			return crc, err
		}
	}
	return crc, nil
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
		return fmt.Errorf("%w: less than %d MiB free where the spool is (%s); recording stops until there is room again: free space on that disk, or record into a directory on a larger disk (--data DIR)", ErrLowDisk, w.o.MinFree>>20, filepath.Dir(w.path))
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
	err := w.append(&record{End: true}, nil)
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
