package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// IngestOptions configures an Ingester. Nil means defaults.
type IngestOptions struct {
	// Interval is how often the spool folder is looked at. Zero means
	// 250 ms, so that a dashboard shows a wrap's traffic within a second.
	Interval time.Duration
	// Logger receives the ingester's events. Nil discards them.
	Logger *slog.Logger
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

	mu     sync.Mutex
	files  map[string]*fileState
	totals IngestStats
}

// fileState is what the ingester knows of one spool.
type fileState struct {
	offset  int64 // the next record starts here
	remap   *capture.Remap
	session string // the session the spool records
	ended   bool   // its End record was read
	failed  int    // consecutive failed passes, for the log
}

// IngestStats counts what an Ingester has done.
type IngestStats struct {
	// Messages, Records and Files ingested; Removed spools deleted once
	// complete.
	Messages, Records, Files, Removed int64
}

// NewIngester ingests the spools of dataDir through rec, whose store is
// store (read to learn what earlier owners ingested already).
func NewIngester(dataDir string, rec *capture.Recorder, store capture.Reader, opts *IngestOptions) *Ingester {
	g := &Ingester{dataDir: dataDir, rec: rec, store: store, files: map[string]*fileState{}}
	if opts != nil {
		g.o = *opts
	}
	if g.o.Interval <= 0 {
		g.o.Interval = 250 * time.Millisecond
	}
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
func (g *Ingester) Run(ctx context.Context) {
	t := time.NewTicker(g.o.Interval)
	defer t.Stop()
	for {
		_, _ = g.Once(ctx)
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = g.Once(last)
			cancel()
			return
		case <-t.C:
		}
	}
}

// Once looks at every spool once and ingests what is new, returning the
// number of messages ingested.
func (g *Ingester) Once(ctx context.Context) (int, error) {
	paths, err := Files(g.dataDir)
	if err != nil {
		return 0, err
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
			return 0, err
		}
		g.mu.Lock()
		g.files[path] = fs
		g.totals.Files++
		g.mu.Unlock()
	}
	n := 0
	for rec, err := range Read(path, fs.offset) {
		if err != nil {
			return n, err
		}
		if err := g.rec.Ingest(ctx, rec.Batch, fs.remap); err != nil {
			fs.failed++
			if fs.failed == 1 {
				g.log.Warn("could not store a spool's records; will try again", "spool", path, "err", err)
			}
			return n, fmt.Errorf("ingesting %s: %w", path, err)
		}
		fs.failed = 0
		for _, s := range rec.Batch.Sessions {
			fs.session = s.ID
		}
		fs.offset = rec.Offset
		fs.ended = fs.ended || rec.End
		n += len(rec.Batch.Messages)
		g.mu.Lock()
		g.totals.Records++
		g.totals.Messages += int64(len(rec.Batch.Messages))
		g.mu.Unlock()
		if ctx.Err() != nil {
			return n, nil
		}
	}
	// Done with a spool whose wrap is gone and every readable record of
	// which is stored: what a dead wrap left cut short was never whole.
	if fs.ended || !running {
		if fi, err := os.Stat(path); err == nil && fi.Size() <= fs.offset || !running {
			if err := os.Remove(path); err == nil || errors.Is(err, os.ErrNotExist) {
				g.mu.Lock()
				delete(g.files, path)
				g.totals.Removed++
				g.mu.Unlock()
			}
		}
	}
	return n, nil
}

// recover learns how much of a spool an earlier owner ingested: the
// spool's messages, in order, were given the store's sequence numbers in
// the same order, so the first k messages the store holds for the spool's
// session are the spool's first k messages, and records made only of those
// are done.
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
		fs.offset = rec.Offset
		fs.ended = fs.ended || rec.End
	}
	return fs, nil
}
