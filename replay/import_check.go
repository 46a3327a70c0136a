package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcptape/mcptape/capture"
)

// An import is all or nothing. PlanImport checks, before anything is
// written, what would make it fail halfway — a session id the tape holds
// twice, one the store holds already, one the store cannot key — and
// says which ids the sessions get; if a write fails later all the same
// (a full disk), undoImport removes what was written.

// renameRoom is what a renamed id may add to the tape's: a "-N" suffix.
const renameRoom = len("-99999")

// PlanImport checks that Import can write every session of t into store,
// and returns the id each will have there, in tape order (the tape's own,
// or with opts.Rename a new one for an id that is taken). It writes
// nothing. An error names the session and says what to do. A nil store
// checks the tape alone, before a store is opened.
func PlanImport(ctx context.Context, store capture.Reader, t *Tape, opts *ImportOptions) ([]string, error) {
	if opts == nil {
		opts = &ImportOptions{}
	}
	plan := make([]string, 0, len(t.Sessions))
	first := make(map[string]int, len(t.Sessions)) // tape id → its first session's index
	taken := make(map[string]bool, len(t.Sessions))
	held := func(id string) (bool, error) {
		if taken[id] || store == nil {
			return taken[id], nil
		}
		_, err := store.Session(ctx, id)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, capture.ErrNotFound):
			return false, nil
		}
		return false, err
	}
	for i, ts := range t.Sessions {
		id := ts.Session.ID
		if err := capture.CheckSessionID(id); err != nil {
			return nil, fmt.Errorf("%w: session %d of the tape: %v; nothing was imported", ErrTapeInvalid, i+1, err)
		}
		j, dup := first[id]
		if !dup {
			first[id] = i
		}
		if dup && !opts.Rename {
			return nil, fmt.Errorf("%w: the tape holds session %s twice (its sessions %d and %d); nothing was imported: "+
				"import with --rename to give the second a new id", ErrTapeInvalid, id, j+1, i+1)
		}
		inStore, err := held(id)
		if err != nil {
			return nil, err
		}
		if inStore {
			if !opts.Rename {
				return nil, fmt.Errorf("the store already holds session %s; nothing was imported: import with --rename to give the tape's a new id", id)
			}
			if len(id)+renameRoom > capture.MaxSessionIDLen {
				return nil, fmt.Errorf("session %s is held already, and its id is too long to rename within the %d bytes a session id may have; nothing was imported",
					id, capture.MaxSessionIDLen)
			}
			base := id
			for n := 2; ; n++ {
				id = fmt.Sprintf("%s-%d", base, n)
				if h, err := held(id); err != nil {
					return nil, err
				} else if !h {
					break
				}
			}
		}
		taken[id] = true
		plan = append(plan, id)
	}
	return plan, nil
}

// undoImport removes the sessions of plan that an import which failed
// wrote (none of them was in the store before: PlanImport saw to it), and
// says so in the error it returns.
func undoImport(store capture.Store, plan []string, err error) error {
	// The import's context may be what ended it: the undo gets its own.
	ctx := context.Background()
	var left []string
	for _, id := range plan {
		if derr := store.DeleteSession(ctx, id); derr != nil && !errors.Is(derr, capture.ErrNotFound) {
			left = append(left, id)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("%w; the import wrote sessions it could not remove again: %v (delete them, then import again)", err, left)
	}
	return fmt.Errorf("%w; nothing was imported", err)
}
