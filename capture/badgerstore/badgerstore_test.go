package badgerstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/storetest"
)

func open(t *testing.T, dir string, opts *badgerstore.Options) *badgerstore.Store {
	t.Helper()
	s, err := badgerstore.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestStoreOnDisk(t *testing.T) {
	var dirs sync.Map // capture.Store → its directory
	storetest.RunWithOptions(t, func(t *testing.T) capture.Store {
		dir := t.TempDir()
		s := open(t, dir, nil)
		dirs.Store(s, dir)
		return s
	}, storetest.RunOptions{
		Reopen: func(t *testing.T, old capture.Store) capture.Store {
			dir, _ := dirs.Load(old)
			s := open(t, dir.(string), nil)
			dirs.Store(s, dir)
			return s
		},
	})
}

func TestStoreInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) capture.Store {
		return open(t, "", &badgerstore.Options{InMemory: true})
	})
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, nil)
	s, err := badgerstore.Open(dir, nil)
	if err == nil {
		s.Close()
		t.Fatal("second Open of a directory in use succeeded")
	}
	if !errors.Is(err, badgerstore.ErrLocked) {
		t.Errorf("second Open: err = %v, want ErrLocked", err)
	}
	for _, want := range []string{dir, "in use by another mcptape process", "stop it", "recorder's API"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second Open: error %q does not say %q", err, want)
		}
	}
}

func TestOpenCreatesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	open(t, dir, nil)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("Open did not create %s: %v", dir, err)
	}
}

func TestOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := badgerstore.Open(path, nil)
	if err == nil {
		s.Close()
		t.Fatal("Open of a file succeeded")
	}
	if !strings.Contains(err.Error(), "is a file, not a directory") {
		t.Errorf("Open of a file: error %q does not say it is a file", err)
	}
}

func TestOpenNoDirectory(t *testing.T) {
	if s, err := badgerstore.Open("", nil); err == nil {
		s.Close()
		t.Fatal(`Open("") succeeded`)
	}
}

// writeRaw puts keys into a Badger database directly, as another program
// (or another version of mcptape) would.
func writeRaw(t *testing.T, dir string, kv map[string]string) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		for k, v := range kv {
			if err := txn.Set([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenSchema(t *testing.T) {
	tests := []struct {
		name string
		kv   map[string]string
		want []string
	}{
		{"newer version", map[string]string{"meta/version": "7"}, []string{"schema version 7", "upgrade mcptape"}},
		{"unknown version", map[string]string{"meta/version": "0"}, []string{"unknown schema version 0"}},
		{"corrupt version", map[string]string{"meta/version": "v1\x00"}, []string{`schema version "v1\x00" is not a number`}},
		{"not an mcptape store", map[string]string{"some/key": "x"}, []string{"no mcptape schema version", "not an mcptape store"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRaw(t, dir, tt.kv)
			s, err := badgerstore.Open(dir, nil)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, badgerstore.ErrSchema) {
				t.Errorf("err = %v, want ErrSchema", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			// The refused store is left closed and unchanged: Open again
			// fails the same way rather than with ErrLocked.
			if _, err := badgerstore.Open(dir, nil); !errors.Is(err, badgerstore.ErrSchema) {
				t.Errorf("second Open: err = %v, want ErrSchema", err)
			}
		})
	}
}

// A version 1 store (before exchanges noted the upstream's instants) opens,
// and is marked version 2 so that an older mcptape refuses what this one
// writes.
func TestOpenSchemaV1(t *testing.T) {
	dir := t.TempDir()
	writeRaw(t, dir, map[string]string{"meta/version": "1"})
	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatalf("Open of a version 1 store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("meta/version"))
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := item.ValueCopy(nil); string(v) != "3" {
			t.Errorf("schema version after Open: %q, want 3", v)
		}
		return nil
	})
}

func TestOptionsSizes(t *testing.T) {
	// Sizes that would make badger.Open panic or fail if passed through.
	for _, o := range []badgerstore.Options{
		{MemTableSize: 1},
		{MemTableSize: 4 << 20},
		{BlockCacheSize: 1},
		{MemTableSize: 1 << 30, BlockCacheSize: 1 << 20},
	} {
		o.InMemory = true
		s, err := badgerstore.Open("", &o)
		if err != nil {
			t.Errorf("Open with %+v: %v", o, err)
			continue
		}
		s.Close()
	}
}

// Large raw bytes go to blob files (on Linux, packs of them), which
// DeleteSession removes.
func TestBlobs(t *testing.T) {
	dir := t.TempDir()
	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	big := bytes.Repeat([]byte("x"), 1<<20)
	b := &capture.Batch{
		Sessions: []*capture.Session{{ID: "s", Start: time.Unix(1, 0)}},
		Messages: []*capture.Message{{Seq: 7, SessionID: "s", Raw: big, Size: len(big), Batch: -1}, {Seq: 8, SessionID: "s", Raw: []byte("small"), Size: 5, Batch: -1}},
	}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "*"))
	if len(blobs) != 1 || !strings.HasSuffix(blobs[0], "0000000000000007") {
		t.Fatalf("blob files %v, want one for message 7", blobs)
	}
	m, err := s.Message(ctx, 7)
	if err != nil || !bytes.Equal(m.Raw, big) {
		t.Fatalf("message 7: %v, %d bytes", err, len(m.Raw))
	}
	if err := s.DeleteSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "*")); len(blobs) != 0 {
		t.Errorf("blob files left after DeleteSession: %v", blobs)
	}
}
