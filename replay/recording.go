package replay

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/mcptape/mcptape/capture"
)

// Recording names recorded sessions for Check and Diff: the sessions of a
// tape file, or sessions of a store.
type Recording struct {
	// Name is what reports call it: the tape's path, or the session's id.
	Name  string
	tape  string
	store capture.Reader
	ids   []string
}

// TapeRecording is every session of the tape file at path.
func TapeRecording(path string) Recording { return Recording{Name: path, tape: path} }

// StoreRecording is the sessions of store with these ids (every session,
// oldest first, when none is given).
func StoreRecording(store capture.Reader, ids ...string) Recording {
	name := "the store"
	if len(ids) == 1 {
		name = "session " + ids[0]
	}
	return Recording{Name: name, store: store, ids: ids}
}

// recordedSession is one session of a Recording, whole.
type recordedSession struct {
	*capture.Session
	Messages  []*capture.Message
	Exchanges []*capture.Exchange
	// File is the tape file the session is in, "" for a store's; Lines
	// the line of each message's record in it, by seq.
	File  string
	Lines map[uint64]int
}

// each calls fn with each session of r in turn, oldest first for a store
// and in tape order for a tape; one session is in memory at a time.
func (r Recording) each(ctx context.Context, fn func(*recordedSession) error) error {
	if r.tape != "" {
		return eachTapeSession(r.tape, fn)
	}
	ids := r.ids
	if len(ids) == 0 {
		for s, err := range r.store.Sessions(ctx, capture.SessionQuery{}) {
			if err != nil {
				return err
			}
			ids = append(ids, s.ID)
		}
		slices.Reverse(ids)
	}
	for _, id := range ids {
		s, err := r.store.Session(ctx, id)
		if err != nil {
			return err
		}
		rs := &recordedSession{Session: s}
		for m, err := range r.store.Messages(ctx, id, capture.MessageQuery{}) {
			if err != nil {
				return err
			}
			rs.Messages = append(rs.Messages, m)
		}
		for x, err := range r.store.Exchanges(ctx, id) {
			if err != nil {
				return err
			}
			rs.Exchanges = append(rs.Exchanges, x)
		}
		if err := fn(rs); err != nil {
			return err
		}
	}
	return nil
}

func eachTapeSession(path string, fn func(*recordedSession) error) error {
	t, err := OpenTape(path)
	if err != nil {
		return err
	}
	defer t.Close()
	lines, err := t.messageLines()
	if err != nil {
		return err
	}
	for i := range t.Sessions {
		ts, err := t.Session(i)
		if err != nil {
			return err
		}
		if err := fn(&recordedSession{Session: ts.Session, Messages: ts.Messages, Exchanges: ts.Exchanges, File: path, Lines: lines[i]}); err != nil {
			return err
		}
	}
	return nil
}

// messageLines finds the line of every message's record in the file of a
// tape OpenTape opened, per session by seq, in one pass over the file.
func (t *Tape) messageLines() ([]map[uint64]int, error) {
	out := make([]map[uint64]int, len(t.Sessions))
	if t.file == nil {
		return out, nil
	}
	type at struct {
		off     int64
		session int
		seq     uint64
	}
	var offs []at
	for i, ix := range t.index {
		out[i] = make(map[uint64]int, len(ix.ms))
		for _, r := range ix.ms {
			offs = append(offs, at{r.off, i, r.Seq})
		}
	}
	slices.SortFunc(offs, func(a, b at) int { return cmp.Compare(a.off, b.off) })
	f, err := os.Open(t.file.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	var pos int64
	line := 1
	next := func() (byte, error) {
		c, err := br.ReadByte()
		if err == nil {
			pos++
			if c == '\n' {
				line++
			}
		}
		return c, err
	}
	for _, o := range offs {
		for pos < o.off {
			if _, err := next(); err != nil {
				return nil, fmt.Errorf("reading the tape %s: %w", t.file.path, err)
			}
		}
		// A record's span may begin with the comma and spaces before it.
		for {
			c, err := br.Peek(1)
			if errors.Is(err, io.EOF) || (err == nil && c[0] != ',' && c[0] != ' ' && c[0] != '\t' && c[0] != '\r' && c[0] != '\n') {
				break
			}
			if err != nil {
				return nil, err
			}
			if _, err := next(); err != nil {
				return nil, err
			}
		}
		out[o.session][o.seq] = line
	}
	return out, nil
}
