package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/memlimit"
	"github.com/mcptape/mcptape/replay"
)

// runExport is `mcptape export`: sessions of a store as a tape file (or a
// HAR log, or JSON Lines).
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store")
	out := fs.String("o", "-", "the file to write; - is stdout")
	quiet := fs.Bool("q", false, "no progress or summary on stderr")
	format := fs.String("format", formatTape, "tape (mcptape's, for import and replay), har (HAR 1.2, for a browser's developer tools) or jsonl (a JSON object per message, as show --json prints them)")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	switch *format {
	case formatTape, formatHAR, formatJSONL:
	default:
		return usagef("--format %q: want tape, har or jsonl", *format)
	}
	// Past damage: the tape holds what can be read, and the damage is
	// named after it is written.
	store, err := openTolerant(ctx, *data)
	if err != nil {
		return err
	}
	defer store.Close()
	// Prefix matching as in `show`; a session named twice is written once.
	var ids []string
	messages := 0
	seen := map[string]bool{}
	for _, a := range fs.Args() {
		s, err := findSession(ctx, store, a)
		if err != nil {
			return err
		}
		if !seen[s.ID] {
			seen[s.ID] = true
			ids = append(ids, s.ID)
			messages += s.Messages
		}
	}
	switch {
	case len(ids) > 0:
	case *format == formatTape:
		messages = -1 // the tape learns the total as it lists the sessions
	default:
		for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
			if err != nil {
				return err
			}
			messages += s.Messages
		}
	}
	var total atomic.Int64 // the progress line's; -1 while unknown
	total.Store(int64(messages))

	var w io.Writer = stdout
	var tmp *os.File
	if *out != "-" {
		// Write beside the target and rename at the end, so a failed or
		// interrupted export never leaves half a tape under the name.
		tmp, err = os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*")
		if err != nil {
			return err
		}
		defer func() {
			if tmp != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		w = tmp
	}
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	stop := func() {}
	if !*quiet {
		stop = progress(stderr, "export", cw, &total)
	}
	var counts replay.ExportCounts
	if *format == formatTape {
		counts, err = replay.ExportListed(ctx, store, ids, bw, "mcptape "+version, func(n int) { total.Store(int64(n)) })
	} else {
		counts, err = exportAs(ctx, *format, store, ids, bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	stop()
	if err != nil {
		return err
	}
	if tmp != nil {
		if err := tmp.Sync(); err != nil {
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), *out); err != nil {
			return err
		}
		tmp = nil
	}
	if !*quiet {
		dest := *out
		if dest == "-" {
			dest = "stdout"
		}
		fmt.Fprintf(stderr, "mcptape export: %d session(s), %d message(s), %s to %s\n", counts.Sessions, counts.Messages, byteSize(cw.n.Load()), dest)
		if counts.Later > 0 {
			fmt.Fprintf(stderr, "mcptape export: %d message(s) of calls that began while the export ran are left for the next export\n", counts.Later)
		}
	}
	if err := store.err(); err != nil {
		return fmt.Errorf("%w; the tape holds the %d message(s) that could be read", err, counts.Messages)
	}
	return nil
}

// runImport is `mcptape import`: a tape's sessions into a store.
func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store to import into")
	rename := fs.Bool("rename", false, "give a session whose id the store holds already a new id (a -2 suffix) instead of refusing")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("name one tape file (- reads stdin)")
	}
	path := fs.Arg(0)
	if path == "-" {
		// A tape is read from a file a record at a time (OpenTape):
		// stdin goes to a temporary file first.
		tmp, err := spoolStdin()
		if err != nil {
			return err
		}
		defer os.Remove(tmp)
		path = tmp
	}
	tape, err := replay.OpenTape(path)
	if err != nil {
		if fs.Arg(0) == "-" {
			err = fmt.Errorf("stdin: %w", errors.Unwrap(err))
		}
		return err
	}
	defer tape.Close()
	// What the tape alone makes impossible, before a store is created.
	if _, err := replay.PlanImport(ctx, nil, tape, &replay.ImportOptions{Rename: *rename}); err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	// A tape of hundreds of MB passes through Badger's compactions: the
	// store is sized for one large write, and the Go heap held near what
	// is live (GOMEMLIMIT, when set, wins), which kept the import of a
	// 530 MB tape at a peak RSS of about 260 MB instead of 1 GB.
	_ = applyMemoryLimit(importMemoryLimit, false, memlimit.Set)
	store, err := openWrite(*data, &badgerstore.Options{BulkLoad: true})
	if err != nil {
		return err
	}
	ids, err := replay.Import(ctx, store, tape, &replay.ImportOptions{Rename: *rename})
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	for _, id := range ids {
		fmt.Fprintln(stdout, clean(id))
	}
	if err != nil {
		if len(ids) > 0 {
			return fmt.Errorf("%w (the %d session(s) listed above were imported)", err, len(ids))
		}
		return err
	}
	for i, ts := range tape.Sessions {
		if i < len(ids) && ids[i] != ts.Session.ID {
			fmt.Fprintf(stderr, "mcptape import: %s was renamed %s (the store held that id already)\n", clean(ts.Session.ID), clean(ids[i]))
		}
	}
	fmt.Fprintf(stderr, "mcptape import: %d session(s) into %s\n", len(ids), *data)
	return nil
}

// importMemoryLimit is the soft limit of the Go heap while importing.
const importMemoryLimit = "220MiB"

// importStdin is what `import -` reads.
var importStdin io.Reader = os.Stdin

// spoolStdin copies stdin to a temporary file and returns its name.
func spoolStdin() (string, error) {
	f, err := os.CreateTemp("", "mcptape-import-*.tape.json")
	if err != nil {
		return "", fmt.Errorf("spooling stdin to a temporary file: %w", err)
	}
	_, err = io.Copy(f, importStdin)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("spooling stdin to %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// countingWriter counts what passes through it, for progress reports.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// progressEvery is how often a long export reports on stderr.
const progressEvery = time.Second

// progress reports a long copy on stderr every progressEvery, starting
// after the first (small exports stay quiet); the returned func stops it.
func progress(stderr io.Writer, what string, cw *countingWriter, messages *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				all := "listing the sessions"
				if n := messages.Load(); n >= 0 {
					all = fmt.Sprintf("%d messages in all", n)
				}
				fmt.Fprintf(stderr, "mcptape %s: %s written (%s), %s\n", what, byteSize(cw.n.Load()), all,
					time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); <-finished }
}

func byteSize(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d kB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
