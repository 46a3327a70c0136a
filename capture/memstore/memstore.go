package memstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/capture"
)

var (
	_ capture.Store  = (*Store)(nil)
	_ capture.Editor = (*Store)(nil)
)

// Store is an in-memory [capture.Store]. The zero value is not usable; call
// [New].
type Store struct {
	// closed is also set under mu; the atomic copy lets running iterators
	// notice Close without taking the lock.
	closed atomic.Bool

	mu        sync.RWMutex
	sessions  map[string]*capture.Session
	byStart   []*capture.Session // sorted oldest first: Start, then ID
	exchanges map[uint64]*capture.Exchange
	sessionX  map[string][]uint64 // exchange IDs by session, sorted
	messages  map[uint64]*capture.Message
	sessionM  map[string][]uint64 // message Seqs by session, sorted
	lastSeq   uint64              // high-water marks: never lowered by deletes
	lastX     uint64
	// Edits and labels live beside the records, so that rewriting a
	// message or a session does not undo them (see edit.go).
	edits  map[uint64][]capture.Edit // versions 1… of edited messages
	labels map[string][]string       // labels set with SetLabels
}

// New returns an empty store.
func New() *Store {
	return &Store{
		sessions:  make(map[string]*capture.Session),
		exchanges: make(map[uint64]*capture.Exchange),
		sessionX:  make(map[string][]uint64),
		messages:  make(map[uint64]*capture.Message),
		sessionM:  make(map[string][]uint64),
		edits:     make(map[uint64][]capture.Edit),
		labels:    make(map[string][]string),
	}
}

var _ capture.RawCopier = (*Store)(nil)

// CopiesRaw implements [capture.RawCopier]: Write keeps copies.
func (s *Store) CopiesRaw() {}

// Write implements [capture.Store]. A batch is applied atomically: readers
// see all of it or none of it.
func (s *Store) Write(ctx context.Context, b *capture.Batch) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if b == nil {
		return nil
	}
	if err := validate(b); err != nil {
		return err
	}
	// Copy before taking the lock: it is the expensive part.
	sessions := make([]*capture.Session, len(b.Sessions))
	for i, x := range b.Sessions {
		sessions[i] = copySession(x)
	}
	exchanges := make([]*capture.Exchange, len(b.Exchanges))
	for i, x := range b.Exchanges {
		exchanges[i] = copyExchange(x)
	}
	messages := make([]*capture.Message, len(b.Messages))
	for i, m := range b.Messages {
		messages[i] = copyMessage(m, false)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return capture.ErrClosed
	}
	for _, x := range sessions {
		if old, ok := s.sessions[x.ID]; ok {
			s.byStart = removeSorted(s.byStart, old, compareStart)
		}
		s.sessions[x.ID] = x
		s.byStart = insertSorted(s.byStart, x, compareStart)
	}
	for _, x := range exchanges {
		if old, ok := s.exchanges[x.ID]; ok && old.SessionID != x.SessionID {
			s.sessionX[old.SessionID] = removeID(s.sessionX[old.SessionID], x.ID)
		}
		s.exchanges[x.ID] = x
		s.sessionX[x.SessionID] = insertID(s.sessionX[x.SessionID], x.ID)
		s.lastX = max(s.lastX, x.ID)
	}
	for _, m := range messages {
		if old, ok := s.messages[m.Seq]; ok && old.SessionID != m.SessionID {
			s.sessionM[old.SessionID] = removeID(s.sessionM[old.SessionID], m.Seq)
		}
		s.messages[m.Seq] = m
		s.sessionM[m.SessionID] = insertID(s.sessionM[m.SessionID], m.Seq)
		s.lastSeq = max(s.lastSeq, m.Seq)
	}
	return nil
}

var _ capture.SessionCounter = (*Store)(nil)

// CountSessions implements [capture.SessionCounter].
func (s *Store) CountSessions(ctx context.Context) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return 0, capture.ErrClosed
	}
	return len(s.sessions), nil
}

// Session implements [capture.Store].
func (s *Store) Session(ctx context.Context, id string) (*capture.Session, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	x, ok := s.sessions[id]
	closed := s.closed.Load()
	s.mu.RUnlock()
	switch {
	case closed:
		return nil, capture.ErrClosed
	case !ok:
		return nil, notFound("session %q", id)
	}
	return s.withLabels(copySession(x)), nil
}

// Sessions implements [capture.Store].
func (s *Store) Sessions(ctx context.Context, q capture.SessionQuery) iter.Seq2[*capture.Session, error] {
	return func(yield func(*capture.Session, error) bool) {
		if err := s.check(ctx); err != nil {
			yield(nil, err)
			return
		}
		s.mu.RLock()
		if s.closed.Load() {
			s.mu.RUnlock()
			yield(nil, capture.ErrClosed)
			return
		}
		// byStart is oldest first: walk back from the first Start at or
		// after Until.
		hi := len(s.byStart)
		if !q.Until.IsZero() {
			hi, _ = slices.BinarySearchFunc(s.byStart, q.Until, func(x *capture.Session, t time.Time) int {
				if x.Start.Before(t) {
					return -1
				}
				return 1
			})
		}
		var snap []*capture.Session
		for i := hi - 1; i >= 0; i-- {
			x := s.byStart[i]
			if !q.Since.IsZero() && x.Start.Before(q.Since) {
				break
			}
			if l, ok := s.labels[x.ID]; ok {
				c := *x
				c.Labels = l
				x = &c
			}
			snap = append(snap, x)
			if q.Limit > 0 && len(snap) == q.Limit {
				break
			}
		}
		s.mu.RUnlock()
		for _, x := range snap {
			if err := s.check(ctx); err != nil {
				yield(nil, err)
				return
			}
			if !yield(copySession(x), nil) {
				return
			}
		}
	}
}

// Exchanges implements [capture.Store].
func (s *Store) Exchanges(ctx context.Context, sessionID string) iter.Seq2[*capture.Exchange, error] {
	return func(yield func(*capture.Exchange, error) bool) {
		if err := s.check(ctx); err != nil {
			yield(nil, err)
			return
		}
		s.mu.RLock()
		if s.closed.Load() {
			s.mu.RUnlock()
			yield(nil, capture.ErrClosed)
			return
		}
		ids := s.sessionX[sessionID]
		snap := make([]*capture.Exchange, len(ids))
		for i, id := range ids {
			snap[i] = s.exchanges[id]
		}
		s.mu.RUnlock()
		for _, x := range snap {
			if err := s.check(ctx); err != nil {
				yield(nil, err)
				return
			}
			if !yield(copyExchange(x), nil) {
				return
			}
		}
	}
}

// Exchange implements [capture.Store].
func (s *Store) Exchange(ctx context.Context, id uint64) (*capture.Exchange, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	x, ok := s.exchanges[id]
	closed := s.closed.Load()
	s.mu.RUnlock()
	switch {
	case closed:
		return nil, capture.ErrClosed
	case !ok:
		return nil, notFound("exchange %d", id)
	}
	return copyExchange(x), nil
}

// Messages implements [capture.Store].
func (s *Store) Messages(ctx context.Context, sessionID string, q capture.MessageQuery) iter.Seq2[*capture.Message, error] {
	return func(yield func(*capture.Message, error) bool) {
		if err := s.check(ctx); err != nil {
			yield(nil, err)
			return
		}
		s.mu.RLock()
		if s.closed.Load() {
			s.mu.RUnlock()
			yield(nil, capture.ErrClosed)
			return
		}
		seqs := s.sessionM[sessionID]
		i, found := slices.BinarySearch(seqs, q.After)
		if found {
			i++
		}
		seqs = seqs[i:]
		if q.Limit > 0 && len(seqs) > q.Limit {
			seqs = seqs[:q.Limit]
		}
		snap := make([]*capture.Message, len(seqs))
		for i, seq := range seqs {
			snap[i] = s.edited(s.messages[seq])
		}
		s.mu.RUnlock()
		for _, m := range snap {
			if err := s.check(ctx); err != nil {
				yield(nil, err)
				return
			}
			if !yield(copyMessage(m, q.NoRaw), nil) {
				return
			}
		}
	}
}

// Message implements [capture.Store].
func (s *Store) Message(ctx context.Context, seq uint64) (*capture.Message, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	m, ok := s.messages[seq]
	if ok {
		m = s.edited(m)
	}
	closed := s.closed.Load()
	s.mu.RUnlock()
	switch {
	case closed:
		return nil, capture.ErrClosed
	case !ok:
		return nil, notFound("message %d", seq)
	}
	return copyMessage(m, false), nil
}

// DeleteSession implements [capture.Store].
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return capture.ErrClosed
	}
	x, ok := s.sessions[id]
	if !ok {
		return notFound("session %q", id)
	}
	s.byStart = removeSorted(s.byStart, x, compareStart)
	delete(s.sessions, id)
	for _, xid := range s.sessionX[id] {
		delete(s.exchanges, xid)
	}
	delete(s.sessionX, id)
	for _, seq := range s.sessionM[id] {
		delete(s.messages, seq)
		delete(s.edits, seq)
	}
	delete(s.sessionM, id)
	delete(s.labels, id)
	return nil
}

// LastIDs implements [capture.Store]. The values are high-water marks:
// deleting the session that held them does not lower them, so IDs are never
// handed out twice.
func (s *Store) LastIDs(ctx context.Context) (seq, exchange uint64, err error) {
	if err := s.check(ctx); err != nil {
		return 0, 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return 0, 0, capture.ErrClosed
	}
	return s.lastSeq, s.lastX, nil
}

// Close implements [capture.Store]. It drops everything; closing twice is
// not an error.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	s.sessions, s.byStart, s.exchanges, s.sessionX, s.messages, s.sessionM = nil, nil, nil, nil, nil, nil
	s.edits, s.labels = nil, nil
	return nil
}

// check returns ctx's error or ErrClosed.
func (s *Store) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return capture.ErrClosed
	}
	return nil
}

func validate(b *capture.Batch) error {
	for _, x := range b.Sessions {
		if x == nil {
			return errors.New("memstore: nil session in batch")
		}
	}
	for _, x := range b.Exchanges {
		if x == nil {
			return errors.New("memstore: nil exchange in batch")
		}
	}
	for _, m := range b.Messages {
		if m == nil {
			return errors.New("memstore: nil message in batch")
		}
	}
	return nil
}

// notFound wraps capture.ErrNotFound with what was missing.
func notFound(format string, arg any) error {
	return fmt.Errorf("memstore: "+format+": %w", arg, capture.ErrNotFound)
}

func compareStart(a, b *capture.Session) int {
	if c := a.Start.Compare(b.Start); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func insertSorted[T any](s []T, x T, cmp func(T, T) int) []T {
	i, _ := slices.BinarySearchFunc(s, x, cmp)
	return slices.Insert(s, i, x)
}

func removeSorted[T any](s []T, x T, cmp func(T, T) int) []T {
	if i, ok := slices.BinarySearchFunc(s, x, cmp); ok {
		return slices.Delete(s, i, i+1)
	}
	return s
}

// insertID adds id to a sorted slice unless present. IDs mostly arrive in
// increasing order, so appending is the common case.
func insertID(s []uint64, id uint64) []uint64 {
	if len(s) == 0 || s[len(s)-1] < id {
		return append(s, id)
	}
	i, ok := slices.BinarySearch(s, id)
	if ok {
		return s
	}
	return slices.Insert(s, i, id)
}

func removeID(s []uint64, id uint64) []uint64 {
	if i, ok := slices.BinarySearch(s, id); ok {
		return slices.Delete(s, i, i+1)
	}
	return s
}

func copySession(x *capture.Session) *capture.Session {
	c := *x
	c.ClientCapabilities = bytes.Clone(x.ClientCapabilities)
	c.ServerCapabilities = bytes.Clone(x.ServerCapabilities)
	c.Start = x.Start.Round(0)
	c.End = x.End.Round(0)
	c.Labels = slices.Clone(x.Labels)
	return &c
}

func copyExchange(x *capture.Exchange) *capture.Exchange {
	c := *x
	c.RequestHeader = x.RequestHeader.Clone()
	c.ResponseHeader = x.ResponseHeader.Clone()
	c.Start = x.Start.Round(0)
	c.FirstByte = x.FirstByte.Round(0)
	c.End = x.End.Round(0)
	c.FindingList = slices.Clone(x.FindingList)
	return &c
}

func copyMessage(m *capture.Message, noRaw bool) *capture.Message {
	c := *m
	c.Time = m.Time.Round(0)
	c.ID = bytes.Clone(m.ID)
	if noRaw {
		c.Raw = nil
	} else {
		c.Raw = bytes.Clone(m.Raw)
	}
	if m.SSE != nil {
		sse := *m.SSE
		sse.Prefix = bytes.Clone(m.SSE.Prefix)
		sse.Suffix = bytes.Clone(m.SSE.Suffix)
		sse.Whole = bytes.Clone(m.SSE.Whole)
		c.SSE = &sse
	}
	c.Findings = slices.Clone(m.Findings)
	return &c
}
