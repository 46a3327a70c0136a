package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
)

// What a recorder could not record, said where the user looks: loudly
// when it starts on a disk with less free space than --min-free keeps
// (it forwards every call and records none), and in `ls`, which would
// otherwise say only that no sessions were recorded — while it runs, from
// its counts; after it, from lostFile, which it leaves in the data
// directory (a few hundred bytes, written as an ordinary file, which a
// disk at the floor still takes).

// lostFile holds what the last recording into a directory could not
// record.
const lostFile = "unrecorded.json"

// lostRecord is lostFile's content.
type lostRecord struct {
	PID    int       `json:"pid"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Lost   int64     `json:"lost"`
	Reason string    `json:"reason,omitempty"`
}

// warnNoRoom says, when the store cannot record now for want of space,
// that nothing will be recorded, why, and what to do.
func warnNoRoom(w io.Writer, dir string, st *badgerstore.Store) {
	sp := st.Space()
	if !sp.Paused {
		return
	}
	mib := func(n int64) string { return fmt.Sprintf("%d MiB", n>>20) } // as --min-free takes it
	if sp.MinFree > 0 && sp.Free >= 0 && sp.Free < sp.MinFree {
		free := mib(sp.Free)
		fmt.Fprintf(w, "mcptape: WARNING: NOTHING WILL BE RECORDED: the disk that holds %s has %s free, less than the %s that --min-free keeps free "+
			"(so that a full disk never stops mcptape). Calls are forwarded all the same, and every message not recorded is counted "+
			"(`mcptape ls` shows the count). To record, free space on that disk, lower the floor (e.g. --min-free 32MiB; 24MiB at least), "+
			"or record into a directory on a larger disk with --data DIR.\n", dir, free, mib(sp.MinFree))
		return
	}
	fmt.Fprintf(w, "mcptape: WARNING: NOTHING WILL BE RECORDED: %s. Calls are forwarded all the same, and every message not recorded is counted "+
		"(`mcptape ls` shows the count).\n", sp.Reason)
}

// pausedReason is why st records nothing now, or empty.
func pausedReason(st *badgerstore.Store) string {
	if sp := st.Space(); sp.Paused {
		return sp.Reason
	}
	return ""
}

// saveLost writes lostFile for a recording that lost messages, and
// removes it after one that lost none.
func saveLost(dir string, from time.Time, stats capture.Stats, reason string) {
	path := filepath.Join(dir, lostFile)
	n := stats.Lost + stats.Dropped
	if n == 0 {
		_ = os.Remove(path)
		return
	}
	if reason == "" {
		reason = stats.LastError
	}
	b, err := json.Marshal(lostRecord{PID: os.Getpid(), From: from, To: time.Now(), Lost: n, Reason: reason})
	if err != nil {
		return
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		_ = os.Remove(tmp)
		return
	}
	_ = os.Rename(tmp, path)
}

// printLost tells an `ls` what was not recorded: by the recorder that
// holds the store now, or by the last one.
func printLost(ctx context.Context, w io.Writer, dir string, store openedStore) {
	var since time.Time // a running recorder's start: the file speaks of wraps since then
	if c, ok := store.(*remotestore.Client); ok {
		st, err := c.Status(ctx)
		if err != nil {
			return
		}
		if n := st.Stats.Lost + st.Stats.Dropped; n > 0 {
			fmt.Fprintf(w, "(%d message(s) not recorded by the running recorder, pid %d, since %s", n, st.PID, st.Started.Local().Format(time.DateTime))
			if st.Stats.LastError != "" {
				fmt.Fprintf(w, ": %s", clean(st.Stats.LastError))
			}
			fmt.Fprintln(w, ")")
		}
		if st.Paused != "" {
			fmt.Fprintf(w, "(recording is paused in the process that holds the store, pid %d: %s; what wraps hand it waits in their spools until it records again)\n", st.PID, clean(st.Paused))
		}
		since = st.Started
		if since.IsZero() {
			return
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, lostFile))
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return
	}
	var l lostRecord
	if json.Unmarshal(b, &l) != nil || l.Lost <= 0 || (!since.IsZero() && l.To.Before(since)) {
		return
	}
	fmt.Fprintf(w, "(%d message(s) not recorded by the last recording, from %s to %s", l.Lost,
		l.From.Local().Format(time.DateTime), l.To.Local().Format(time.DateTime))
	if l.Reason != "" {
		fmt.Fprintf(w, ": %s", clean(l.Reason))
	}
	fmt.Fprintln(w, ")")
}
