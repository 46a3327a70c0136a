package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// TestPacks: large raw bytes written from memory go into packs, a new pack
// once one is full; they read back whole after a reopen; what a killed
// recorder left in the packs and never recorded (a pack of its own, a
// pack's tail) is gone at the next open; deleting a session gives its
// blobs' disk space back at once without touching the other session's
// blobs beside them, and a pack left empty is removed; a damaged blob
// reads as damaged.
func TestPacks(t *testing.T) {
	defer func(n int64) { packMax = n }(packMax)
	packMax = 3<<20 + 64<<10
	ctx := context.Background()
	dir := t.TempDir()
	// A pack left by a recorder killed before it recorded anything in it,
	// under the name the next pack takes.
	if err := os.MkdirAll(filepath.Join(dir, blobDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(packPath(filepath.Join(dir, blobDir), 1), []byte("bytes no record points at"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if _, err := os.Stat(packPath(filepath.Join(dir, blobDir), 1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed recorder's pack is still there after an open (%v)", err)
	}
	blob := func(seq uint64) []byte {
		return append([]byte(fmt.Sprintf("<%d>", seq)), bytes.Repeat([]byte{byte('a' + seq)}, 1<<20+100*int(seq))...)
	}
	b := &capture.Batch{Sessions: []*capture.Session{{ID: "a", Start: time.Unix(1, 0)}, {ID: "b", Start: time.Unix(2, 0)}}}
	for seq := uint64(1); seq <= 8; seq++ {
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: string(rune('a' + seq%2)), Raw: blob(seq), Size: len(blob(seq)), Batch: -1})
	}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	check := func(when string, seqs ...uint64) {
		t.Helper()
		for _, seq := range seqs {
			m, err := s.Message(ctx, seq)
			if err != nil || !bytes.Equal(m.Raw, blob(seq)) {
				t.Fatalf("%s: message %d: %v, %d bytes", when, seq, err, len(m.Raw))
			}
		}
	}
	check("written", 1, 2, 3, 4, 5, 6, 7, 8)
	files := func() ([]string, int64) { return blobFiles(t, dir) }
	names, before := files()
	if len(names) != 3 || !strings.HasPrefix(names[0], "pack-") {
		t.Fatalf("blob files %v, want 3 packs of 3 MiB for 8 blobs of 1 MiB", names)
	}
	sizes := func() map[string]int64 {
		m := map[string]int64{}
		for _, n := range names {
			fi, err := os.Stat(filepath.Join(dir, blobDir, n))
			if err != nil {
				t.Fatal(err)
			}
			m[n] = fi.Size()
		}
		return m
	}
	written := sizes()
	// Closed and opened again, the packs stay as they were.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	if now := sizes(); !maps.Equal(now, written) {
		t.Errorf("pack sizes after a clean reopen %v, want them as written %v", now, written)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A recorder killed after it appended a blob to the last pack, before
	// it recorded it.
	lastPack := filepath.Join(dir, blobDir, names[len(names)-1])
	fi, err := os.Stat(lastPack)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lastPack, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytes.Repeat([]byte("never recorded "), 70_000))
	f.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	if now, err := os.Stat(lastPack); err != nil || now.Size() != fi.Size() {
		t.Errorf("the last pack after the reopen: %v, %d bytes; want the %d bytes it had before the kill", err, now.Size(), fi.Size())
	}
	check("reopened", 1, 2, 3, 4, 5, 6, 7, 8)

	if err := s.DeleteSession(ctx, "b"); err != nil { // odd seqs
		t.Fatal(err)
	}
	check("the other session deleted", 2, 4, 6, 8)
	_, after := files()
	if freed := before - after; freed < 4<<20 {
		t.Errorf("deleting four 1 MiB blobs gave back %d bytes of disk, want at least 4 MiB", freed)
	}
	// More blobs go to a pack of their own; the old ones can all go.
	b = &capture.Batch{Sessions: []*capture.Session{{ID: "c", Start: time.Unix(3, 0)}}}
	b.Messages = []*capture.Message{{Seq: 9, SessionID: "c", Raw: blob(9), Size: len(blob(9)), Batch: -1}}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	check("two sessions deleted", 9)
	if names, _ := files(); len(names) != 1 {
		t.Errorf("blob files %v after deleting every blob but one, want the last blob's pack alone", names)
	}
	if err := s.DeleteSession(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if names, _ := files(); len(names) != 0 {
		t.Errorf("blob files %v after deleting every blob, want none: nothing a killed recorder left stays", names)
	}

	// A damaged blob.
	b.Messages = []*capture.Message{{Seq: 10, SessionID: "c", Raw: blob(10), Size: len(blob(10)), Batch: -1}}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(packPath(filepath.Join(dir, blobDir), 10), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("XXXX"), 1000)
	f.Close()
	if _, err := s.Message(ctx, 10); !errors.Is(err, capture.ErrDamaged) || !strings.Contains(err.Error(), "fails its checksum") {
		t.Errorf("a damaged packed blob reads as %v, want it damaged", err)
	}
}

// TestPacksWithoutDirectIO: where a direct write is refused, the blob is
// written through the page cache instead, and so is every one after it;
// they all read back whole. (A stage one byte off its block boundary is
// what ext4 refuses.)
func TestPacksWithoutDirectIO(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.packs == nil || !s.packs.direct {
		t.Skip("packs are not written with direct I/O here")
	}
	s.packs.stage = alignedBuffer(2*packAlign + 1)[1:]
	blob := func(seq uint64) []byte { return bytes.Repeat([]byte{byte('a' + seq)}, 1<<20+int(seq)) }
	b := &capture.Batch{Sessions: []*capture.Session{{ID: "a", Start: time.Unix(1, 0)}}}
	for seq := uint64(1); seq <= 3; seq++ {
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: "a", Raw: blob(seq), Size: len(blob(seq)), Batch: -1})
	}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if s.packs.direct {
		t.Skip("this file system takes direct writes from any buffer")
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if m, err := s.Message(ctx, seq); err != nil || !bytes.Equal(m.Raw, blob(seq)) {
			t.Fatalf("message %d: %v, %d bytes", seq, err, len(m.Raw))
		}
	}
}

// TestPacksTakeBlobsAtAnyAlignment: a blob goes into its pack by direct
// I/O from wherever it lies in memory (its first and last blocks through
// the stage, the rest straight from it), and still reads back whole;
// deleting blobs placed off the pack's block boundaries gives their disk
// space back without touching their neighbours'.
func TestPacksTakeBlobsAtAnyAlignment(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	direct := s.packs != nil && s.packs.direct
	mem := alignedBuffer(4 << 20)
	for i := range mem {
		mem[i] = byte('a' + i%23)
	}
	starts := []int{0, 1, 7, 511, 512, 4095, 4096 + 100}
	blobs := map[uint64][]byte{}
	b := &capture.Batch{Sessions: []*capture.Session{{ID: "a", Start: time.Unix(1, 0)}, {ID: "b", Start: time.Unix(2, 0)}}}
	for i, k := range starts {
		seq := uint64(i + 1)
		raw := mem[k : k+1<<20+i*1000]
		blobs[seq] = raw
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: string(rune('a' + i%2)), Raw: raw, Size: len(raw), Batch: -1})
	}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if direct && !s.packs.direct {
		t.Fatal("a blob off a block boundary in memory made the packs give up direct I/O")
	}
	check := func(when string, seqs ...uint64) {
		t.Helper()
		for _, seq := range seqs {
			m, err := s.Message(ctx, seq)
			if err != nil || !bytes.Equal(m.Raw, blobs[seq]) {
				t.Fatalf("%s: message %d: %v, %d bytes", when, seq, err, len(m.Raw))
			}
		}
	}
	check("written", 1, 2, 3, 4, 5, 6, 7)
	used := func() int64 { _, n := blobFiles(t, dir); return n }
	before := used()
	if err := s.DeleteSession(ctx, "a"); err != nil { // seqs 1, 3, 5, 7
		t.Fatal(err)
	}
	check("the other session deleted", 2, 4, 6)
	// Each blob's extent: from the block it starts in to the end of the
	// block it ends in, one more block than its length needs where it
	// starts off a boundary.
	var want int64
	for _, seq := range []uint64{1, 3, 5, 7} {
		n := int64(len(blobs[seq]))
		if l := lead(blobs[seq]); direct && l > 0 {
			n += l
		}
		want += alignUp(n)
	}
	if freed := before - used(); freed < want {
		t.Errorf("deleting four 1 MiB blobs gave back %d bytes of disk, want %d", freed, want)
	}
}

// blobFiles lists the files under the store's blobs directory in dir, and
// the disk space they take.
func blobFiles(t *testing.T, dir string) (names []string, used int64) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, blobDir, "*"))
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(p))
		used += diskUsage(fi)
	}
	return names, used
}
