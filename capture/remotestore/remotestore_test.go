package remotestore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		return remotestore.Status{PID: os.Getpid(), Stats: capture.Stats{Stored: 7}}
	}}))
	defer srv.Close()
	if _, err := remotestore.NewClient(srv.URL, "wrong").Session(context.Background(), "x"); err == nil || errors.Is(err, capture.ErrNotFound) {
		t.Errorf("wrong token: %v, want refused", err)
	}
	dir := t.TempDir()
	if _, _, err := remotestore.Discover(context.Background(), dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nothing announced: %v", err)
	}
	// A file left by someone else, readable by all: the announcement that
	// replaces it is still 0600.
	if err := os.WriteFile(filepath.Join(dir, remotestore.AnnouncementFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	remove, err := remotestore.WriteAnnouncement(dir, remotestore.Announcement{PID: os.Getpid(), API: srv.URL, Token: "right"})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, remotestore.AnnouncementFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the announcement's mode: %v, %v; want 0600", fi.Mode(), err)
	}
	c, st, err := remotestore.Discover(context.Background(), dir)
	if err != nil || st.PID != os.Getpid() || st.Stats.Stored != 7 {
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
	remotestore.WriteAnnouncement(dir, remotestore.Announcement{PID: os.Getpid(), API: srv.URL, Token: "right"})
	if _, _, err := remotestore.Discover(context.Background(), dir); err == nil {
		t.Error("a dead recorder's announcement was trusted")
	}
}

// TestStaleAnnouncement: an announcement left by a process that no longer
// runs (a recorder killed with SIGKILL) counts as none, and RemoveStale
// removes it.
func TestStaleAnnouncement(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.ProcessState.Pid()
	dir := t.TempDir()
	if _, err := remotestore.WriteAnnouncement(dir, remotestore.Announcement{PID: dead, API: "http://127.0.0.1:1", Token: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := remotestore.Discover(context.Background(), dir); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "no longer runs") {
		t.Errorf("Discover with pid %d gone: %v, want a not-exist error saying the process no longer runs", dead, err)
	}
	if removed, err := remotestore.RemoveStale(dir); !removed || err != nil {
		t.Errorf("RemoveStale = %v, %v", removed, err)
	}
	if _, err := remotestore.ReadAnnouncement(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale announcement is still there: %v", err)
	}
	if removed, err := remotestore.RemoveStale(dir); removed || err != nil {
		t.Errorf("RemoveStale of nothing = %v, %v", removed, err)
	}
}

// POST /v1/routes: guarded by the token like every endpoint; a recorder
// of one upstream says so; a name taken by another upstream is a
// conflict; a new route comes back with the URL a client uses.
func TestAddRoute(t *testing.T) {
	routes := map[string]string{}
	add := func(name, upstream string) (remotestore.RouteInfo, error) {
		if old, ok := routes[name]; ok && old != upstream {
			return remotestore.RouteInfo{}, fmt.Errorf("%w: %s goes to %s", remotestore.ErrRouteConflict, name, old)
		}
		if name == "" {
			return remotestore.RouteInfo{}, errors.New("a route needs a name")
		}
		routes[name] = upstream
		return remotestore.RouteInfo{Name: name, Upstream: upstream, URL: "http://127.0.0.1:7411/" + name + "/mcp"}, nil
	}
	srv := httptest.NewServer(remotestore.Handler(memstore.New(), "tok", &remotestore.HandlerOptions{AddRoute: add}))
	defer srv.Close()
	ctx := context.Background()
	if _, err := remotestore.NewClient(srv.URL, "wrong").AddRoute(ctx, "gh", "https://api.example/mcp"); err == nil {
		t.Error("a wrong token added a route")
	}
	if len(routes) != 0 {
		t.Fatalf("routes after a refused call: %v", routes)
	}
	c := remotestore.NewClient(srv.URL, "tok")
	ri, err := c.AddRoute(ctx, "gh", "https://api.example/mcp")
	if err != nil || ri.URL != "http://127.0.0.1:7411/gh/mcp" {
		t.Fatalf("AddRoute: %+v %v", ri, err)
	}
	if _, err := c.AddRoute(ctx, "gh", "https://other.example/mcp"); !errors.Is(err, remotestore.ErrRouteConflict) {
		t.Errorf("a taken name: %v, want ErrRouteConflict", err)
	}
	if _, err := c.AddRoute(ctx, "", "https://other.example/mcp"); err == nil || errors.Is(err, remotestore.ErrRouteConflict) {
		t.Errorf("a bad route: %v", err)
	}
	single := httptest.NewServer(remotestore.Handler(memstore.New(), "tok", nil))
	defer single.Close()
	if _, err := remotestore.NewClient(single.URL, "tok").AddRoute(ctx, "gh", "https://api.example/mcp"); !errors.Is(err, remotestore.ErrNoRoutes) {
		t.Errorf("a recorder of one upstream: %v, want ErrNoRoutes", err)
	}
}
