package replay

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Tape format identifiers (docs/tape-format.md).
const (
	TapeFormat  = "mcptape-tape"
	TapeVersion = 1
)

// Tape errors callers branch on.
var (
	// ErrNotTape is returned for a document that is not a tape.
	ErrNotTape = errors.New("not an mcptape tape")
	// ErrTapeVersion is returned for a tape of a version this build does not read.
	ErrTapeVersion = errors.New("unsupported tape version")
	// ErrTapeInvalid is returned for a tape whose content breaks the format's rules.
	ErrTapeInvalid = errors.New("invalid tape")
)

// Tape is one or more recorded sessions, the unit of export, import and
// replay. See docs/tape-format.md.
type Tape struct {
	Format      string
	Version     int
	Created     time.Time
	Generator   string
	Sessions    []*TapeSession
	Annotations []Annotation

	file  *tapeFile       // OpenTape's: where the records are
	index []*sessionIndex // OpenTape's, one per session
}

// TapeSession is a session with its exchanges and messages, in order.
type TapeSession struct {
	Session   *capture.Session
	Exchanges []*capture.Exchange
	Messages  []*capture.Message
}

// tapeMessage is a message's form in a tape: capture.Message, with its
// bytes as raw JSON (verbatim), text or base64.
type tapeMessage struct {
	Seq        uint64             `json:"seq"`
	ExchangeID uint64             `json:"exchange"`
	Direction  protocol.Direction `json:"dir"`
	Time       time.Time          `json:"time"`
	Kind       protocol.Kind      `json:"kind"`
	Method     string             `json:"method,omitempty"`
	ID         json.RawMessage    `json:"id,omitempty"`
	Name       string             `json:"name,omitempty"`
	Batch      int                `json:"batch"`
	Size       int                `json:"size"`
	SSE        *capture.SSEInfo   `json:"sse,omitempty"`
	Findings   []capture.Finding  `json:"findings,omitempty"`
	Links      capture.Links      `json:"links,omitzero"`
	Edited     int                `json:"edited,omitempty"`
	RawText    *string            `json:"rawText,omitempty"`
	RawBase64  []byte             `json:"rawBase64,omitempty"`
	Raw        json.RawMessage    `json:"raw,omitempty"`
}

// WriteTape writes t as a tape document. Raw JSON messages are written
// byte for byte as recorded.
func WriteTape(w io.Writer, t *Tape) error {
	tw, err := newTapeWriter(w, t.Created, t.Generator, t.Annotations)
	if err != nil {
		return err
	}
	for _, s := range t.Sessions {
		if err := tw.session(s.Session, s.Exchanges, func(yield func(*capture.Message) error) error {
			for _, m := range s.Messages {
				if err := yield(m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return tw.close()
}

type tapeWriter struct {
	w     *bufio.Writer
	first bool
	err   error
}

func newTapeWriter(w io.Writer, created time.Time, generator string, ann []Annotation) (*tapeWriter, error) {
	tw := &tapeWriter{w: bufio.NewWriterSize(w, 64<<10), first: true}
	if created.IsZero() {
		created = time.Now()
	}
	head := struct {
		Format      string       `json:"format"`
		Version     int          `json:"version"`
		Created     time.Time    `json:"created"`
		Generator   string       `json:"generator,omitempty"`
		Annotations []Annotation `json:"annotations,omitempty"`
	}{TapeFormat, TapeVersion, created.UTC(), generator, ann}
	b, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	tw.write(b[:len(b)-1])
	tw.write([]byte(",\n\"sessions\": ["))
	return tw, tw.err
}

func (tw *tapeWriter) write(b []byte) {
	if tw.err == nil {
		_, tw.err = tw.w.Write(b)
	}
}

func (tw *tapeWriter) marshal(v any) {
	b, err := json.Marshal(v)
	if err != nil && tw.err == nil {
		tw.err = err
	}
	tw.write(b)
}

// session writes one session; messages streams its messages.
func (tw *tapeWriter) session(s *capture.Session, xs []*capture.Exchange, messages func(func(*capture.Message) error) error) error {
	if !tw.first {
		tw.write([]byte(","))
	}
	tw.first = false
	tw.write([]byte("\n{\"session\": "))
	tw.sessionRecord(s)
	tw.write([]byte(",\n \"exchanges\": ["))
	for i, x := range xs {
		if i > 0 {
			tw.write([]byte(","))
		}
		tw.write([]byte("\n  "))
		tw.marshal(x)
	}
	tw.write([]byte("],\n \"messages\": ["))
	n := 0
	err := messages(func(m *capture.Message) error {
		if n > 0 {
			tw.write([]byte(","))
		}
		n++
		tw.write([]byte("\n  "))
		tw.message(m)
		return tw.err
	})
	if err != nil {
		return err
	}
	tw.write([]byte("]}"))
	return tw.err
}

// sessionRecord writes a session with its raw capabilities as recorded:
// encoding/json would compact a RawMessage.
func (tw *tapeWriter) sessionRecord(s *capture.Session) {
	c := *s
	c.ClientCapabilities, c.ServerCapabilities = nil, nil
	b, err := json.Marshal(&c)
	if err != nil {
		tw.err = cmp.Or(tw.err, err)
		return
	}
	tw.write(b[:len(b)-1])
	for _, f := range []struct {
		key string
		raw []byte
	}{{"clientCapabilities", s.ClientCapabilities}, {"serverCapabilities", s.ServerCapabilities}} {
		if len(f.raw) == 0 {
			continue
		}
		tw.write([]byte(`,"` + f.key + `":`))
		if verbatimJSON(f.raw) {
			tw.write(f.raw)
		} else {
			tw.marshal(json.RawMessage(f.raw))
		}
	}
	tw.write([]byte("}"))
}

// verbatimJSON reports whether b can stand in a JSON document as it is
// and be read back byte for byte: one valid JSON value with no whitespace
// around it (a decoder drops that).
func verbatimJSON(b []byte) bool {
	return len(b) > 0 && json.Valid(b) && !isSpace(b[0]) && !isSpace(b[len(b)-1])
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (tw *tapeWriter) message(m *capture.Message) {
	tm := tapeMessage{
		Seq: m.Seq, ExchangeID: m.ExchangeID, Direction: m.Direction, Time: m.Time, Kind: m.Kind, Method: m.Method,
		ID: m.ID, Name: m.Name, Batch: m.Batch, Size: m.Size, SSE: m.SSE, Findings: m.Findings, Links: m.Links, Edited: m.Edited,
	}
	// A body's trailing newline is part of Raw: such a message goes as
	// rawText, which keeps every byte.
	verbatim := m.Kind != protocol.KindInvalid && m.Kind != protocol.KindFrame && verbatimJSON(m.Raw)
	switch {
	case verbatim:
	case utf8.Valid(m.Raw):
		s := string(m.Raw)
		tm.RawText = &s
	default:
		tm.RawBase64 = m.Raw
	}
	b, err := json.Marshal(tm)
	if err != nil {
		tw.err = err
		return
	}
	if !verbatim {
		tw.write(b)
		return
	}
	// encoding/json would compact and re-escape a RawMessage: write the
	// recorded bytes themselves (they are valid JSON, so the document is too).
	tw.write(b[:len(b)-1])
	tw.write([]byte(`,"raw":`))
	tw.write(m.Raw)
	tw.write([]byte("}"))
}

func (tw *tapeWriter) close() error {
	tw.write([]byte("\n]}\n"))
	if tw.err != nil {
		return tw.err
	}
	return tw.w.Flush()
}

// Export writes the sessions of store named by ids as a tape; no ids means
// every session, oldest first.
func Export(ctx context.Context, store capture.Reader, ids []string, w io.Writer, generator string) error {
	_, err := ExportCounted(ctx, store, ids, w, generator)
	return err
}

// ExportCounts is what an export wrote, and what it left for the next one.
type ExportCounts struct {
	Sessions, Messages int
	// Later counts the messages recorded while the export ran, in calls
	// that began after it read their session's exchanges: left out, so
	// that the tape reads back whole.
	Later int
}

// ExportCounted is Export, saying what it wrote. A store that can read
// from a snapshot (capture.Snapshotter) is read from one: the tape holds
// the store as it was when the export began, and costs a seek per session
// instead of a read and its iterators per record kind.
func ExportCounted(ctx context.Context, store capture.Reader, ids []string, w io.Writer, generator string) (ExportCounts, error) {
	return ExportListed(ctx, store, ids, w, generator, nil)
}

// ExportListed is ExportCounted; with no ids, listed (if set) is told how
// many messages the listed sessions' records count, once they are listed
// and before the first is written (a progress report's total, without a
// pass of its own over a large store).
func ExportListed(ctx context.Context, store capture.Reader, ids []string, w io.Writer, generator string, listed func(messages int)) (ExportCounts, error) {
	var c ExportCounts
	if sn, ok := store.(capture.Snapshotter); ok {
		r, release, err := sn.Snapshot(ctx)
		if err != nil {
			return c, err
		}
		defer release()
		store = r
	}
	if len(ids) == 0 {
		messages := 0
		for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
			if err != nil {
				return c, err
			}
			ids = append(ids, s.ID)
			messages += s.Messages
		}
		if len(ids) == 0 {
			return c, errors.New("the store holds no sessions to export")
		}
		slices.Reverse(ids) // oldest first
		if listed != nil {
			listed(messages)
		}
	}
	tw, err := newTapeWriter(w, time.Now(), generator, nil)
	if err != nil {
		return c, err
	}
	for _, id := range ids {
		s, err := store.Session(ctx, id)
		if err != nil {
			return c, fmt.Errorf("session %q: %w", id, err)
		}
		var xs []*capture.Exchange
		for x, err := range store.Exchanges(ctx, id) {
			if err != nil {
				return c, err
			}
			xs = append(xs, x)
		}
		// A store being recorded into gains records while it is read: a
		// message whose exchange came after the exchanges were read (the
		// recorder writes an exchange with its messages, never after) is
		// left for the next export, with the messages that link to what
		// was left, so that the tape is whole as of that read.
		have := make(map[uint64]bool, len(xs))
		for _, x := range xs {
			have[x.ID] = true
		}
		later := map[uint64]bool{}
		err = tw.session(s, xs, func(yield func(*capture.Message) error) error {
			for m, err := range store.Messages(ctx, id, capture.MessageQuery{}) {
				if err != nil {
					return err
				}
				if m.ExchangeID != 0 && !have[m.ExchangeID] || linksTo(m.Links, later) {
					later[m.Seq] = true
					c.Later++
					continue
				}
				if err := yield(m); err != nil {
					return err
				}
				c.Messages++
			}
			return nil
		})
		if err != nil {
			return c, err
		}
		c.Sessions++
	}
	return c, tw.close()
}

// linksTo reports whether l names a message in seqs.
func linksTo(l capture.Links, seqs map[uint64]bool) bool {
	for _, seq := range l.Seqs() {
		if seq != 0 && seqs[seq] {
			return true
		}
	}
	return false
}

// ImportOptions configures Import. The zero value refuses sessions whose id
// the store holds already.
type ImportOptions struct {
	// Rename gives a session whose id exists a new one (a "-2" suffix, or
	// "-3", …) instead of refusing the tape.
	Rename bool
}

// Import writes the tape's sessions into store and returns their ids in
// the store. Seqs and exchange ids are kept when they are all above what
// the store holds (an empty store gets the tape back exactly), and
// renumbered after it otherwise, links rewritten alike. It streams: a
// tape OpenTape opened is read from its file a record at a time and
// written in batches (of at most 2048 records or 8 MiB of bodies), so
// importing it costs about its index, not its size. It is all or
// nothing: what would fail is found before anything is written
// ([PlanImport]), and a write that fails all the same has the sessions
// written before it removed again.
func Import(ctx context.Context, store capture.Store, t *Tape, opts *ImportOptions) (ids []string, err error) {
	if opts == nil {
		opts = &ImportOptions{}
	}
	plan, err := PlanImport(ctx, store, t, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			ids, err = nil, undoImport(store, plan, err)
		}
	}()
	lastSeq, lastX, err := store.LastIDs(ctx)
	if err != nil {
		return nil, err
	}
	idx := t.indexes()
	minSeq, minX := ^uint64(0), ^uint64(0)
	for _, ix := range idx {
		for j := range ix.ms {
			minSeq = min(minSeq, ix.ms[j].Seq)
		}
		for j := range ix.xs {
			minX = min(minX, ix.xs[j].ID)
		}
	}
	// Renumbered, the records follow the store's last ones in tape order.
	var seqMap, xMap renumbering
	if minSeq <= lastSeq || minX <= lastX {
		next, nextX := lastSeq, lastX
		for _, ix := range idx {
			for j := range ix.xs {
				nextX++
				xMap = append(xMap, [2]uint64{ix.xs[j].ID, nextX})
			}
			for j := range ix.ms {
				next++
				seqMap = append(seqMap, [2]uint64{ix.ms[j].Seq, next})
			}
		}
		seqMap.sort()
		xMap.sort()
	}
	for i, ts := range t.Sessions {
		ix, ld := idx[i], t.loaderFor(i)
		s := *ts.Session
		if _, err := store.Session(ctx, s.ID); err == nil {
			if !opts.Rename {
				return ids, fmt.Errorf("the store already holds session %s; import with --rename to give the tape's a new id", s.ID)
			}
			base := s.ID
			for i := 2; ; i++ {
				s.ID = fmt.Sprintf("%s-%d", base, i)
				if _, err := store.Session(ctx, s.ID); errors.Is(err, capture.ErrNotFound) {
					break
				}
			}
		} else if !errors.Is(err, capture.ErrNotFound) {
			return ids, err
		}
		b := &capture.Batch{Sessions: []*capture.Session{&s}}
		size := 0
		flush := func(force bool) error {
			if b.Len() == 0 || (!force && size <= 8<<20 && b.Len() < 2048) {
				return nil
			}
			err := store.Write(ctx, b)
			b, size = &capture.Batch{}, 0
			return err
		}
		for j := range ix.xs {
			x, err := ld.exchange(&ix.xs[j])
			if err != nil {
				return ids, err
			}
			c := *x
			c.ID, c.SessionID = xMap.of(x.ID), s.ID
			b.Exchanges = append(b.Exchanges, &c)
			if err := flush(false); err != nil {
				return ids, err
			}
		}
		for j := range ix.ms {
			m, err := ld.message(&ix.ms[j])
			if err != nil {
				return ids, err
			}
			c := *m
			c.Seq, c.ExchangeID, c.SessionID = seqMap.of(m.Seq), xMap.of(m.ExchangeID), s.ID
			c.Links = capture.Links{Request: seqMap.of(m.Links.Request), Parent: seqMap.of(m.Links.Parent),
				Previous: seqMap.of(m.Links.Previous), Task: seqMap.of(m.Links.Task)}
			b.Messages = append(b.Messages, &c)
			size += len(c.Raw)
			if err := flush(false); err != nil {
				return ids, err
			}
		}
		if err := flush(true); err != nil {
			return ids, err
		}
		ids = append(ids, s.ID)
	}
	return ids, nil
}

// renumbering maps old ids to new ones, sorted by the old; empty keeps
// every id.
type renumbering [][2]uint64

func (r renumbering) sort() {
	slices.SortFunc(r, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
}

// of is v's new id; 0 stays 0, and so does every id when r is empty.
func (r renumbering) of(v uint64) uint64 {
	if len(r) == 0 || v == 0 {
		return v
	}
	i, ok := slices.BinarySearchFunc(r, v, func(e [2]uint64, v uint64) int { return cmp.Compare(e[0], v) })
	if !ok {
		return 0
	}
	return r[i][1]
}
