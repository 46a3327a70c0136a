package badgerstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mcptape/mcptape/capture"
)

// TestLargeResultsLeaveThePageCache: recording large results must not
// leave every byte of them in the page cache. Kept there, each result took
// memory never touched before, which on a virtual machine cost the
// recorder several times the copy itself and took large-result throughput
// from 0.9 to 0.7 of nginx's in `mcptape bench`; it also pushed other
// programs' files out of the cache. Once a blob file is written back its
// pages are dropped: here, after 12 results of 2 MiB, at most one file's
// worth stays resident, and every result reads back whole from disk.
func TestLargeResultsLeaveThePageCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := open(t, dir, nil)
	rec, err := capture.NewRecorder(ctx, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 12, 2 << 20
	text := func(i int) string { return strings.Repeat(string(rune('a'+i)), size) }
	for i := range n {
		tapCall(rec, "10.0.0.1:1000",
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{}}}`, i), nil, "",
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`, i, text(i)))
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rec.Close(sctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil { // waits for the last write-backs
		t.Fatal(err)
	}

	files, err := filepath.Glob(filepath.Join(dir, "blobs", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no blob files (%v)", err)
	}
	var resident, total int
	for _, f := range files {
		r, all := residentPages(t, f)
		resident += r
		total += all
	}
	if limit := total / n; resident > limit {
		t.Errorf("%d of the blob files' %d pages are still in the page cache, want at most %d (one blob's)", resident, total, limit)
	}

	store = open(t, dir, nil)
	got := largeResults(t, store, size)
	for id, m := range got {
		if !strings.Contains(string(m.Raw), `"text":"`+text(id)+`"`) {
			t.Errorf("result %s read back wrong (%d bytes)", m.ID, len(m.Raw))
		}
	}
	if len(got) != n {
		t.Errorf("%d large results read back, want %d", len(got), n)
	}
}

// residentPages reports how many of path's pages are in the page cache,
// and how many it has.
func residentPages(t *testing.T, path string) (resident, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	ps := os.Getpagesize()
	vec := make([]byte, (len(m)+ps-1)/ps)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}
