package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// EditMessage implements [capture.Editor].
func (s *Store) EditMessage(ctx context.Context, seq uint64, raw []byte, note string) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if !json.Valid(raw) {
		return 0, fmt.Errorf("memstore: edit of message %d: the new content is not valid JSON: %w", seq, capture.ErrInvalidEdit)
	}
	e := capture.Edit{Time: time.Now().Round(0), Note: note, Raw: bytes.Clone(raw)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return 0, capture.ErrClosed
	}
	if _, ok := s.messages[seq]; !ok {
		return 0, notFound("message %d", seq)
	}
	e.Version = len(s.edits[seq]) + 1
	s.edits[seq] = append(s.edits[seq], e)
	return e.Version, nil
}

// MessageEdits implements [capture.Editor].
func (s *Store) MessageEdits(ctx context.Context, seq uint64) ([]capture.Edit, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, capture.ErrClosed
	}
	m, ok := s.messages[seq]
	if !ok {
		return nil, notFound("message %d", seq)
	}
	out := []capture.Edit{{Version: 0, Time: m.Time.Round(0), Raw: bytes.Clone(m.Raw)}}
	for _, e := range s.edits[seq] {
		e.Raw = bytes.Clone(e.Raw)
		out = append(out, e)
	}
	return out, nil
}

// SetLabels implements [capture.Editor].
func (s *Store) SetLabels(ctx context.Context, sessionID string, labels []string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if slices.Contains(labels, "") {
		return fmt.Errorf("memstore: labels of session %q: a label is empty: %w", sessionID, capture.ErrInvalidEdit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return capture.ErrClosed
	}
	if _, ok := s.sessions[sessionID]; !ok {
		return notFound("session %q", sessionID)
	}
	s.labels[sessionID] = slices.Clone(labels)
	return nil
}

// withLabels applies labels set with SetLabels to x, a copy; it takes mu
// for reading.
func (s *Store) withLabels(x *capture.Session) *capture.Session {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if l, ok := s.labels[x.ID]; ok {
		x.Labels = slices.Clone(l)
	}
	return x
}

// edited returns m with its latest edit applied (sharing m's other
// fields: callers copy it), or m itself. Called with mu held.
func (s *Store) edited(m *capture.Message) *capture.Message {
	es := s.edits[m.Seq]
	if len(es) == 0 {
		return m
	}
	c := *m
	c.Raw = es[len(es)-1].Raw
	c.Size = len(c.Raw)
	c.Edited += len(es)
	return &c
}
