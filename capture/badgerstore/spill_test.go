package badgerstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/storetest"
)

// TestSpilledResultsBecomeBlobs: a large SSE result the recorder kept in a
// spill file while it arrived is stored by moving that file into place as
// its blob, so the result is written to disk once. A result with a secret
// in it is stored redacted, from memory, never through its spill file;
// either way the spill directory is empty afterwards, and a moved blob takes
// no more disk than its bytes.
func TestSpilledResultsBecomeBlobs(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("an open file cannot be renamed on Windows; blobs are written from memory there")
	}
	ctx := context.Background()
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill")
	store := open(t, dir, nil)
	rec, err := capture.NewRecorder(ctx, store, &capture.RecorderOptions{SpillDir: spill})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "tok_3f9a8b7c6d5e4f3a2b1c0d9e"
	const size = 3 << 20
	text := []string{strings.Repeat("a", size), strings.Repeat("b", size/2) + secret + strings.Repeat("b", size/2)}
	taps := make([]*capture.Tap, len(text))
	bodies := make([][]byte, len(text))
	for i := range text {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big"}}`, i)
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7411/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secret)
		taps[i] = rec.Begin(capture.RequestFrom(req, []byte(body), true))
		taps[i].Response(http.StatusOK, http.Header{"Content-Type": {"text/event-stream"}}, false)
		bodies[i] = fmt.Appendf(nil, "event: message\nid: %d\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", i, i, text[i])
	}
	var held []os.FileInfo // the spill files, held open so that their inodes stay theirs
	const chunk = 64 << 10
	for off := 0; off < len(bodies[0]); off += chunk {
		for i := range bodies {
			taps[i].ResponseBody(bodies[i][off:min(off+chunk, len(bodies[i]))])
		}
		if off == 5<<19 {
			if err := rec.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			names, _ := filepath.Glob(filepath.Join(spill, "*"))
			for _, name := range names {
				f, err := os.Open(name)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				fi, err := f.Stat()
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, fi)
			}
			if len(held) != len(bodies) {
				t.Fatalf("%d spill files 2.5 MiB into two 3 MiB results, want %d", len(held), len(bodies))
			}
		}
	}
	for _, tap := range taps {
		tap.End("", false)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rec.Close(sctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(spill, "*")); len(left) != 0 {
		t.Errorf("spill files left: %v", left)
	}

	moved := map[int]bool{}
	for id, m := range largeResults(t, store, size) {
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`, id, text[id])
		if id == 1 {
			want = strings.Replace(want, secret, "[redacted]", 1)
		}
		if string(m.Raw) != want {
			t.Errorf("result %d stored as %.80q…, want %.80q…", id, m.Raw, want)
		}
		blob, err := os.Stat(filepath.Join(dir, "blobs", fmt.Sprintf("%016x", m.Seq)))
		if err != nil {
			continue // not a file of its own (in a pack)
		}
		for _, fi := range held {
			if os.SameFile(fi, blob) {
				moved[id] = true
			}
		}
		// The recorder allocates a spill file's blocks ahead of what it
		// writes; none of them stays taken past the blob's end.
		if n, ok := allocated(blob); ok && n > blob.Size()+4<<10 {
			t.Errorf("blob of result %d: %d bytes take %d bytes of disk", id, blob.Size(), n)
		}
	}
	if !moved[0] || moved[1] {
		t.Errorf("blobs that are their spill file moved into place: %v; want result 0's only (result 1 was redacted)", moved)
	}
}

// largeResults reads back every message of size bytes or more in store,
// by its JSON-RPC id (a number).
func largeResults(t *testing.T, store capture.Store, size int) map[int]*capture.Message {
	t.Helper()
	out := map[int]*capture.Message{}
	for _, m := range storetest.Messages(t, store) {
		if len(m.Raw) >= size {
			var id int
			fmt.Sscanf(string(m.ID), "%d", &id)
			out[id] = m
		}
	}
	return out
}
