package replay

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
	if len(ids) == 0 {
		for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
			if err != nil {
				return err
			}
			ids = append([]string{s.ID}, ids...)
		}
		if len(ids) == 0 {
			return errors.New("the store holds no sessions to export")
		}
	}
	tw, err := newTapeWriter(w, time.Now(), generator, nil)
	if err != nil {
		return err
	}
	for _, id := range ids {
		s, err := store.Session(ctx, id)
		if err != nil {
			return fmt.Errorf("session %q: %w", id, err)
		}
		var xs []*capture.Exchange
		for x, err := range store.Exchanges(ctx, id) {
			if err != nil {
				return err
			}
			xs = append(xs, x)
		}
		err = tw.session(s, xs, func(yield func(*capture.Message) error) error {
			for m, err := range store.Messages(ctx, id, capture.MessageQuery{}) {
				if err != nil {
					return err
				}
				if err := yield(m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return tw.close()
}

// LoadTape reads a tape file.
func LoadTape(path string) (*Tape, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ReadTape(bufio.NewReaderSize(f, 256<<10))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ReadTape reads and checks a tape document. It streams: each message is
// decoded and converted in turn, so a tape costs about its records' size.
func ReadTape(r io.Reader) (*Tape, error) {
	br := bufio.NewReaderSize(r, sniffBytes)
	if head, _ := br.Peek(sniffBytes); notATape(head) != "" {
		// A HAR file, a profile, a gzip: say what it is, not how it
		// fails to be a tape.
		return nil, fmt.Errorf("%w: %s", ErrNotTape, notATape(head))
	}
	dec := json.NewDecoder(br)
	t := &Tape{}
	fail := func(err error) (*Tape, error) {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%w: not JSON at byte %d: %v", ErrNotTape, se.Offset, se)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%w: field %q at byte %d: %s where %s belongs", ErrTapeInvalid, te.Field, te.Offset, aJSON(te.Value), jsonKindOf(te.Type))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the document ends early, at byte %d (a truncated file?)", ErrNotTape, dec.InputOffset())
		}
		if errors.Is(err, ErrNotTape) || errors.Is(err, ErrTapeInvalid) || errors.Is(err, ErrTapeVersion) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: at byte %d: %v", ErrTapeInvalid, dec.InputOffset(), err)
	}
	if err := expectDelim(dec, '{'); err != nil {
		if errors.Is(err, errWrongDelim) {
			return nil, fmt.Errorf("%w: the document is not a JSON object", ErrNotTape)
		}
		return fail(err)
	}
	seqs := map[uint64]bool{}
	sawSessions := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		switch key {
		case "format":
			err = dec.Decode(&t.Format)
		case "version":
			err = dec.Decode(&t.Version)
		case "created":
			err = dec.Decode(&t.Created)
		case "generator":
			err = dec.Decode(&t.Generator)
		case "annotations":
			err = dec.Decode(&t.Annotations)
		case "sessions":
			// The header fields come first (docs/tape-format.md): check
			// them before reading the bulk.
			if t.Format == "" && t.Version == 0 {
				return nil, fmt.Errorf("%w: no format and version before the sessions (they must come first)", ErrNotTape)
			}
			if err := t.checkHeader(); err != nil {
				return nil, err
			}
			sawSessions = true
			err = readSessions(dec, t, seqs)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field == "" {
				te.Field, _ = key.(string) // a header field: name it
			}
			return fail(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return fail(err)
	}
	if err := t.checkHeader(); err != nil {
		return nil, err
	}
	if !sawSessions {
		return nil, fmt.Errorf("%w: no sessions", ErrTapeInvalid)
	}
	for _, s := range t.Sessions {
		for _, m := range s.Messages {
			for _, l := range []uint64{m.Links.Request, m.Links.Parent, m.Links.Previous, m.Links.Task} {
				if l != 0 && !seqs[l] {
					return nil, fmt.Errorf("%w: session %s: message %d links to seq %d, which is not in the tape", ErrTapeInvalid, s.Session.ID, m.Seq, l)
				}
			}
		}
	}
	return t, nil
}

func (t *Tape) checkHeader() error {
	if t.Format != TapeFormat {
		return fmt.Errorf("%w: the format field is %q, want %q", ErrNotTape, t.Format, TapeFormat)
	}
	if t.Version != TapeVersion {
		return fmt.Errorf("%w: version %d (this build reads version %d; a newer mcptape may read it)", ErrTapeVersion, t.Version, TapeVersion)
	}
	return nil
}

var errWrongDelim = errors.New("unexpected JSON value")

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("%w: want %q at byte %d", errWrongDelim, d, dec.InputOffset())
	}
	return nil
}

func readSessions(dec *json.Decoder, t *Tape, seqs map[uint64]bool) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for i := 0; dec.More(); i++ {
		if err := expectDelim(dec, '{'); err != nil {
			return err
		}
		ts := &TapeSession{}
		var raw []tapeMessage
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			switch key {
			case "session":
				err = dec.Decode(&ts.Session)
			case "exchanges":
				err = dec.Decode(&ts.Exchanges)
			case "messages":
				if ts.Session != nil {
					err = readMessages(dec, ts, seqs)
				} else {
					err = dec.Decode(&raw) // the session record comes later
				}
			default:
				var skip json.RawMessage
				err = dec.Decode(&skip)
			}
			if err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		if ts.Session == nil || ts.Session.ID == "" {
			return fmt.Errorf("%w: session %d has no session record with an id", ErrTapeInvalid, i)
		}
		for j := range raw {
			if err := addMessage(ts, &raw[j], seqs); err != nil {
				return err
			}
		}
		if err := ts.checkExchanges(); err != nil {
			return err
		}
		t.Sessions = append(t.Sessions, ts)
	}
	_, err := dec.Token()
	return err
}

func readMessages(dec *json.Decoder, ts *TapeSession, seqs map[uint64]bool) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		var tm tapeMessage
		if err := dec.Decode(&tm); err != nil {
			return err
		}
		if err := addMessage(ts, &tm, seqs); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

func addMessage(ts *TapeSession, tm *tapeMessage, seqs map[uint64]bool) error {
	m, err := tm.message(ts.Session.ID)
	if err != nil {
		return fmt.Errorf("%w: session %s, message %d: %v", ErrTapeInvalid, ts.Session.ID, tm.Seq, err)
	}
	var last uint64
	if n := len(ts.Messages); n > 0 {
		last = ts.Messages[n-1].Seq
	}
	if m.Seq <= last || seqs[m.Seq] {
		return fmt.Errorf("%w: session %s: message seq %d repeats or goes backwards", ErrTapeInvalid, ts.Session.ID, m.Seq)
	}
	seqs[m.Seq] = true
	ts.Messages = append(ts.Messages, m)
	return nil
}

func (ts *TapeSession) checkExchanges() error {
	xids := make(map[uint64]bool, len(ts.Exchanges))
	for _, x := range ts.Exchanges {
		x.SessionID = ts.Session.ID
		xids[x.ID] = true
	}
	for _, m := range ts.Messages {
		if m.ExchangeID != 0 && !xids[m.ExchangeID] {
			return fmt.Errorf("%w: session %s: message %d names exchange %d, which the session does not hold", ErrTapeInvalid, ts.Session.ID, m.Seq, m.ExchangeID)
		}
	}
	return nil
}

func (tm *tapeMessage) message(session string) (*capture.Message, error) {
	m := &capture.Message{
		Seq: tm.Seq, SessionID: session, ExchangeID: tm.ExchangeID, Direction: tm.Direction, Time: tm.Time,
		Kind: tm.Kind, Method: tm.Method, ID: tm.ID, Name: tm.Name, Batch: tm.Batch, Size: tm.Size,
		SSE: tm.SSE, Findings: tm.Findings, Links: tm.Links, Edited: tm.Edited,
	}
	n := 0
	if tm.Raw != nil {
		m.Raw, n = []byte(tm.Raw), n+1
	}
	if tm.RawText != nil {
		m.Raw, n = []byte(*tm.RawText), n+1
	}
	if tm.RawBase64 != nil {
		m.Raw, n = tm.RawBase64, n+1
	}
	if n > 1 {
		return nil, errors.New("more than one of raw, rawText and rawBase64")
	}
	if m.Seq == 0 {
		return nil, errors.New("no seq")
	}
	if m.Edited < 0 {
		return nil, fmt.Errorf("edited is %d; it counts edits, from 0", m.Edited)
	}
	if m.Direction != protocol.ClientToServer && m.Direction != protocol.ServerToClient {
		return nil, errors.New(`dir is neither "c2s" nor "s2c"`)
	}
	return m, nil
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
// renumbered after it otherwise, links rewritten alike.
func Import(ctx context.Context, store capture.Store, t *Tape, opts *ImportOptions) ([]string, error) {
	if opts == nil {
		opts = &ImportOptions{}
	}
	lastSeq, lastX, err := store.LastIDs(ctx)
	if err != nil {
		return nil, err
	}
	minSeq, minX := ^uint64(0), ^uint64(0)
	for _, s := range t.Sessions {
		for _, m := range s.Messages {
			minSeq = min(minSeq, m.Seq)
		}
		for _, x := range s.Exchanges {
			minX = min(minX, x.ID)
		}
	}
	seqMap := map[uint64]uint64{}
	xMap := map[uint64]uint64{}
	renumber := minSeq <= lastSeq || minX <= lastX
	next, nextX := lastSeq, lastX
	for _, s := range t.Sessions {
		for _, x := range s.Exchanges {
			nextX++
			xMap[x.ID] = nextX
		}
		for _, m := range s.Messages {
			next++
			seqMap[m.Seq] = next
		}
	}
	mapSeq := func(v uint64) uint64 {
		if !renumber || v == 0 {
			return v
		}
		return seqMap[v]
	}
	mapX := func(v uint64) uint64 {
		if !renumber || v == 0 {
			return v
		}
		return xMap[v]
	}
	var ids []string
	for _, ts := range t.Sessions {
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
		for _, x := range ts.Exchanges {
			c := *x
			c.ID, c.SessionID = mapX(x.ID), s.ID
			b.Exchanges = append(b.Exchanges, &c)
		}
		flush := func() error {
			if b.Len() == 0 {
				return nil
			}
			err := store.Write(ctx, b)
			b = &capture.Batch{}
			return err
		}
		size := 0
		for _, m := range ts.Messages {
			c := *m
			c.Seq, c.ExchangeID, c.SessionID = mapSeq(m.Seq), mapX(m.ExchangeID), s.ID
			c.Links = capture.Links{Request: mapSeq(m.Links.Request), Parent: mapSeq(m.Links.Parent),
				Previous: mapSeq(m.Links.Previous), Task: mapSeq(m.Links.Task)}
			b.Messages = append(b.Messages, &c)
			if size += len(c.Raw); size > 8<<20 || len(b.Messages) >= 2048 {
				if err := flush(); err != nil {
					return ids, err
				}
				size = 0
			}
		}
		if err := flush(); err != nil {
			return ids, err
		}
		ids = append(ids, s.ID)
	}
	return ids, nil
}

// equalRaw reports whether two raw JSON values are the same JSON
// (insignificant whitespace aside).
func equalRaw(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

var _ = base64.StdEncoding
