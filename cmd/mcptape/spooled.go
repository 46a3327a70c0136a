package main

import (
	"context"
	"errors"
	"iter"
	"log/slog"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/capture/spool"
	"github.com/mcptape/mcptape/capture/traces"
)

// withSpools shows a read command what wraps recorded while no process
// owned the store: the spools waiting in dir are read (never ingested,
// never changed — a read command does not write) into memory, numbered
// after the store's own records, and read beside the store.
func withSpools(ctx context.Context, store openedStore, dir string) (openedStore, error) {
	files, err := spool.Files(dir)
	if err != nil || len(files) == 0 {
		return store, nil
	}
	seq, xid, err := store.LastIDs(ctx)
	if err != nil {
		return nil, err
	}
	mem := memstore.New()
	for _, f := range files {
		m := capture.NewRemap()
		for rec, err := range spool.Read(f, 0) {
			if err != nil {
				break // a file being replaced; the owner will see it
			}
			b := renumber(rec.Batch, m, &seq, &xid)
			if err := mem.Write(ctx, b); err != nil {
				mem.Close()
				return nil, err
			}
		}
	}
	return &spooledStore{store: store, spooled: mem}, nil
}

// renumber gives a spool batch's records numbers after seq and xid, as an
// owner's Ingest would.
func renumber(b *capture.Batch, m *capture.Remap, seq, xid *uint64) *capture.Batch {
	num := func(tab map[uint64]uint64, next *uint64, old uint64) uint64 {
		if old == 0 {
			return 0
		}
		if n, ok := tab[old]; ok {
			return n
		}
		*next++
		tab[old] = *next
		return *next
	}
	out := &capture.Batch{Sessions: b.Sessions}
	for _, x := range b.Exchanges {
		c := *x
		c.ID = num(m.Exchange, xid, x.ID)
		out.Exchanges = append(out.Exchanges, &c)
	}
	for _, msg := range b.Messages {
		c := *msg
		c.Seq = num(m.Seq, seq, msg.Seq)
		c.ExchangeID = num(m.Exchange, xid, msg.ExchangeID)
		for _, l := range []*uint64{&c.Links.Request, &c.Links.Parent, &c.Links.Previous, &c.Links.Task} {
			*l = m.Seq[*l]
		}
		out.Messages = append(out.Messages, &c)
	}
	return out
}

// spooledStore reads a store and the records waiting in its spools as one.
type spooledStore struct {
	store   openedStore
	spooled *memstore.Store
}

func (s *spooledStore) Close() error { return errors.Join(s.spooled.Close(), s.store.Close()) }

func (s *spooledStore) Session(ctx context.Context, id string) (*capture.Session, error) {
	if v, err := s.spooled.Session(ctx, id); err == nil {
		return v, nil
	}
	return s.store.Session(ctx, id)
}

// Sessions merges both listings, newest first (by Start, then ID).
func (s *spooledStore) Sessions(ctx context.Context, q capture.SessionQuery) iter.Seq2[*capture.Session, error] {
	return func(yield func(*capture.Session, error) bool) {
		var waiting []*capture.Session
		for v, err := range s.spooled.Sessions(ctx, q) {
			if err != nil {
				yield(nil, err)
				return
			}
			waiting = append(waiting, v)
		}
		n := 0
		emit := func(v *capture.Session) bool {
			n++
			return yield(v, nil) && (q.Limit == 0 || n < q.Limit)
		}
		for v, err := range s.store.Sessions(ctx, q) {
			if err != nil {
				yield(nil, err)
				return
			}
			for len(waiting) > 0 && newer(waiting[0], v) {
				if !emit(waiting[0]) {
					return
				}
				waiting = waiting[1:]
			}
			if !emit(v) {
				return
			}
		}
		for _, v := range waiting {
			if !emit(v) {
				return
			}
		}
	}
}

func newer(a, b *capture.Session) bool {
	if !a.Start.Equal(b.Start) {
		return a.Start.After(b.Start)
	}
	return a.ID > b.ID
}

func (s *spooledStore) Exchanges(ctx context.Context, id string) iter.Seq2[*capture.Exchange, error] {
	if _, err := s.spooled.Session(ctx, id); err == nil {
		return s.spooled.Exchanges(ctx, id)
	}
	return s.store.Exchanges(ctx, id)
}

func (s *spooledStore) Exchange(ctx context.Context, id uint64) (*capture.Exchange, error) {
	if v, err := s.spooled.Exchange(ctx, id); err == nil {
		return v, nil
	}
	return s.store.Exchange(ctx, id)
}

func (s *spooledStore) Messages(ctx context.Context, id string, q capture.MessageQuery) iter.Seq2[*capture.Message, error] {
	if _, err := s.spooled.Session(ctx, id); err == nil {
		return s.spooled.Messages(ctx, id, q)
	}
	return s.store.Messages(ctx, id, q)
}

func (s *spooledStore) Message(ctx context.Context, seq uint64) (*capture.Message, error) {
	if v, err := s.spooled.Message(ctx, seq); err == nil {
		return v, nil
	}
	return s.store.Message(ctx, seq)
}

func (s *spooledStore) LastIDs(ctx context.Context) (uint64, uint64, error) {
	a, b, err := s.spooled.LastIDs(ctx)
	if err != nil {
		return 0, 0, err
	}
	c, d, err := s.store.LastIDs(ctx)
	return max(a, c), max(b, d), err
}

// ingesting is an Ingester running for the process that owns the store.
type ingesting struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startIngest ingests the spools of dir through rec until stop.
func startIngest(dir string, rec *capture.Recorder, store capture.Reader, logger *slog.Logger, tr *traces.Exporter) *ingesting {
	ctx, cancel := context.WithCancel(context.Background())
	o := &spool.IngestOptions{Logger: logger}
	if tr != nil {
		// A wrap with --otlp exports its calls itself: not again from here.
		o.Traced = tr.Skip
	}
	g := spool.NewIngester(dir, rec, store, o)
	in := &ingesting{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(in.done); g.Run(ctx) }()
	return in
}

// stop ends the ingester after a last pass.
func (in *ingesting) stop() {
	if in != nil {
		in.cancel()
		<-in.done
	}
}
