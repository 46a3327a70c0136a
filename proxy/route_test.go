package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/proxy"
)

// echoServer answers every request with what it saw: its path and Host;
// protected-resource metadata and a 401 challenge that name itself.
func echoServer() *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"resource":"%s/mcp","authorization_servers":["https://auth.example"],"path":%q}`, srv.URL, r.URL.Path)
		case r.URL.Path == "/protected":
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
		default:
			fmt.Fprintf(w, "%s %s", r.Host, r.URL.RequestURI())
		}
	}))
	return srv
}

// Routes: each keeps its server's path under /NAME/, sets its own Host,
// routes the well-known paths both ways a client builds them, rewrites
// OAuth metadata to its own URL; an unknown route is a 404 naming the
// routes; routes can be added while it runs; sessions carry the route.
func TestRoutes(t *testing.T) {
	a, b := echoServer(), echoServer()
	defer a.Close()
	defer b.Close()
	ua, _ := url.Parse(a.URL)
	ub, _ := url.Parse(b.URL)
	store := memstore.New()
	rec, err := capture.NewRecorder(context.Background(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	p, err := proxy.New(&proxy.Options{Recorder: rec, Routes: []proxy.Route{{Name: "a", Upstream: ua}, {Name: "b", Upstream: ub}}})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	defer px.CloseClientConnections()
	get := func(path string, hdr ...string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, px.URL+path, nil)
		if len(hdr) == 1 {
			req.Host = hdr[0]
		}
		res, err := px.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(body)
	}
	for path, want := range map[string]string{
		"/a/mcp?x=1":  ua.Host + " /mcp?x=1",
		"/b/mcp":      ub.Host + " /mcp",
		"/a":          ua.Host + " /",
		"/b/%6Dcp/ok": ub.Host + " /%6Dcp/ok", // escapes kept, as the client sent them
	} {
		if code, _, body := get(path); code != 200 || body != want {
			t.Errorf("GET %s: %d %q, want %q", path, code, body, want)
		}
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/b/mcp", "/b/.well-known/oauth-protected-resource/mcp"} {
		code, _, body := get(path)
		var doc struct{ Resource, Path string }
		if err := json.Unmarshal([]byte(body), &doc); err != nil || code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if doc.Path != "/.well-known/oauth-protected-resource/mcp" || doc.Resource != px.URL+"/b/mcp" {
			t.Errorf("GET %s reached %s with resource %s; want b's metadata path and the route's URL", path, doc.Path, doc.Resource)
		}
	}
	if code, h, _ := get("/a/protected"); code != 401 || h.Get("WWW-Authenticate") != `Bearer resource_metadata="`+px.URL+`/a/.well-known/oauth-protected-resource/mcp"` {
		t.Errorf("a's challenge through the route: %d %q", code, h.Get("WWW-Authenticate"))
	}
	if code, _, body := get("/c/mcp"); code != 404 || !strings.Contains(body, "/a/, /b/") {
		t.Errorf("an unknown route: %d %s", code, body)
	}
	if code, _, _ := get("/a/mcp", "evil.example"); code != http.StatusForbidden {
		t.Errorf("a route with a rebinding Host: %d, want 403", code)
	}

	// Added while running.
	if added, err := p.AddRoute(proxy.Route{Name: "c", Upstream: ua}); !added || err != nil {
		t.Fatalf("AddRoute c: %v %v", added, err)
	}
	if code, _, body := get("/c/mcp"); code != 200 || body != ua.Host+" /mcp" {
		t.Errorf("the added route: %d %q", code, body)
	}
	if added, err := p.AddRoute(proxy.Route{Name: "c", Upstream: ua}); added || err != nil {
		t.Errorf("adding the same route again: %v %v, want no change", added, err)
	}
	if _, err := p.AddRoute(proxy.Route{Name: "c", Upstream: ub}); !errors.Is(err, proxy.ErrRouteExists) {
		t.Errorf("c to another upstream: %v, want ErrRouteExists", err)
	}
	for _, bad := range []string{"", ".hidden", "a/b", "forward", strings.Repeat("x", 65)} {
		if _, err := p.AddRoute(proxy.Route{Name: bad, Upstream: ua}); err == nil {
			t.Errorf("route name %q accepted", bad)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	routes := map[string]string{}
	for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for x, err := range store.Exchanges(ctx, s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			if x.Status == 200 && strings.HasPrefix(x.URL, "/mcp") {
				routes[s.Route+" "+x.URL] = s.Upstream
			}
		}
	}
	for k, up := range map[string]string{"a /mcp?x=1": a.URL, "b /mcp": b.URL, "c /mcp": a.URL} {
		if routes[k] != up {
			t.Errorf("recorded %v; want %q from %s (the route's label, the server's path)", routes, k, up)
		}
	}
}
