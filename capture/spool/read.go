package spool

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mcptape/mcptape/capture"
)

// ErrRefused is returned for a file in the spool folder that an owner does
// not read: not a regular file (a FIFO, a device, a symbolic link), or not
// owned by the user the owner runs as.
var ErrRefused = errors.New("not a regular file owned by this user")

// Record is one record read back from a spool.
type Record struct {
	// Batch holds the record's sessions, exchanges and messages.
	Batch *capture.Batch
	// End is set on the last record of a wrap that ended cleanly.
	End bool
	// Traced says the spool's wrap exported the record's calls as spans
	// itself (Options.Traced).
	Traced bool
	// Offset is where the next record starts in the file.
	Offset int64
	// Written counts the messages the spool's writer had written with
	// this record (0 in a version 1 spool).
	Written int64
	// Damage, when set, describes bytes just before this record that could
	// not be read, which Read passed over to reach it.
	Damage *Damage
}

// Damage describes bytes of a spool that could not be read.
type Damage struct {
	// Offset and Bytes say where.
	Offset, Bytes int64
	// Before is the count of messages written before the record that
	// follows the damage (so the damage held Before minus what was read
	// before it); -1 when no record follows.
	Before int64
	// Claimed is the message count the first damaged frame's header
	// claims, 0 when it is unreadable: all that says what a cut frame
	// held.
	Claimed int64
	// Reason says what was wrong.
	Reason string
}

func (d *Damage) String() string {
	return fmt.Sprintf("%d bytes at offset %d could not be read (%s)", d.Bytes, d.Offset, d.Reason)
}

// Read yields the readable records of the spool at path from byte offset
// from (0: the start). It stops at the end of the file, or at a frame cut
// short (a record being written, or the last one of a wrap that died
// mid-write): such a frame is never yielded. Past a frame that is whole
// but damaged (its checksum fails, or it claims more than a frame may
// hold), it looks for the next whole frame and yields it with the Damage;
// when there is none yet, it stops there (see Tail). Only a file it does
// not read (ErrRefused, ErrFormat) or cannot read yields an error. It
// never blocks on a file that is not regular, and never allocates more
// than a frame may hold.
func Read(path string, from int64) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		f, fi, err := openSpool(path)
		if err != nil {
			yield(nil, err)
			return
		}
		defer f.Close()
		v, err := version(f)
		if err != nil {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				yield(nil, fmt.Errorf("%s: %w", path, err))
			}
			return // still being created
		}
		if from < int64(len(magic2)) {
			from = int64(len(magic2))
		}
		r := &reader{f: f, size: fi.Size(), v: v}
		var damage *Damage
		for off := from; ; {
			rec, next, bad := r.frame(off)
			if bad == "" && rec == nil {
				return // the end, or a frame cut short
			}
			if bad != "" {
				if v == 1 {
					return // no marks to find the next frame by
				}
				at, ok := r.resync(off + 1)
				if !ok {
					return
				}
				if damage == nil {
					damage = &Damage{Offset: off, Reason: bad, Claimed: r.claimed(off)}
				}
				damage.Bytes = at - damage.Offset
				off = at
				continue
			}
			if damage != nil {
				damage.Before = -1
				if rec.Written > 0 {
					damage.Before = rec.Written - int64(len(rec.Batch.Messages))
				}
				rec.Damage, damage = damage, nil
			}
			off = next
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// Tail describes the bytes of the spool at path past offset, where the
// last record read ended: a frame cut short by a wrap that died while
// writing it, or damage no whole frame follows. Nil when there are none.
func Tail(path string, offset int64) *Damage {
	f, fi, err := openSpool(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if offset < int64(len(magic2)) {
		offset = int64(len(magic2))
	}
	if fi.Size() <= offset {
		return nil
	}
	v, err := version(f)
	if err != nil {
		return nil
	}
	r := &reader{f: f, size: fi.Size(), v: v}
	d := &Damage{Offset: offset, Bytes: fi.Size() - offset, Before: -1, Claimed: r.claimed(offset), Reason: "cut short: its wrap ended while writing it"}
	if _, _, bad := r.frame(offset); bad != "" {
		d.Reason = bad
	}
	return d
}

// version reads a spool's first line.
func version(f *os.File) (int, error) {
	head := make([]byte, len(magic2))
	if n, err := f.ReadAt(head, 0); n < len(head) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	switch string(head) {
	case magic1:
		return 1, nil
	case magic2:
		return 2, nil
	}
	return 0, ErrFormat
}

// reader reads the frames of one open spool.
type reader struct {
	f    *os.File
	size int64
	v    int
	buf  []byte
}

// bigFrame is the payload size from which a frame's checksum is verified
// from the file, a piece at a time, before memory is allocated for it.
const bigFrame = 1 << 20

// frame reads the frame at off. It returns the record and where the next
// frame starts; nil and "" at the end of the file or for a frame cut
// short; nil and what is wrong for a whole frame that cannot be read.
func (r *reader) frame(off int64) (rec *Record, next int64, bad string) {
	hl := int64(frameHead)
	if r.v == 1 {
		hl = 8
	}
	if off+hl > r.size {
		return nil, 0, ""
	}
	var h [frameHead]byte
	if _, err := r.f.ReadAt(h[:hl], off); err != nil {
		return nil, 0, ""
	}
	var n int64
	var sum uint32
	var count []byte
	if r.v == 1 {
		n, sum = int64(binary.BigEndian.Uint32(h[0:4])), binary.BigEndian.Uint32(h[4:8])
	} else {
		if !bytes.Equal(h[0:4], syncMark[:]) {
			return nil, 0, "no frame begins there"
		}
		n, sum, count = int64(binary.BigEndian.Uint32(h[4:8])), binary.BigEndian.Uint32(h[8:12]), h[12:16]
	}
	if n > maxFrame {
		return nil, 0, fmt.Sprintf("a frame claims %d bytes, more than a frame may hold (%d)", n, maxFrame)
	}
	if off+hl+n > r.size {
		return nil, 0, "" // cut short, or still being written
	}
	crc := crc32.Update(0, castagnoli, count)
	if n >= bigFrame {
		c, err := crcOf(crc, sectionOf(r.f, off+hl, n))
		if err != nil || c != sum {
			return nil, 0, "its checksum fails"
		}
	}
	if int64(cap(r.buf)) < n || n < bigFrame && cap(r.buf) > 4*bigFrame {
		r.buf = make([]byte, n)
	}
	payload := r.buf[:n]
	if _, err := r.f.ReadAt(payload, off+hl); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, "it cannot be read: " + err.Error()
	}
	if n < bigFrame && crc32.Update(crc, castagnoli, payload) != sum {
		return nil, 0, "its checksum fails"
	}
	rc, err := decode(payload, r.v, n >= bigFrame)
	if err != nil {
		return nil, 0, "its record cannot be decoded: " + err.Error()
	}
	if n >= bigFrame {
		r.buf = nil // the messages hold the payload now
	}
	rc.Offset = off + hl + n
	return rc, rc.Offset, ""
}

// decode reads a frame's payload; owned says the record may keep views of
// it (else the reader reuses it).
func decode(payload []byte, v int, owned bool) (*Record, error) {
	gobPart := payload
	if v == 2 {
		if len(payload) < 4 {
			return nil, errors.New("no record")
		}
		gl := int(binary.BigEndian.Uint32(payload[0:4]))
		if gl > len(payload)-4 {
			return nil, errors.New("a record longer than its frame")
		}
		gobPart = payload[4 : 4+gl]
		payload = payload[4+gl:]
	}
	var r record
	if err := gob.NewDecoder(bytes.NewReader(gobPart)).Decode(&r); err != nil {
		return nil, err
	}
	if v == 2 {
		// A large message's bytes follow the gob.
		if !owned && len(r.Blobs) > 0 {
			payload = bytes.Clone(payload)
		}
		for _, b := range r.Blobs {
			if b.Index < 0 || b.Index >= len(r.Messages) || b.Len < 0 || b.Len > int64(len(payload)) {
				return nil, errors.New("a message's bytes are not where the record says")
			}
			m := r.Messages[b.Index]
			m.Raw, payload = payload[:b.Len:b.Len], payload[b.Len:]
			m.Size = len(m.Raw)
		}
	}
	return &Record{Batch: &capture.Batch{Sessions: r.Sessions, Exchanges: r.Exchanges, Messages: r.Messages}, End: r.End, Traced: r.Traced, Written: r.Written}, nil
}

// claimed is the message count in the header of the frame at off, when
// it has one that can be read.
func (r *reader) claimed(off int64) int64 {
	if r.v != 2 {
		return 0
	}
	var h [frameHead]byte
	if _, err := r.f.ReadAt(h[:], off); err != nil || !bytes.Equal(h[0:4], syncMark[:]) {
		return 0
	}
	return int64(min(binary.BigEndian.Uint32(h[12:16]), 1<<20))
}

// resync finds the next whole, readable frame from off: one that begins
// with the sync mark, whose end is the file's or another frame's start,
// and whose checksum holds.
func (r *reader) resync(off int64) (int64, bool) {
	const piece = 1 << 20
	buf := make([]byte, piece+len(syncMark))
	for pos := off; pos < r.size; pos += piece {
		n, _ := r.f.ReadAt(buf, pos)
		b := buf[:n]
		for i := 0; ; {
			j := bytes.Index(b[i:], syncMark[:])
			if j < 0 {
				break
			}
			at := pos + int64(i+j)
			i += j + 1
			if at >= pos+piece {
				break // the next piece looks at it
			}
			if r.plausible(at) {
				if _, _, bad := r.frame(at); bad == "" {
					return at, true
				}
			}
		}
	}
	return 0, false
}

// plausible says whether a frame at off would end at the end of the file
// or at the sync mark of another: cheap, before its checksum is.
func (r *reader) plausible(off int64) bool {
	var h [frameHead]byte
	if _, err := r.f.ReadAt(h[:], off); err != nil {
		return false
	}
	n := int64(binary.BigEndian.Uint32(h[4:8]))
	end := off + frameHead + n
	if n > maxFrame || end > r.size {
		return false
	}
	if end == r.size {
		return true
	}
	var m [4]byte
	_, err := r.f.ReadAt(m[:], end)
	return err == nil && m == syncMark
}

// sectionOf is f's bytes from off, n of them, as a RawReader.
func sectionOf(f *os.File, off, n int64) capture.RawReader {
	return &section{io.NewSectionReader(f, off, n)}
}

type section struct{ *io.SectionReader }

func (s *section) Len() int64                      { return s.Size() }
func (s *section) MoveTo(string) (*os.File, error) { return nil, errors.ErrUnsupported }
func (s *section) Close() error                    { return nil }

// openSpool opens a spool for reading without blocking (a FIFO in the
// folder would block an open for reading until a writer came) or following
// a symbolic link, and refuses (ErrRefused) what is not a regular file
// owned by this process's user.
func openSpool(path string) (*os.File, os.FileInfo, error) {
	f, err := openNoBlock(path)
	if err != nil {
		if isLoop(err) {
			return nil, nil, fmt.Errorf("%s: %w", path, ErrRefused)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() || !ownedByMe(fi) {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, ErrRefused)
	}
	return f, fi, nil
}

// Refused is a file in the spool folder that is not read.
type Refused struct {
	Path string
	Why  string
}

// List lists the spool files in dataDir, oldest name first, and the files
// named like spools that are not read (see ErrRefused), without opening
// any.
func List(dataDir string) (spools []string, refused []Refused, err error) {
	dir := filepath.Join(dataDir, Dir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), Ext) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			continue // gone since
		case !fi.Mode().IsRegular():
			refused = append(refused, Refused{p, fmt.Sprintf("it is not a regular file (%s)", fi.Mode().Type())})
		case !ownedByMe(fi):
			refused = append(refused, Refused{p, "it belongs to another user"})
		default:
			spools = append(spools, p)
		}
	}
	sort.Strings(spools)
	return spools, refused, nil
}

// Files lists the spool files in dataDir that are read (see List), oldest
// name first.
func Files(dataDir string) ([]string, error) {
	spools, _, err := List(dataDir)
	return spools, err
}

// Running reports whether the wrap that writes path still runs (holds its
// lock).
func Running(path string) bool {
	f, _, err := openSpool(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return held(f)
}
