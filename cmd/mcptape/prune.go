package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
)

const pruneUsage = "[--data DIR] [--older-than 30d] [--max-size 2GiB] [--dry-run] [--json]"

// runPrune is `mcptape prune`: delete old sessions. A running recorder or
// dashboard holds the store, and prunes it when asked through its API;
// else the store is opened here.
func runPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("prune", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store")
	var olderThan age
	fs.Var(&olderThan, "older-than", "delete the sessions whose latest traffic is older than this, e.g. 30d, 12h (d is a day, w a week)")
	maxSize := fs.String("max-size", "", "then delete the oldest sessions until the store is under this size on disk, e.g. 2GiB")
	dryRun := fs.Bool("dry-run", false, "list the sessions that would be deleted, and delete nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	o := capture.PruneOptions{OlderThan: time.Duration(olderThan), DryRun: *dryRun}
	if *maxSize != "" {
		n, err := parseSize(*maxSize)
		if err != nil || n == 0 {
			return usagef("--max-size %q: want a size like 2GiB", *maxSize)
		}
		o.MaxSize = n
	}
	if o.OlderThan <= 0 && o.MaxSize <= 0 {
		return usagef("say what to delete: --older-than 30d (sessions quiet for 30 days), --max-size 2GiB (the oldest, down to that size), or both")
	}
	if err := noStore(*data); err != nil {
		return err
	}
	var rep *capture.PruneReport
	c, st, err := remotestore.Discover(ctx, *data)
	switch {
	case err == nil:
		defer c.Close()
		rep, err = c.Prune(ctx, o)
		if err != nil {
			return fmt.Errorf("the mcptape that holds %s (pid %d) could not prune it: %w", *data, st.PID, err)
		}
		if !*asJSON {
			fmt.Fprintf(stderr, "mcptape prune: the store is held by a running mcptape (pid %d), which pruned it\n", st.PID)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	default:
		if rep, err = pruneStopped(ctx, *data, o); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := newJSONLines(stdout)
		enc.indent = "  "
		return enc.Encode(rep)
	}
	writePruneReport(stdout, rep, o)
	return nil
}

// pruneStopped prunes a store no process holds.
func pruneStopped(ctx context.Context, dir string, o capture.PruneOptions) (*capture.PruneReport, error) {
	st, err := openWrite(dir, &badgerstore.Options{})
	if err != nil {
		return nil, err
	}
	rep, err := st.Prune(ctx, o)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return rep, nil
}

func writePruneReport(w io.Writer, rep *capture.PruneReport, o capture.PruneOptions) {
	verb, done := "deleted", "deleted"
	if rep.DryRun {
		verb, done = "would delete", "would be deleted"
	}
	for _, p := range rep.Deleted {
		why := "over --max-size"
		if p.Why == "age" {
			why = "quiet for longer than --older-than"
		}
		fmt.Fprintf(w, "%s %s  started %s  last traffic %s  about %s  (%s)\n", verb, clean(p.ID),
			p.Start.Local().Format("2006-01-02 15:04"), p.End.Local().Format("2006-01-02 15:04"), byteSize(p.Bytes), why)
	}
	sizes := ""
	if rep.SizeBefore >= 0 && rep.SizeAfter >= 0 {
		arrow := "->"
		if rep.DryRun {
			arrow = "-> about"
		}
		sizes = fmt.Sprintf("; the store %s %s %s on disk", byteSize(rep.SizeBefore), arrow, byteSize(rep.SizeAfter))
	}
	fmt.Fprintf(w, "%d session(s) %s%s\n", len(rep.Deleted), done, sizes)
	if rep.Kept > 0 {
		fmt.Fprintf(w, "%d session(s) kept although old: they are open or had traffic in the last %s (a recorder may still write them)\n",
			rep.Kept, capture.PruneGrace)
	}
	if rep.DryRun && len(rep.Deleted) > 0 {
		fmt.Fprintln(w, "nothing was deleted (--dry-run); run again without it to delete them")
	}
}

// age is a duration flag that also takes days and weeks (30d, 2w, 1d12h).
type age time.Duration

func (a *age) String() string {
	if a == nil || *a == 0 {
		return ""
	}
	return time.Duration(*a).String()
}

func (a *age) Set(v string) error {
	d, err := parseAge(v)
	if err != nil {
		return err
	}
	*a = age(d)
	return nil
}

// parseAge reads a Go duration (90m, 12h) whose leading part may count
// days (d) and weeks (w): 30d, 2w, 1d12h.
func parseAge(v string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an age like 30d, 12h or 1w", v)
	s := strings.TrimSpace(v)
	var total time.Duration
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}} {
		i := strings.Index(s, u.suffix)
		if i < 0 {
			continue
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 {
			return 0, bad
		}
		total += time.Duration(n) * u.unit
		s = s[i+1:]
	}
	if s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, bad
		}
		total += d
	}
	if total <= 0 && v != "0" {
		return 0, bad
	}
	return total, nil
}
