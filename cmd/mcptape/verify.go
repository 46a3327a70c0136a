package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
)

// runVerify is `mcptape verify`: read the whole store and name its damage.
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store")
	var rf repairFlags
	rf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := rf.check(); err != nil {
		return err
	}
	rep, err := verifyStore(ctx, *data)
	if rf.repair {
		return runRepair(ctx, *data, &rf, rep, err, stdout, stderr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "checked %d table file(s), %d session(s), %d exchange(s), %d message(s) in %s\n",
		rep.Tables, rep.Sessions, rep.Exchanges, rep.Messages, *data)
	for _, d := range rep.Damage {
		fmt.Fprintf(stdout, "damaged: %s\n", clean(d.String()))
	}
	if !rep.OK() {
		return fmt.Errorf("the store in %s is damaged (%d problem(s), listed above). `mcptape verify --repair --data %s` "+
			"recovers what it holds into a new directory, leaving this one as it is; `mcptape show` and `mcptape export` "+
			"still give what can be read, and exit 1 naming what cannot",
			*data, len(rep.Damage), *data)
	}
	fmt.Fprintln(stdout, "ok: no damage found")
	return nil
}

// verifyStore verifies the store in dir: through the recorder that holds
// it, or read-only; a store Badger cannot open gets its table files
// checked, which names the file that keeps it from opening.
func verifyStore(ctx context.Context, dir string) (*capture.VerifyReport, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no store in %s (the directory does not exist)", dir)
	}
	if c, _, err := remotestore.Discover(ctx, dir); err == nil {
		defer c.Close()
		return c.Verify(ctx)
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); errors.Is(err, fs.ErrNotExist) {
		return &capture.VerifyReport{}, nil // nothing recorded here yet
	}
	st, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	switch {
	case errors.Is(err, badgerstore.ErrLocked), errors.Is(err, badgerstore.ErrUnclean):
		_, err = openRead(ctx, dir) // its error says what to do
		return nil, err
	case err != nil:
		// Badger does not open it: a damaged log header or table index
		// does that.
		n, damage := badgerstore.VerifyTables(dir)
		damage = append(badgerstore.VerifyLogs(dir), damage...)
		if len(damage) == 0 {
			return nil, notOpening(dir, err)
		}
		return &capture.VerifyReport{Tables: n, Damage: damage}, nil
	}
	defer st.Close()
	v := capture.Verifier(st)
	return v.Verify(ctx)
}

// tolerantStore reads on past damage, for show and export: an iteration
// that meets records it cannot read (an error wrapping capture.ErrDamaged,
// which comes after everything readable) ends there without the error,
// which is kept; a session whose listing holds fewer messages than its
// record counts has its missing ones noted (Badger skips the records of a
// table block that fails its checksum without a word). err then names it
// all, so the command exits 1 having given what could be read.
type tolerantStore struct {
	openedStore
	dir string // the store's directory, when read directly: damaged tables are named

	mu     sync.Mutex
	damage []string
	parent *tolerantStore // a snapshot's (see Snapshot): its damage is the parent's
}

func (t *tolerantStore) note(s string) {
	if t.parent != nil {
		t.parent.note(s)
		return
	}
	t.mu.Lock()
	t.damage = append(t.damage, s)
	t.mu.Unlock()
}

// tolerate passes seq through, keeping a damage error instead of yielding
// it; count, if set, is told how many records were yielded once the
// iteration ran to its end.
func tolerate[T any](t *tolerantStore, seq iter.Seq2[T, error], count func(n int)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		n := 0
		for v, err := range seq {
			if err != nil && errors.Is(err, capture.ErrDamaged) {
				t.note(strings.TrimPrefix(err.Error(), "badgerstore: "))
				continue
			}
			if !yield(v, err) {
				return
			}
			n++
		}
		if count != nil {
			count(n)
		}
	}
}

func (t *tolerantStore) Sessions(ctx context.Context, q capture.SessionQuery) iter.Seq2[*capture.Session, error] {
	return tolerate(t, t.openedStore.Sessions(ctx, q), nil)
}

func (t *tolerantStore) Exchanges(ctx context.Context, id string) iter.Seq2[*capture.Exchange, error] {
	return tolerate(t, t.openedStore.Exchanges(ctx, id), nil)
}

func (t *tolerantStore) Messages(ctx context.Context, id string, q capture.MessageQuery) iter.Seq2[*capture.Message, error] {
	var count func(int)
	if q.After == 0 && q.Limit == 0 {
		count = func(n int) {
			// A finished session's record counts every message decoded,
			// Lost those that were never stored.
			s, err := t.openedStore.Session(ctx, id)
			if err != nil || s.Status == capture.StatusOpen {
				return
			}
			if want := s.Messages - s.Lost; n < want {
				t.note(fmt.Sprintf("session %s: %d of the %d messages its record counts are missing", s.ID, want-n, want))
			}
		}
	}
	return tolerate(t, t.openedStore.Messages(ctx, id, q), count)
}

// Snapshot reads from the store's snapshot, when it has them (export reads
// from one), as tolerantly.
func (t *tolerantStore) Snapshot(ctx context.Context) (capture.Reader, func(), error) {
	sn, ok := t.openedStore.(capture.Snapshotter)
	if !ok {
		return t, func() {}, nil
	}
	r, release, err := sn.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &tolerantStore{openedStore: readOnlyStore{r}, parent: t}, release, nil
}

// readOnlyStore is a Reader with nothing to close.
type readOnlyStore struct{ capture.Reader }

func (readOnlyStore) Close() error { return nil }

// err names the damage met, or is nil.
func (t *tolerantStore) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.damage) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the store is damaged: %s", strings.Join(t.damage, "; "))
	if t.dir != "" {
		if _, tables := badgerstore.VerifyTables(t.dir); len(tables) > 0 {
			for _, d := range tables {
				fmt.Fprintf(&b, "; %s", d)
			}
		}
	}
	b.WriteString(". What could be read was given; `mcptape verify` lists all the damage")
	return errors.New(b.String())
}

// openTolerant is openRead for show and export: reading on past damage.
func openTolerant(ctx context.Context, dir string) (*tolerantStore, error) {
	st, err := openRead(ctx, dir)
	if err != nil {
		return nil, err
	}
	t := &tolerantStore{openedStore: st}
	if _, remote := st.(*remotestore.Client); !remote {
		t.dir = dir // read directly: damaged table files can be named
	}
	return t, nil
}
