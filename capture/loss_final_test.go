package capture_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
)

// sessionsOnly stores session records and refuses every message and
// exchange, as a store at its size bound does.
type sessionsOnly struct{ *memstore.Store }

func (s sessionsOnly) Write(ctx context.Context, b *capture.Batch) error {
	if len(b.Sessions) > 0 {
		if err := s.Store.Write(ctx, &capture.Batch{Sessions: b.Sessions}); err != nil {
			return err
		}
	}
	if len(b.Messages)+len(b.Exchanges) == 0 {
		return nil
	}
	return &capture.PartialWriteError{Refused: &capture.Batch{Messages: b.Messages, Exchanges: b.Exchanges},
		Err: errors.Join(capture.ErrStoreFull, errors.New("the store is full"))}
}

// TestLossMarkedOnClosedSession: a session whose messages the store
// refused is stored incomplete, with the count lost, also when the client
// ended it (DELETE) and the recorder closed right after.
func TestLossMarkedOnClosedSession(t *testing.T) {
	d := newDriverWith(t, nil, func(m *memstore.Store) capture.Writer { return sessionsOnly{m} })
	d.exchange(initialize("2025-11-25"))
	d.exchange(ex{method: "DELETE", path: "/mcp", reqHeader: map[string]string{"Mcp-Session-Id": "sess-2025-11-25"}, status: 200})
	if err := d.rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := d.session("s01")
	if s.Status != capture.StatusIncomplete || s.Lost != 2 {
		t.Errorf("session stored %s with %d lost; want incomplete with the 2 messages lost", s.Status, s.Lost)
	}
}
