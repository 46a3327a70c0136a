package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
)

// repairFlags are verify's flags for --repair.
type repairFlags struct {
	repair  bool
	into    string
	replace bool
}

func (rf *repairFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&rf.repair, "repair", false, "recover what a damaged store holds into a new directory (--into), leaving the damaged one as it is, and say what was recovered and what was lost")
	fs.StringVar(&rf.into, "into", "", "with --repair, the `DIR` to recover into, which must not exist (default: the store's directory with .repaired added)")
	fs.BoolVar(&rf.replace, "replace", false, "with --repair, then put the recovered store in the damaged one's place; the damaged one is kept beside it, renamed DIR.damaged-TIME")
}

func (rf *repairFlags) check() error {
	if !rf.repair && (rf.into != "" || rf.replace) {
		return usagef("--into and --replace go with --repair")
	}
	return nil
}

// notOpening adds to the error of a store Badger does not open what to
// do next (unless it is not a store of this version: ErrSchema says what
// to do).
func notOpening(dir string, err error) error {
	if errors.Is(err, badgerstore.ErrSchema) || errors.Is(err, badgerstore.ErrLocked) {
		return err
	}
	return fmt.Errorf("%w\nThe store in %s does not open: `mcptape verify --data %s` names the damage, and "+
		"`mcptape verify --repair --data %s` recovers what it holds into a new directory, leaving this one as it is", err, dir, dir, dir)
}

// runRepair is `verify --repair`: the store copied into a new directory
// and mended there (badgerstore.Recover); the damaged one is only read,
// and moved aside (never deleted) only with --replace. rep and verr are
// verify's findings on the damaged store.
func runRepair(ctx context.Context, dir string, rf *repairFlags, rep *capture.VerifyReport, verr error, stdout, stderr io.Writer) error {
	if c, a, err := remotestore.Discover(ctx, dir); err == nil {
		c.Close()
		return fmt.Errorf("%s is in use by a running mcptape (pid %d), which reads and writes it: stop it, then repair", dir, a.PID)
	}
	if errors.Is(verr, badgerstore.ErrUnclean) || errors.Is(verr, badgerstore.ErrLocked) || errors.Is(verr, os.ErrNotExist) {
		return verr
	}
	if verr == nil && rep.OK() {
		if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
			return fmt.Errorf("no store in %s to repair", dir)
		}
		fmt.Fprintf(stdout, "ok: no damage found in %s; nothing to repair\n", dir)
		return nil
	}
	if rep != nil {
		for _, d := range rep.Damage {
			fmt.Fprintf(stdout, "damaged: %s\n", clean(d.String()))
		}
	} else {
		fmt.Fprintf(stdout, "damaged: %s\n", clean(verr.Error()))
	}
	into := rf.into
	if into == "" {
		into = filepath.Clean(dir) + ".repaired"
	}
	if _, err := os.Stat(into); err == nil {
		return fmt.Errorf("%s exists already: remove it, or name another directory with --into", into)
	}
	fmt.Fprintf(stdout, "repairing: copying %s into %s and mending the copy (the damaged store is not changed)\n", dir, into)
	logger, _ := newLogger(stderr, "warn")
	res, err := badgerstore.Recover(ctx, dir, into, logger)
	if err != nil {
		return fmt.Errorf("the repair failed, and %s is as it was: %w", dir, err)
	}
	// The copy is no recorder's: a stale announcement would name one.
	_ = os.Remove(filepath.Join(into, remotestore.AnnouncementFile))
	for _, m := range res.Mended {
		fmt.Fprintf(stdout, "mended: %s\n", clean(m))
	}
	if res.Rebuilt {
		fmt.Fprintf(stdout, "rebuilt from its tables: %d record(s) read from %d table(s)\n", res.Records, res.Tables)
	}
	for _, d := range res.Lost {
		fmt.Fprintf(stdout, "lost: %s\n", clean(d.String()))
	}
	for _, id := range res.Marked {
		fmt.Fprintf(stdout, "lost: session %s: messages its record counts are missing; it is marked incomplete, with the count of lost ones\n", clean(id))
	}
	v := res.Verify
	fmt.Fprintf(stdout, "recovered: %d session(s), %d exchange(s), %d message(s) in %s\n", v.Sessions, v.Exchanges, v.Messages, into)
	for _, d := range v.Damage {
		fmt.Fprintf(stdout, "still damaged: %s\n", clean(d.String()))
	}
	if len(res.Lost) == 0 && len(res.Marked) == 0 && v.OK() {
		fmt.Fprintln(stdout, "nothing was lost")
	}
	if rf.replace {
		aside := filepath.Clean(dir) + ".damaged-" + time.Now().Format("20060102-150405")
		if err := os.Rename(dir, aside); err != nil {
			return fmt.Errorf("the recovered store is in %s, but moving the damaged one aside failed: %w", into, err)
		}
		if err := os.Rename(into, dir); err != nil {
			return fmt.Errorf("the damaged store was moved to %s, and the recovered one could not take its place (%w): move %s to %s yourself", aside, err, into, dir)
		}
		fmt.Fprintf(stdout, "replaced: %s now holds the recovered store; the damaged one is kept in %s (delete it once you are content)\n", dir, aside)
	} else {
		fmt.Fprintf(stdout, "next: use it with --data %s, or put it in the damaged one's place with `mcptape verify --repair --replace --data %s` "+
			"(which keeps the damaged one beside it)\n", into, dir)
	}
	if !v.OK() {
		return fmt.Errorf("the recovered store in %s still holds damage the repair cannot mend (%d problem(s), listed above): the records named are lost, the rest reads",
			into, len(v.Damage))
	}
	return nil
}
