package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Reading tapes. A tape is read in one pass, each record decoded and
// checked in turn, whichever way it is kept:
//
//   - LoadTape and ReadTape keep every record in memory, in
//     Tape.Sessions: about the tape's size, and more.
//   - OpenTape keeps an index — per message its seq, exchange, direction,
//     kind, method, time, links and where its bytes are in the file; per
//     exchange its method, status, start and where its record is: about
//     190 bytes a message in all, measured, and a replay server's tables
//     add about 110 more — and reads a record from the file when a replay
//     or an import needs it. What a tape costs then grows with its count
//     of messages, not their size: a 527 MB tape of 159,000 messages peaks
//     at about 90 MB of heap, loaded for replay (the collector lets the
//     heap grow to about twice what is live).

// LoadTape reads a tape file whole into memory. OpenTape reads a large one
// within a bound.
func LoadTape(path string) (*Tape, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := scanTape(bufio.NewReaderSize(f, 256<<10), true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ReadTape reads and checks a tape document whole into memory. It streams
// the document: each record is decoded and checked in turn.
func ReadTape(r io.Reader) (*Tape, error) { return scanTape(r, true) }

// OpenTape checks the tape file at path as LoadTape does, but keeps only
// an index of its records in memory: the Tape's sessions hold their
// session records, and their Exchanges and Messages stay in the file,
// read when NewServerHandler, Import or a Client needs them (see
// [Tape.Session]). Its memory grows with the tape's count of messages,
// about 190 bytes each, not with their size. Close the tape when done;
// the file must not change meanwhile.
func OpenTape(path string) (*Tape, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	t, err := scanTape(bufio.NewReaderSize(f, 256<<10), false)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.file = &tapeFile{f: f, path: path}
	return t, nil
}

// Close releases the file of a tape OpenTape opened; on any other tape it
// does nothing.
func (t *Tape) Close() error {
	if t == nil || t.file == nil {
		return nil
	}
	return t.file.f.Close()
}

// Session returns tape session i whole: its exchanges and messages read
// from the file of a tape OpenTape opened, or the session itself.
func (t *Tape) Session(i int) (*TapeSession, error) {
	ts := t.Sessions[i]
	if t.file == nil {
		return ts, nil
	}
	ix := t.index[i]
	out := &TapeSession{Session: ts.Session}
	if len(ix.xs) > 0 {
		out.Exchanges = make([]*capture.Exchange, 0, len(ix.xs))
	}
	if len(ix.ms) > 0 {
		out.Messages = make([]*capture.Message, 0, len(ix.ms))
	}
	for j := range ix.xs {
		x, err := t.file.exchange(&ix.xs[j], ts.Session.ID)
		if err != nil {
			return nil, err
		}
		out.Exchanges = append(out.Exchanges, x)
	}
	for j := range ix.ms {
		m, err := t.file.message(&ix.ms[j], ts.Session.ID)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}

// tapeFile is the file of a tape OpenTape opened.
type tapeFile struct {
	f    *os.File
	path string
}

// span is where a record is in the tape file: from off, n bytes (a
// separating comma and spaces may come first).
type span struct {
	off int64
	n   int32
}

func (tf *tapeFile) read(sp span) ([]byte, error) {
	b := make([]byte, sp.n)
	if _, err := tf.f.ReadAt(b, sp.off); err != nil {
		return nil, fmt.Errorf("reading the tape %s at byte %d: %w (did it change since it was opened?)", tf.path, sp.off, err)
	}
	return bytes.TrimLeft(b, ", \t\r\n"), nil
}

// message reads a message's record from the file.
func (tf *tapeFile) message(r *msgRef, session string) (*capture.Message, error) {
	if r.m != nil {
		return r.m, nil
	}
	b, err := tf.read(r.span)
	if err != nil {
		return nil, err
	}
	var tm tapeMessage
	if err := json.Unmarshal(b, &tm); err != nil || tm.Seq != r.Seq {
		return nil, fmt.Errorf("the tape %s changed since it was opened: message %d is not where it was (%v)", tf.path, r.Seq, err)
	}
	return tm.message(session)
}

// exchange reads an exchange's record from the file.
func (tf *tapeFile) exchange(r *xRef, session string) (*capture.Exchange, error) {
	if r.x != nil {
		return r.x, nil
	}
	b, err := tf.read(r.span)
	if err != nil {
		return nil, err
	}
	var x capture.Exchange
	if err := json.Unmarshal(b, &x); err != nil || x.ID != r.ID {
		return nil, fmt.Errorf("the tape %s changed since it was opened: exchange %d is not where it was (%v)", tf.path, r.ID, err)
	}
	x.SessionID = session
	return &x, nil
}

// sessionIndex is one tape session as OpenTape keeps it: its records'
// summaries, in tape order, and where the rest is.
type sessionIndex struct {
	xs []xRef
	ms []msgRef
}

// msgRef is what a replay needs of a recorded message without its bytes,
// and where they are. m is the message itself, for a tape in memory.
type msgRef struct {
	Seq        uint64
	ExchangeID uint64
	Time       time.Time
	Links      capture.Links
	Method     string
	Name       string
	Direction  protocol.Direction
	Kind       protocol.Kind
	span
	m *capture.Message
}

// xRef is what a replay needs of a recorded exchange without its headers,
// and where they are. x is the exchange itself, for a tape in memory.
type xRef struct {
	ID           uint64
	Method       string
	Status       int
	ResponseBody capture.BodyKind
	Start        time.Time
	// Resumed is set when the request carried Last-Event-ID: a GET that
	// resumed a stream, not a standalone one.
	Resumed bool
	// Facts are what its request said in its path and headers.
	Facts *httpFacts
	span
	x *capture.Exchange
}

func refOf(m *capture.Message) msgRef {
	return msgRef{Seq: m.Seq, ExchangeID: m.ExchangeID, Time: m.Time, Links: m.Links, Method: m.Method, Name: m.Name,
		Direction: m.Direction, Kind: m.Kind, m: m}
}

func xRefOf(x *capture.Exchange, in *interner) xRef {
	path, _, _ := strings.Cut(x.URL, "?")
	return xRef{ID: x.ID, Method: in.name(x.Method), Status: x.Status, ResponseBody: x.ResponseBody, Start: x.Start,
		Resumed: x.RequestHeader.Get(protocol.HeaderLastEventID) != "", Facts: in.httpFacts(factsOf(in.name(path), x.RequestHeader)), x: x}
}

// indexes is the index of every session of t: OpenTape's, or one made from
// the sessions in memory.
func (t *Tape) indexes() []*sessionIndex {
	if t.index != nil {
		return t.index
	}
	out := make([]*sessionIndex, len(t.Sessions))
	var in interner
	for i, ts := range t.Sessions {
		ix := &sessionIndex{xs: make([]xRef, len(ts.Exchanges)), ms: make([]msgRef, len(ts.Messages))}
		for j, x := range ts.Exchanges {
			ix.xs[j] = xRefOf(x, &in)
		}
		for j, m := range ts.Messages {
			ix.ms[j] = refOf(m)
		}
		out[i] = ix
	}
	return out
}

// loader reads the records of one session of a tape, from memory or from
// its file.
type loader struct {
	f       *tapeFile // nil: every ref holds its record
	session string
}

func (ld loader) message(r *msgRef) (*capture.Message, error) {
	if r.m != nil || ld.f == nil {
		return r.m, nil
	}
	return ld.f.message(r, ld.session)
}

func (ld loader) exchange(r *xRef) (*capture.Exchange, error) {
	if r.x != nil || ld.f == nil {
		return r.x, nil
	}
	return ld.f.exchange(r, ld.session)
}

// loaderFor is the loader of session i of t.
func (t *Tape) loaderFor(i int) loader { return loader{f: t.file, session: t.Sessions[i].Session.ID} }

// scanTape reads and checks a tape document in one pass. keep holds every
// record in memory (Tape.Sessions); otherwise only the index is kept, with
// where each record is in the document.
func scanTape(r io.Reader, keep bool) (*Tape, error) {
	br := bufio.NewReaderSize(r, sniffBytes)
	if head, _ := br.Peek(sniffBytes); notATape(head) != "" {
		// A HAR file, a profile, a gzip: say what it is, not how it
		// fails to be a tape.
		return nil, fmt.Errorf("%w: %s", ErrNotTape, notATape(head))
	}
	dec := json.NewDecoder(br)
	sc := &scanner{dec: dec, keep: keep, t: &Tape{}}
	t, err := sc.scan()
	if err != nil {
		return nil, sc.explain(err)
	}
	return t, nil
}

type scanner struct {
	dec    *json.Decoder
	keep   bool
	t      *Tape
	in     interner  // interned methods, names and facts
	seqs   []uint64  // every message's seq
	links  []uint64  // every link's target
	linkOf []linkRef // which message, for the error
}

type linkRef struct {
	session string
	seq     uint64
}

func (sc *scanner) intern(s string) string { return sc.in.name(s) }

// explain turns a decoding error into one that says what is wrong and
// where.
func (sc *scanner) explain(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: not JSON at byte %d: %v", ErrNotTape, se.Offset, se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: field %q at byte %d: %s where %s belongs", ErrTapeInvalid, te.Field, te.Offset, aJSON(te.Value), jsonKindOf(te.Type))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: the document ends early, at byte %d (a truncated file?)", ErrNotTape, sc.dec.InputOffset())
	}
	if errors.Is(err, ErrNotTape) || errors.Is(err, ErrTapeInvalid) || errors.Is(err, ErrTapeVersion) {
		return err
	}
	return fmt.Errorf("%w: at byte %d: %v", ErrTapeInvalid, sc.dec.InputOffset(), err)
}

func (sc *scanner) scan() (*Tape, error) {
	dec, t := sc.dec, sc.t
	if err := expectDelim(dec, '{'); err != nil {
		if errors.Is(err, errWrongDelim) {
			return nil, fmt.Errorf("%w: the document is not a JSON object", ErrNotTape)
		}
		return nil, err
	}
	sawSessions := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
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
			err = sc.sessions()
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field == "" {
				te.Field, _ = key.(string) // a header field: name it
			}
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if err := t.checkHeader(); err != nil {
		return nil, err
	}
	if !sawSessions {
		return nil, fmt.Errorf("%w: no sessions", ErrTapeInvalid)
	}
	return t, sc.checkSeqs()
}

// checkSeqs checks that no seq appears twice in the tape and that every
// link names a message of the tape.
func (sc *scanner) checkSeqs() error {
	slices.Sort(sc.seqs)
	for i := 1; i < len(sc.seqs); i++ {
		if sc.seqs[i] == sc.seqs[i-1] {
			return fmt.Errorf("%w: message seq %d repeats or goes backwards", ErrTapeInvalid, sc.seqs[i])
		}
	}
	for i, l := range sc.links {
		if _, ok := slices.BinarySearch(sc.seqs, l); !ok {
			return fmt.Errorf("%w: session %s: message %d links to seq %d, which is not in the tape", ErrTapeInvalid, sc.linkOf[i].session, sc.linkOf[i].seq, l)
		}
	}
	return nil
}

func (sc *scanner) sessions() error {
	dec := sc.dec
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for i := 0; dec.More(); i++ {
		if err := sc.session(i); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// session reads one session object: its record, exchanges and messages,
// in any order.
func (sc *scanner) session(i int) error {
	dec := sc.dec
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	ts := &TapeSession{}
	ix := &sessionIndex{}
	var xids []uint64
	var lastSeq uint64
	name := func() string {
		if ts.Session != nil && ts.Session.ID != "" {
			return ts.Session.ID
		}
		return fmt.Sprintf("#%d", i)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		switch key {
		case "session":
			ts.Session, err = decodeSession(dec)
		case "exchanges":
			err = sc.array(func(start int64) error {
				var x capture.Exchange
				if err := dec.Decode(&x); err != nil {
					return err
				}
				xids = append(xids, x.ID)
				if sc.keep {
					ts.Exchanges = append(ts.Exchanges, &x)
					return nil
				}
				r := xRefOf(&x, &sc.in)
				r.x, r.span = nil, sc.spanFrom(start)
				ix.xs = append(ix.xs, r)
				return nil
			})
		case "messages":
			err = sc.array(func(start int64) error {
				var tm tapeMessage
				if err := dec.Decode(&tm); err != nil {
					return err
				}
				m, err := tm.message("")
				if err != nil {
					return fmt.Errorf("%w: session %s, message %d: %v", ErrTapeInvalid, name(), tm.Seq, err)
				}
				if m.Seq <= lastSeq {
					return fmt.Errorf("%w: session %s: message seq %d repeats or goes backwards", ErrTapeInvalid, name(), m.Seq)
				}
				lastSeq = m.Seq
				sc.seqs = append(sc.seqs, m.Seq)
				if sc.keep {
					ts.Messages = append(ts.Messages, m)
					return nil
				}
				r := refOf(m)
				r.Method, r.Name, r.m, r.span = sc.intern(r.Method), sc.intern(r.Name), nil, sc.spanFrom(start)
				ix.ms = append(ix.ms, r)
				return nil
			})
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
	id := ts.Session.ID
	slices.Sort(xids)
	for _, x := range ts.Exchanges {
		x.SessionID = id
	}
	check := func(seq, xid uint64, links capture.Links) error {
		if _, ok := slices.BinarySearch(xids, xid); xid != 0 && !ok {
			return fmt.Errorf("%w: session %s: message %d names exchange %d, which the session does not hold", ErrTapeInvalid, id, seq, xid)
		}
		for _, l := range links.Seqs() {
			if l != 0 {
				sc.links = append(sc.links, l)
				sc.linkOf = append(sc.linkOf, linkRef{id, seq})
			}
		}
		return nil
	}
	for _, m := range ts.Messages {
		m.SessionID = id
		if err := check(m.Seq, m.ExchangeID, m.Links); err != nil {
			return err
		}
	}
	for j := range ix.ms {
		if err := check(ix.ms[j].Seq, ix.ms[j].ExchangeID, ix.ms[j].Links); err != nil {
			return err
		}
	}
	sc.t.Sessions = append(sc.t.Sessions, ts)
	if !sc.keep {
		sc.t.index = append(sc.t.index, ix)
	}
	return nil
}

// tapeSession is a session record as a tape holds it: its leg is read
// strictly, as capture.Leg would read a name it does not know as the
// default (a tape of a newer leg would be replayed as a reverse one).
type tapeSession struct {
	*capture.Session
	Leg *tapeLeg `json:"leg,omitempty"`
}

// tapeLeg is a leg's name, refused when this build does not know it.
type tapeLeg capture.Leg

func (l *tapeLeg) UnmarshalText(b []byte) error {
	var leg capture.Leg
	_ = leg.UnmarshalText(b)
	if leg.String() != string(b) {
		return fmt.Errorf("a session's leg is %q, which this build does not know (it knows reverse, forward, mitm and stdio; a newer mcptape may read the tape)", b)
	}
	*l = tapeLeg(leg)
	return nil
}

func decodeSession(dec *json.Decoder) (*capture.Session, error) {
	ts := tapeSession{Session: &capture.Session{}}
	if err := dec.Decode(&ts); err != nil {
		return nil, err
	}
	if ts.Leg != nil {
		ts.Session.Leg = capture.Leg(*ts.Leg)
	}
	return ts.Session, nil
}

// array reads a JSON array, calling each with the input offset at which
// its element begins (after the previous one).
func (sc *scanner) array(each func(start int64) error) error {
	if err := expectDelim(sc.dec, '['); err != nil {
		return err
	}
	for sc.dec.More() {
		if err := each(sc.dec.InputOffset()); err != nil {
			return err
		}
	}
	_, err := sc.dec.Token()
	return err
}

// spanFrom is the span from start to where the decoder is now: the element
// just decoded, maybe after a comma and spaces.
func (sc *scanner) spanFrom(start int64) span {
	return span{off: start, n: int32(sc.dec.InputOffset() - start)}
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
