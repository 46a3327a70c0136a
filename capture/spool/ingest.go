package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// IngestOptions configures an Ingester. Nil means defaults.
type IngestOptions struct {
	// Interval is how often the spool folder is looked at while its
	// spools change. Zero means 250 ms, so that a dashboard shows a wrap's
	// traffic within a second.
	Interval time.Duration
	// IdleInterval is how often it is looked at while nothing in it
	// changes, where the ingester is told of changes (inotify, on Linux);
	// where it is not told, the folder is looked at every Interval. Zero
	// means 2 s.
	IdleInterval time.Duration
	// Logger receives the ingester's events. Nil discards them.
	Logger *slog.Logger
	// Traced, when set, is called with each session of a spool whose wrap
	// exports its calls as spans itself (Options.Traced), before the
	// records that name it are ingested: an owner that exports spans too
	// leaves that session out, so that no call is exported twice.
	Traced func(sessionID string)
}

// Ingester moves the records of the spools in a data directory into the
// store of the process that owns it, through that process's recorder. One
// per owner; run it with Run.
type Ingester struct {
	dataDir string
	rec     *capture.Recorder
	store   capture.Reader
	o       IngestOptions
	log     *slog.Logger

	mu      sync.Mutex
	files   map[string]*fileState
	totals  IngestStats
	refused map[string]bool // files not read, logged once
}

// fileState is what the ingester knows of one spool.
type fileState struct {
	offset  int64 // the next record starts here
	remap   *capture.Remap
	session string // the session the spool records
	ended   bool   // its End record was read
	failed  int    // consecutive failed passes, for the log
	written int64  // the writer's count of messages, as of the last record read
	// The spool's latest records of its session and exchanges, as the
	// spool holds them: the marks below are made on copies of them.
	sess  *capture.Session
	xs    map[uint64]*capture.Exchange
	marks marks
	// marked says the marks are in the store already: nothing was noted
	// since the last record ingested.
	marked bool
	// traced holds the sessions told to IngestOptions.Traced.
	traced map[string]bool
}

// tell calls traced once for each session of b it has not told before.
func (fs *fileState) tell(b *capture.Batch, traced func(string)) {
	say := func(id string) {
		if id == "" || fs.traced[id] {
			return
		}
		if fs.traced == nil {
			fs.traced = map[string]bool{}
		}
		fs.traced[id] = true
		traced(id)
	}
	for _, s := range b.Sessions {
		say(s.ID)
	}
	for _, x := range b.Exchanges {
		say(x.SessionID)
	}
	for _, m := range b.Messages {
		say(m.SessionID)
	}
}

// marks is what an ingester found wrong with a spool, to be recorded on
// its session: damaged bytes, what they held, and whether its wrap ended
// without closing the session.
type marks struct {
	lost     int64
	findings []capture.Finding
	damaged  bool // some bytes could not be read: the spool is kept aside
	unclosed bool // the writer is gone and never closed the session
}

// IngestStats counts what an Ingester has done.
type IngestStats struct {
	// Messages, Records and Files ingested; Removed spools deleted once
	// complete; Damaged spools kept aside (in DamagedDir) because some of
	// their bytes could not be read; Lost the messages those held.
	Messages, Records, Files, Removed, Damaged, Lost int64
}

// NewIngester ingests the spools of dataDir through rec, whose store is
// store (read to learn what earlier owners ingested already).
func NewIngester(dataDir string, rec *capture.Recorder, store capture.Reader, opts *IngestOptions) *Ingester {
	g := &Ingester{dataDir: dataDir, rec: rec, store: store, files: map[string]*fileState{}, refused: map[string]bool{}}
	if opts != nil {
		g.o = *opts
	}
	if g.o.Interval <= 0 {
		g.o.Interval = 250 * time.Millisecond
	}
	if g.o.IdleInterval <= 0 {
		g.o.IdleInterval = 2 * time.Second
	}
	g.o.IdleInterval = max(g.o.IdleInterval, g.o.Interval)
	g.log = g.o.Logger
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	return g
}

// Stats returns the counts so far.
func (g *Ingester) Stats() IngestStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.totals
}

// Run ingests until ctx ends, then makes one last pass (with a short bound)
// so that what the wraps wrote before the owner stops is not left waiting.
// It looks at the spool folder when told of a change in it (at most every
// Interval) and every IdleInterval besides; see IngestOptions.
func (g *Ingester) Run(ctx context.Context) {
	changed, stop := g.watch()
	idle := g.o.Interval
	if changed != nil {
		defer stop()
		idle = g.o.IdleInterval
	}
	last := time.Now()
	_, _ = g.Once(ctx)
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			g.last(ctx)
			return
		case <-changed:
			// A change brings the next pass forward, to an Interval after
			// the last one: a wrap under load writes a record every few
			// milliseconds.
			t.Reset(max(g.o.Interval-time.Since(last), 0))
		case <-t.C:
			last = time.Now()
			_, _ = g.Once(ctx)
			t.Reset(idle)
		}
	}
}

// last is the pass after ctx ended, with a short bound of its own.
func (g *Ingester) last(ctx context.Context) {
	last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = g.Once(last)
}

// watch asks to be told of changes to the spool folder, making it if it is
// not there yet (the owner's data directory exists). It returns a nil
// channel where that cannot be done: Run then polls every Interval.
func (g *Ingester) watch() (<-chan struct{}, func()) {
	dir := filepath.Join(g.dataDir, Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil
	}
	changed, stop, err := watchDir(dir)
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			g.log.Debug("not watching the spool folder; looking at it every interval", "dir", dir, "err", err)
		}
		return nil, nil
	}
	return changed, stop
}

// Once looks at every spool once and ingests what is new, returning the
// number of messages ingested.
func (g *Ingester) Once(ctx context.Context) (int, error) {
	paths, refused, err := List(g.dataDir)
	if err != nil {
		return 0, err
	}
	for _, r := range refused {
		if !g.refused[r.Path] {
			g.refused[r.Path] = true
			g.log.Warn("a file in the spool folder is not read: "+r.Why+"; only the spools this user's wraps write are", "file", r.Path)
		}
	}
	total := 0
	var errs []error
	for _, p := range paths {
		n, err := g.file(ctx, p)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return total, errors.Join(errs...)
}

func (g *Ingester) file(ctx context.Context, path string) (int, error) {
	g.mu.Lock()
	fs := g.files[path]
	g.mu.Unlock()
	running := Running(path)
	if fs == nil {
		var err error
		if fs, err = g.recover(ctx, path); err != nil {
			return 0, g.unreadable(path, err)
		}
		g.mu.Lock()
		g.files[path] = fs
		g.totals.Files++
		g.mu.Unlock()
	}
	n := 0
	for rec, err := range Read(path, fs.offset) {
		if err != nil {
			return n, g.unreadable(path, err)
		}
		if rec.Damage != nil {
			g.damaged(path, fs, rec.Damage)
		}
		if rec.Traced && g.o.Traced != nil {
			fs.tell(rec.Batch, g.o.Traced)
		}
		if err := g.rec.Ingest(ctx, fs.patch(rec.Batch), fs.remap); err != nil {
			fs.failed++
			if fs.failed == 1 {
				g.log.Warn("could not store a spool's records; will try again", "spool", path, "err", err)
			}
			return n, fmt.Errorf("ingesting %s: %w", path, err)
		}
		fs.failed = 0
		fs.read(rec)
		n += len(rec.Batch.Messages)
		g.mu.Lock()
		g.totals.Records++
		g.totals.Messages += int64(len(rec.Batch.Messages))
		g.mu.Unlock()
		if ctx.Err() != nil {
			return n, nil
		}
	}
	if running && !fs.ended {
		return n, nil
	}
	// Its wrap is gone: what it did not write whole is damage, a session
	// it did not close is closed, and both are recorded on the session.
	if d := Tail(path, fs.offset); d != nil {
		g.damaged(path, fs, d)
	}
	if !fs.ended && !fs.marks.unclosed {
		fs.marks.unclosed, fs.marked = true, false
	}
	if !fs.marked && fs.sess != nil {
		if err := g.rec.Ingest(ctx, fs.patch(&capture.Batch{}), fs.remap); err != nil {
			return n, fmt.Errorf("ingesting %s: %w", path, err)
		}
		fs.marked = true
	}
	g.done(path, fs.marks.damaged)
	return n, nil
}

// unreadable handles a spool that cannot be read at all: one that is not
// a spool, or not one this ingester reads.
func (g *Ingester) unreadable(path string, err error) error {
	var why string
	switch {
	case errors.Is(err, ErrRefused):
		why = "a file in the spool folder is not read: only the regular files this user's wraps write are"
	case errors.Is(err, ErrFormat):
		// Maybe a newer mcptape's: left where it is, for that one.
		why = "a file in the spool folder is not a spool this mcptape reads (a newer mcptape's?); it is left alone"
	default:
		return err
	}
	g.mu.Lock()
	logged := g.refused[path]
	g.refused[path] = true
	g.mu.Unlock()
	if !logged {
		g.log.Warn(why, "file", path)
	}
	return nil
}

// damaged notes unreadable bytes of a spool, to be recorded on its session.
func (g *Ingester) damaged(path string, fs *fileState, d *Damage) {
	lost := d.Claimed
	if d.Before >= 0 {
		lost = max(d.Before-fs.written, 0)
	}
	what := "an unknown number of messages"
	if lost > 0 {
		what = fmt.Sprintf("%d messages", lost)
	}
	fs.marks.lost += max(lost, 1)
	fs.marks.damaged, fs.marked = true, false
	fs.marks.findings = append(fs.marks.findings, capture.Finding{Kind: capture.FindingTruncated,
		Message: fmt.Sprintf("part of this session's spool could not be read: %s, which held %s; the spool is kept in %s",
			d, what, filepath.Join(g.dataDir, Dir, DamagedDir))})
	g.log.Warn("part of a spool could not be read; its session is marked, and the spool kept aside",
		"spool", path, "offset", d.Offset, "bytes", d.Bytes, "reason", d.Reason, capture.LogKeyLost, lost)
	g.mu.Lock()
	g.totals.Lost += max(lost, 1)
	g.mu.Unlock()
}

// done deletes a spool every readable record of which is stored, or keeps
// it in DamagedDir when part of it could not be read.
func (g *Ingester) done(path string, damaged bool) {
	var err error
	if damaged {
		dir := filepath.Join(g.dataDir, Dir, DamagedDir)
		if err = os.MkdirAll(dir, 0o700); err == nil {
			err = os.Rename(path, filepath.Join(dir, filepath.Base(path)))
		}
	} else {
		err = os.Remove(path)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		g.log.Warn("could not move a finished spool away", "spool", path, "err", err)
		return
	}
	g.mu.Lock()
	delete(g.files, path)
	if damaged {
		g.totals.Damaged++
	} else {
		g.totals.Removed++
	}
	g.mu.Unlock()
}

// read notes a record that was ingested.
func (fs *fileState) read(rec *Record) {
	for _, s := range rec.Batch.Sessions {
		fs.session = s.ID
		fs.sess = s
	}
	for _, x := range rec.Batch.Exchanges {
		if fs.xs == nil {
			fs.xs = map[uint64]*capture.Exchange{}
		}
		fs.xs[x.ID] = x
	}
	fs.offset = rec.Offset
	fs.ended = fs.ended || rec.End
	if rec.Written > 0 {
		fs.written = rec.Written
	}
	fs.marked = true // patch put the marks on the record's session

}

// patch returns b with the marks made on its session and exchanges (on
// the latest records of them when b has none): a later record of the
// spool, written by a wrap that knew nothing of them, must not wipe them.
func (fs *fileState) patch(b *capture.Batch) *capture.Batch {
	m := fs.marks
	if m.lost == 0 && len(m.findings) == 0 && !m.unclosed {
		return b
	}
	out := *b
	sessions, exchanges := b.Sessions, b.Exchanges
	if len(sessions) == 0 && fs.sess != nil {
		sessions = []*capture.Session{fs.sess}
	}
	if len(exchanges) == 0 {
		for _, x := range fs.xs {
			exchanges = append(exchanges, x)
		}
	}
	out.Sessions = nil
	for _, s := range sessions {
		c := *s
		c.Status = capture.StatusIncomplete
		c.Lost += int(m.lost)
		c.Findings += len(m.findings)
		switch {
		case m.lost > 0 && m.unclosed:
			c.LossReason = fmt.Sprintf("part of the spool its wrap wrote could not be read (%d messages lost, or more), and the wrap ended without closing the session (killed, or its machine went down)", m.lost)
		case m.lost > 0:
			c.LossReason = fmt.Sprintf("part of the spool its wrap wrote could not be read (%d messages lost, or more)", m.lost)
		default:
			c.LossReason = "the wrap recording it ended without closing the session (killed, or its machine went down): what it had not yet written is missing"
		}
		if m.unclosed && c.Command != nil && c.Command.Exit == "" {
			cmd := *c.Command
			cmd.Exit = "not known: the wrap that ran it ended without recording how"
			c.Command = &cmd
		}
		out.Sessions = append(out.Sessions, &c)
	}
	out.Exchanges = nil
	for _, x := range exchanges {
		c := *x
		c.FindingList = append(append([]capture.Finding(nil), x.FindingList...), m.findings...)
		if m.unclosed && c.End.IsZero() {
			c.End, c.Aborted = c.Start, true
			if fs.sess != nil && fs.sess.End.After(c.Start) {
				c.End = fs.sess.End
			}
			c.Error = "the wrap ended without closing the stream (killed, or its machine went down)"
		}
		out.Exchanges = append(out.Exchanges, &c)
	}
	return &out
}

// recover learns how much of a spool an earlier owner ingested: the
// spool's messages, in order, were given the store's sequence numbers in
// the same order, so the first k messages the store holds for the spool's
// session are the spool's first k messages, and records made only of those
// are done. The damage it passes is noted again, as the earlier owner did.
func (g *Ingester) recover(ctx context.Context, path string) (*fileState, error) {
	fs := &fileState{remap: capture.NewRemap()}
	var session string
	for rec, err := range Read(path, 0) {
		if err != nil {
			return nil, err
		}
		for _, s := range rec.Batch.Sessions {
			session = s.ID
		}
		if session != "" {
			break
		}
	}
	if session == "" {
		return fs, nil
	}
	if _, err := g.store.Session(ctx, session); errors.Is(err, capture.ErrNotFound) {
		return fs, nil // never ingested
	} else if err != nil {
		return nil, err
	}
	var stored []uint64
	for m, err := range g.store.Messages(ctx, session, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return nil, err
		}
		stored = append(stored, m.Seq)
	}
	var storedX []uint64
	for x, err := range g.store.Exchanges(ctx, session) {
		if err != nil {
			return nil, err
		}
		storedX = append(storedX, x.ID)
	}
	i, j := 0, 0
	for rec, err := range Read(path, 0) {
		if err != nil {
			return nil, err
		}
		for _, x := range rec.Batch.Exchanges {
			if _, ok := fs.remap.Exchange[x.ID]; !ok && j < len(storedX) {
				fs.remap.Exchange[x.ID] = storedX[j]
				j++
			}
		}
		complete := true
		for _, m := range rec.Batch.Messages {
			if _, ok := fs.remap.Seq[m.Seq]; ok {
				continue
			}
			if i < len(stored) {
				fs.remap.Seq[m.Seq] = stored[i]
				i++
			} else {
				complete = false
			}
		}
		if !complete {
			break
		}
		if rec.Damage != nil {
			g.damaged(path, fs, rec.Damage)
		}
		fs.read(rec)
	}
	return fs, nil
}
