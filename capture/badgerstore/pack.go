package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
)

// Packs. A blob written from memory (a result of blobThreshold or more that
// did not arrive through a spill file) is appended to a pack file rather
// than given a file of its own: on ext4, creating a file for each 1 MiB
// result cost about as much CPU as writing its bytes. A pack takes blobs
// until it passes packMax bytes and is named after the seq of its first
// blob, blobs/pack-<16 hex digits>; the raw head of a packed message holds
// the blob's CRC-32C, pack, offset and length (packMarker). Deleting a
// message punches its blob out of the pack (its disk space comes back at
// once) and removes a pack no longer current once nothing is left in it.
// Where holes cannot be punched (packSupported), blobs keep a file each.
//
// A pack is written with direct I/O (directFlag) where the file system
// takes it: a blob goes to disk from where it lies in memory, in one write,
// without passing through the page cache. Direct I/O moves whole blocks
// from block-aligned memory to block-aligned offsets, so a blob is placed
// in its pack where its first block-aligned byte in memory falls on a
// block boundary (its first block then begins with zeros); its partial
// first and last blocks are copied into a small aligned stage, and the
// three pieces go out in one pwritev. Written through the page cache, each
// 1 MiB blob cost its pages' allocation, their write-back and their drop
// (see blobCache), about twice the CPU of a direct write; copying the blob
// into an aligned buffer first, and writing it in pieces of that buffer,
// cost more again. Where a write refuses direct I/O, the packs go on
// through the page cache.
type packs struct {
	dir   string
	cache *blobCache

	mu     sync.Mutex // guards the rest, and serializes appends
	cur    *os.File   // the pack taking blobs; nil until the first
	id     uint64
	size   int64
	direct bool   // packs are opened for direct I/O
	stage  []byte // two aligned blocks, for a direct write's first and last; allocated at the first
}

// packAlign: a blob's blocks are its own (it starts in a block after the
// previous blob's last), so that punching them out frees all of its disk
// space and none of its neighbours'.
const packAlign = 4096

func alignUp(n int64) int64   { return (n + packAlign - 1) &^ (packAlign - 1) }
func alignDown(n int64) int64 { return n &^ (packAlign - 1) }

// blobBlocks is the extent of r's blocks in its pack.
func blobBlocks(r packRef) (off, n int64) {
	off = alignDown(r.off)
	return off, alignUp(r.off+r.n) - off
}

// lead is how far into its first block a blob in memory at b goes, for
// its first block-aligned byte to fall on a block boundary of the pack.
func lead(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	a := int64(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (packAlign - 1)) // b[a] is aligned
	return (packAlign - a) & (packAlign - 1)
}

// packMax is the size past which a pack takes no more blobs.
var packMax int64 = 64 << 20 // a variable for the tests

// packMarker, as a raw head's chunk count, says the raw bytes are in a pack
// (see packs), located by the rest of the head (packRef).
const packMarker = blobMarker - 1

// packRef locates a blob in a pack.
type packRef struct {
	id     uint64
	off, n int64
}

const packHeadLen = 4 + 3*8

func appendPackHead(b []byte, sum uint32, r packRef) []byte {
	b = binary.BigEndian.AppendUint32(b, sum)
	b = binary.BigEndian.AppendUint64(b, r.id)
	b = binary.BigEndian.AppendUint64(b, uint64(r.off))
	return binary.BigEndian.AppendUint64(b, uint64(r.n))
}

// packRefOf is where the blob of a raw head (split by splitRawHead) is,
// when it is in a pack.
func packRefOf(chunks uint32, first []byte) (packRef, bool) {
	if chunks != packMarker {
		return packRef{}, false
	}
	_, r, ok := parsePackHead(first)
	return r, ok
}

func parsePackHead(b []byte) (sum uint32, r packRef, ok bool) {
	if len(b) != packHeadLen {
		return 0, r, false
	}
	r = packRef{binary.BigEndian.Uint64(b[4:]), int64(binary.BigEndian.Uint64(b[12:])), int64(binary.BigEndian.Uint64(b[20:]))}
	if r.off < 0 || r.n < 0 {
		return 0, r, false
	}
	return binary.BigEndian.Uint32(b), r, true
}

func packPath(dir string, id uint64) string {
	return filepath.Join(dir, fmt.Sprintf("pack-%016x", id))
}

// newPacks returns the packs of a store writing blobs to dir, or nil where
// blobs keep a file each.
func newPacks(dir string, cache *blobCache) *packs {
	if !packSupported || cache == nil {
		return nil
	}
	return &packs{dir: dir, cache: cache, direct: directFlag != 0}
}

// add appends b, the raw bytes of message seq, to the current pack,
// starting a new one (named after seq) when there is none or it is full.
func (p *packs) add(seq uint64, b []byte) (packRef, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil && p.size+int64(len(b)) > packMax {
		p.retire()
	}
	if p.cur == nil {
		if err := p.open(seq); err != nil {
			return packRef{}, err
		}
	}
	r := packRef{id: p.id, off: alignUp(p.size), n: int64(len(b))}
	if p.direct {
		r.off += lead(b)
	}
	if err := p.write(r.off, b); err != nil {
		p.retire() // where a write failed, the pack's end is unknown
		return packRef{}, err
	}
	p.size = r.off + r.n
	return r, nil
}

// open makes the pack named after seq the current one, for direct I/O
// while the file system takes it. A pack of this name that exists already
// (a message rewritten under its seq, in a store written before packs
// recorded their ends) is appended to.
func (p *packs) open(seq uint64) error {
	path, flag := packPath(p.dir, seq), os.O_RDWR|os.O_CREATE
	var f *os.File
	var err error
	if p.direct {
		f, err = os.OpenFile(path, flag|directFlag, 0o600)
		p.direct = err == nil // this file system opens no file for direct I/O
	}
	if !p.direct {
		f, err = os.OpenFile(path, flag, 0o600)
	}
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	p.cur, p.id, p.size = f, seq, fi.Size()
	return nil
}

// write writes b at off of the current pack: directly, or through the page
// cache once a direct write was refused (EINVAL).
func (p *packs) write(off int64, b []byte) error {
	if p.direct {
		err := p.writeDirect(off, b)
		if !errors.Is(err, syscall.EINVAL) {
			return err
		}
		if clearDirect(p.cur) != nil {
			return err
		}
		p.direct = false
	}
	if _, err := p.cur.WriteAt(b, off); err != nil {
		return err
	}
	p.cache.writtenAt(p.cur, off, int64(len(b)))
	return nil
}

// writeDirect writes b at off of the current pack, which is open for
// direct I/O, in one write of whole blocks: the first block (zeros up to
// off, then b's first bytes) and the last (b's last bytes, then zeros)
// from the stage, the blocks between straight from b. b[i] must be aligned
// in memory where off+i is in the pack (see lead).
func (p *packs) writeDirect(off int64, b []byte) error {
	if p.stage == nil {
		p.stage = alignedBuffer(2 * packAlign)
	}
	head := int(off - alignDown(off))
	iov := make([][]byte, 0, 3)
	i := 0 // b's bytes placed
	if head > 0 {
		first := p.stage[:packAlign]
		clear(first[:head])
		i = copy(first[head:], b)
		clear(first[head+i:])
		iov = append(iov, first)
	}
	if mid := (len(b) - i) &^ (packAlign - 1); mid > 0 {
		iov = append(iov, b[i:i+mid])
		i += mid
	}
	if i < len(b) {
		last := p.stage[packAlign:]
		n := copy(last, b[i:])
		clear(last[n:])
		iov = append(iov, last)
	}
	return pwritev(p.cur, iov, alignDown(off))
}

// alignedBuffer returns n bytes starting on a packAlign boundary.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+packAlign)
	o := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (packAlign - 1))
	return b[o : o+n : o+n]
}

// retire closes the current pack (after the drops queued for it).
func (p *packs) retire() {
	p.cache.retired(p.cur)
	p.cur = nil
}

// trimPacks gives back what recorders killed while writing left in the
// packs, before the store takes blobs again: a pack is appended to before
// the transaction that records its blob commits, so a recorder killed in
// between leaves bytes no record points at, which kept the pack (and
// their disk space) for good. Each pack's end is recorded with its blobs
// (p/<pack ID>): a pack longer than that end's block is cut back to it;
// a pack with no record and named after a seq above every stored one
// holds nothing recorded and is removed. (A pack of a store written
// before the ends were recorded is left as it is.) Records of packs
// removed since go. It is best effort: what it cannot do is logged and
// left.
func (s *Store) trimPacks(log *slog.Logger) {
	names, err := filepath.Glob(filepath.Join(s.blobs, "pack-*"))
	if err != nil {
		return
	}
	ends := map[uint64]int64{}
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixPackEnd)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()[len(prefixPackEnd):]
			if len(k) != 8 {
				continue
			}
			err := it.Item().Value(func(v []byte) error {
				if len(v) == 8 {
					ends[binary.BigEndian.Uint64(k)] = int64(binary.BigEndian.Uint64(v))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Warn("badger store: reading where the packs end", logKeyError, err)
		return
	}
	last := s.lastSeq.Load()
	for _, name := range names {
		id, err := strconv.ParseUint(strings.TrimPrefix(filepath.Base(name), "pack-"), 16, 64)
		if err != nil {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			continue
		}
		end, recorded := ends[id]
		delete(ends, id)
		// A blob's blocks are its own (packAlign), and direct I/O writes
		// its last one whole: the pack ends at its last recorded block.
		end = alignUp(end)
		switch {
		case recorded && fi.Size() > end:
			if err := os.Truncate(name, end); err != nil {
				log.Warn("badger store: cutting what a killed recorder left at the end of a pack", logKeyError, err)
				continue
			}
			log.Info("badger store: cut what a killed recorder left at the end of a pack", logKeyPack, filepath.Base(name), logKeyBytes, fi.Size()-end)
		case !recorded && id > last:
			if err := os.Remove(name); err != nil {
				log.Warn("badger store: removing a pack a killed recorder left", logKeyError, err)
				continue
			}
			log.Info("badger store: removed a pack a killed recorder left, which held nothing recorded", logKeyPack, filepath.Base(name), logKeyBytes, fi.Size())
		}
	}
	if len(ends) == 0 {
		return
	}
	_ = s.db.Update(func(txn *badger.Txn) error {
		for id := range ends {
			if err := txn.Delete(packEndKey(id)); err != nil {
				return err
			}
		}
		return nil
	})
}

// remove punches the blobs at refs out of their packs, and removes a pack
// left empty (the current one is retired first). It is best effort: what
// it cannot give back stays taken, and is read by no one.
func (p *packs) remove(refs []packRef) {
	if p == nil || len(refs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	files := map[uint64]*os.File{}
	for _, r := range refs {
		f, ok := files[r.id]
		if !ok {
			var err error
			if f, err = os.OpenFile(packPath(p.dir, r.id), os.O_RDWR, 0); err != nil {
				continue
			}
			files[r.id] = f
		}
		off, n := blobBlocks(r)
		if left, err := punch(f, off, n); err == nil && !left {
			if p.cur != nil && r.id == p.id {
				p.retire()
			}
			_ = os.Remove(f.Name())
		}
	}
	for _, f := range files {
		_ = f.Close()
	}
}

// close retires the current pack.
func (p *packs) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		p.retire()
	}
}

// readPacked reads the blob at r from the packs in dir.
func readPacked(dir string, r packRef) ([]byte, error) {
	f, err := os.Open(packPath(dir, r.id))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, r.n)
	if _, err := f.ReadAt(b, r.off); err != nil {
		return nil, fmt.Errorf("%d bytes at %d of %s: %w", r.n, r.off, f.Name(), err)
	}
	return b, nil
}
