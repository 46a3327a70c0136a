package remotestore_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/capture/storetest"
)

// split writes to a memstore directly and reads it back through the API,
// so the conformance suite checks every read path of the client.
type split struct {
	*remotestore.Client
	mem *memstore.Store
	srv *httptest.Server
}

func (s *split) Write(ctx context.Context, b *capture.Batch) error { return s.mem.Write(ctx, b) }
func (s *split) DeleteSession(ctx context.Context, id string) error {
	return s.mem.DeleteSession(ctx, id)
}
func (s *split) Close() error {
	err := s.mem.Close()
	s.Client.Close()
	return err
}

func TestConformanceThroughTheAPI(t *testing.T) {
	storetest.Run(t, func(t *testing.T) capture.Store {
		mem := memstore.New()
		srv := httptest.NewServer(remotestore.Handler(mem, "tok", nil))
		t.Cleanup(srv.Close)
		s := &split{Client: remotestore.NewClient(srv.URL, "tok"), mem: mem, srv: srv}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestTokenAndDiscover(t *testing.T) {
	mem := memstore.New()
	defer mem.Close()
	srv := httptest.NewServer(remotestore.Handler(mem, "right", &remotestore.HandlerOptions{Status: func() remotestore.Status {
		return remotestore.Status{PID: 42, Stats: capture.Stats{Stored: 7}}
	}}))
	defer srv.Close()
	if _, err := remotestore.NewClient(srv.URL, "wrong").Session(context.Background(), "x"); err == nil || errors.Is(err, capture.ErrNotFound) {
		t.Errorf("wrong token: %v, want refused", err)
	}
	dir := t.TempDir()
	if _, _, err := remotestore.Discover(context.Background(), dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nothing announced: %v", err)
	}
	remove, err := remotestore.WriteAnnouncement(dir, remotestore.Announcement{PID: 42, API: srv.URL, Token: "right"})
	if err != nil {
		t.Fatal(err)
	}
	c, st, err := remotestore.Discover(context.Background(), dir)
	if err != nil || st.PID != 42 || st.Stats.Stored != 7 {
		t.Fatalf("discover: %v %+v", err, st)
	}
	if _, err := c.Session(context.Background(), "missing"); !errors.Is(err, capture.ErrNotFound) {
		t.Errorf("missing session: %v", err)
	}
	remove()
	if _, err := remotestore.ReadAnnouncement(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("announcement not removed: %v", err)
	}
	srv.Close()
	remotestore.WriteAnnouncement(dir, remotestore.Announcement{PID: 43, API: srv.URL, Token: "right"})
	if _, _, err := remotestore.Discover(context.Background(), dir); err == nil {
		t.Error("a dead recorder's announcement was trusted")
	}
}
