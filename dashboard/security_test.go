package dashboard_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// smallStore is a memstore with one session of one message.
func smallStore(t testing.TB) *memstore.Store {
	s := memstore.New()
	t.Cleanup(func() { s.Close() })
	raw := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	err := s.Write(context.Background(), &capture.Batch{
		Sessions:  []*capture.Session{{ID: "s1", Start: time.Now(), End: time.Now(), Messages: 1}},
		Exchanges: []*capture.Exchange{{ID: 1, SessionID: "s1", Method: "POST", URL: "/mcp", Status: 200, Start: time.Now()}},
		Messages: []*capture.Message{{Seq: 1, SessionID: "s1", ExchangeID: 1, Direction: protocol.ClientToServer, Time: time.Now(),
			Kind: protocol.KindRequest, Method: "ping", ID: []byte("1"), Batch: -1, Raw: raw, Size: len(raw)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newDash(t testing.TB, store capture.Store, o *dashboard.Options) (*dashboard.Server, string) {
	t.Helper()
	d, err := dashboard.New(store, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, serve(t, d)
}

func TestSecurityHeaders(t *testing.T) {
	_, base := newDash(t, smallStore(t), nil)
	c := newAPIClient(t, base)
	for _, path := range []string{"/", "/sessions", "/sessions/s1", "/sessions/s1/messages/1", "/sessions/s1/messages/1/inputs/k", "/sessions/s1/exchanges/1", "/live", "/latency",
		"/profiles", "/import", "/static/js/app.js", "/static/app.css", "/api/v1/info", "/api/v1/sessions", "/nope"} {
		_, _, h := c.do(http.MethodGet, path, nil, nil)
		if got := h.Get("Content-Security-Policy"); got != dashboard.ContentSecurityPolicy {
			t.Errorf("%s: Content-Security-Policy %q", path, got)
		}
		for _, want := range []string{"default-src 'self'", "img-src 'self' data:", "media-src 'self' data:", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"} {
			if !strings.Contains(h.Get("Content-Security-Policy"), want) {
				t.Errorf("%s: CSP lacks %s", path, want)
			}
		}
		if strings.Contains(h.Get("Content-Security-Policy"), "unsafe") {
			t.Errorf("%s: CSP allows unsafe-*", path)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: nosniff %q, frame options %q", path, h.Get("X-Content-Type-Options"), h.Get("X-Frame-Options"))
		}
	}
}

func TestPagesAreDeepLinks(t *testing.T) {
	_, base := newDash(t, smallStore(t), nil)
	c := newAPIClient(t, base)
	index, _ := fsRead(t, "static/index.html")
	for _, path := range []string{"/", "/sessions", "/sessions?era=legacy&q=x", "/sessions/s1", "/sessions/a%2Fb%20c",
		"/sessions/s1/messages/1", "/live", "/latency?method=tools/call", "/profiles", "/profiles/default", "/import"} {
		code, body, h := c.do(http.MethodGet, path, nil, nil)
		if code != http.StatusOK || string(body) != index || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %s, want index.html", path, code, h.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/nope", "/sessions/s1/other", "/static/", "/static/index.html", "/static/js/nope.js", "/api/v2/x"} {
		if code, _, _ := c.do(http.MethodGet, path, nil, nil); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	for path, ct := range map[string]string{"/static/js/app.js": "text/javascript", "/static/js/pages/session.js": "text/javascript", "/static/app.css": "text/css"} {
		if code, _, h := c.do(http.MethodGet, path, nil, nil); code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), ct) {
			t.Errorf("GET %s: %d %s, want %s", path, code, h.Get("Content-Type"), ct)
		}
	}
}

func fsRead(t testing.TB, name string) (string, error) {
	b, err := os.ReadFile(filepath.FromSlash(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), nil
}

// TestNoMarkupFromJS keeps the rule that recorded content never becomes
// markup or code: no asset parses HTML from strings or evaluates code, none
// loads anything from elsewhere, and the page has no inline script or style.
func TestNoMarkupFromJS(t *testing.T) {
	err := filepath.Walk("static", func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "SVG-NAMESPACE")
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
			"new Function", "javascript:", "http://", "https://", "DOMParser", "createContextualFragment"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s uses %q", path, bad)
			}
		}
		if strings.HasSuffix(path, ".html") && (strings.Contains(src, "<script>") || strings.Contains(src, " style=") || strings.Contains(src, "<style")) {
			t.Errorf("%s has inline script or style", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCSRFAndOrigin(t *testing.T) {
	_, base := newDash(t, smallStore(t), nil)
	c := newAPIClient(t, base)
	labels := "/api/v1/sessions/s1/labels"
	body := map[string]any{"labels": []string{"x"}}
	for _, tt := range []struct {
		name string
		hdr  map[string]string
		code int
		kind string
	}{
		{"from the page", nil, http.StatusOK, ""},
		{"no CSRF header", map[string]string{"X-CSRF-Token": ""}, http.StatusForbidden, "csrf"},
		{"wrong CSRF header", map[string]string{"X-CSRF-Token": strings.Repeat("0", 40)}, http.StatusForbidden, "csrf"},
		{"another origin", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "origin"},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden, "origin"},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "origin"},
		{"same-site fetch", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden, "origin"},
		// curl and scripts send neither; the CSRF pair still has to match.
		{"no browser headers", map[string]string{"Origin": "", "Sec-Fetch-Site": ""}, http.StatusOK, ""},
	} {
		code, b, _ := c.do(http.MethodPut, labels, body, tt.hdr)
		if code != tt.code || (tt.kind != "" && !contains(b, `"code":"`+tt.kind+`"`)) {
			t.Errorf("%s: %d %s, want %d %s", tt.name, code, b, tt.code, tt.kind)
		}
	}
	// Every mutating endpoint checks.
	for _, m := range []struct{ method, path string }{
		{http.MethodDelete, "/api/v1/sessions/s1"},
		{http.MethodPost, "/api/v1/messages/1/edits"},
		{http.MethodPost, "/api/v1/tapes"},
		{http.MethodPost, "/api/v1/sessions/s1/replay"},
		{http.MethodPut, "/api/v1/profiles/x"},
		{http.MethodDelete, "/api/v1/profiles/x"},
		{http.MethodPut, "/api/v1/default-profile"},
	} {
		code, _, _ := c.do(m.method, m.path, map[string]any{}, map[string]string{"X-CSRF-Token": ""})
		if code != http.StatusForbidden {
			t.Errorf("%s %s without CSRF: %d, want 403", m.method, m.path, code)
		}
	}
}

func TestHostCheck(t *testing.T) {
	_, base := newDash(t, smallStore(t), nil)
	u, _ := url.Parse(base)
	_, port, _ := net.SplitHostPort(u.Host)
	for host, want := range map[string]int{
		"127.0.0.1:" + port:    http.StatusOK,
		"localhost:" + port:    http.StatusOK,
		"[::1]:" + port:        http.StatusOK,
		"app.localhost":        http.StatusOK,
		"evil.example:" + port: http.StatusForbidden,
		"10.0.0.1":             http.StatusForbidden,
	} {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/info", nil)
		req.Host = host
		res, err := http.DefaultTransport.RoundTrip(bearer(req))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s: %d %s, want %d", host, res.StatusCode, b, want)
		}
	}
}

// TestToken: every dashboard asks for its token, on loopback too (other
// users of the machine reach loopback): without options a random one; the
// printed URL's ?token= is traded for an HttpOnly, SameSite=Strict cookie
// named after the port and a redirect to the clean address; the cookie or
// a bearer token gets in after that, /metrics included.
func TestToken(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mcptape_up 1\n") })
	for _, tt := range []struct {
		name string
		opts *dashboard.Options
	}{
		{"random", &dashboard.Options{Metrics: metrics}},
		{"given", &dashboard.Options{Token: "s3cret-token", Metrics: metrics}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, base := newDash(t, smallStore(t), tt.opts)
			token := d.Token()
			if len(token) < 32 && tt.opts.Token == "" {
				t.Fatalf("a random token of %d characters", len(token))
			}
			if tt.opts.Token != "" && token != tt.opts.Token {
				t.Fatalf("Token() = %q, want the one given", token)
			}
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			get := func(path string, hdr map[string]string, cookies ...*http.Cookie) *http.Response {
				req, _ := http.NewRequest(http.MethodGet, base+path, nil)
				for k, v := range hdr {
					req.Header.Set(k, v)
				}
				for _, c := range cookies {
					req.AddCookie(c)
				}
				res, err := noRedirect.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res
			}
			// The test server listens on 127.0.0.1: no way in without it.
			for _, path := range []string{"/", "/sessions", "/api/v1/info", "/api/v1/sessions", "/static/js/app.js", "/api/v1/live", "/metrics"} {
				if res := get(path, nil); res.StatusCode != http.StatusUnauthorized {
					t.Errorf("GET %s without the token, on loopback: %d, want 401", path, res.StatusCode)
				}
			}
			if res := get("/api/v1/info?token=wrong", nil); res.StatusCode != http.StatusUnauthorized {
				t.Errorf("a wrong token: %d", res.StatusCode)
			}
			if res := get("/api/v1/info", map[string]string{"Authorization": "Bearer wrong"}); res.StatusCode != http.StatusUnauthorized {
				t.Errorf("a wrong bearer token: %d", res.StatusCode)
			}
			res := get("/sessions?era=legacy&token="+token, nil)
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/sessions?era=legacy" {
				t.Fatalf("?token=: %d to %q, want 303 to the page without the token", res.StatusCode, res.Header.Get("Location"))
			}
			u, _ := url.Parse(base)
			_, port, _ := net.SplitHostPort(u.Host)
			var cookie *http.Cookie
			for _, c := range res.Cookies() {
				if c.Name == "mcptape_token_"+port {
					cookie = c
				}
			}
			if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value != token {
				t.Fatalf("token cookie %+v (of %v), want mcptape_token_%s, HttpOnly, SameSite=Strict", cookie, res.Cookies(), port)
			}
			if res := get("/api/v1/info", nil, cookie); res.StatusCode != http.StatusOK {
				t.Errorf("with the cookie: %d", res.StatusCode)
			}
			// Another dashboard's cookie (another port) does not do.
			other := &http.Cookie{Name: "mcptape_token_1", Value: token}
			if res := get("/api/v1/info", nil, other); res.StatusCode != http.StatusUnauthorized {
				t.Errorf("with a cookie of another port: %d, want 401", res.StatusCode)
			}
			if res := get("/api/v1/info", map[string]string{"Authorization": "Bearer " + token}); res.StatusCode != http.StatusOK {
				t.Errorf("with Authorization: %d", res.StatusCode)
			}
			if res := get("/metrics", map[string]string{"Authorization": "Bearer " + token}); res.StatusCode != http.StatusOK {
				t.Errorf("/metrics with the bearer token (Prometheus): %d", res.StatusCode)
			}
		})
	}
}

func TestListen(t *testing.T) {
	for _, tt := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:0", "tok", true},
		{"localhost:0", "tok", true},
		{"[::1]:0", "tok", true},
		{"0.0.0.0:0", "tok", true},
		{"127.0.0.1:0", "", false},
		{"0.0.0.0:0", "", false},
		{":0", "", false},
	} {
		ln, err := dashboard.Listen(tt.addr, tt.token)
		if ln != nil {
			ln.Close()
		}
		switch {
		case tt.ok && err != nil && !strings.Contains(err.Error(), "cannot assign") && !strings.Contains(err.Error(), "address family"):
			t.Errorf("Listen(%q, %q): %v", tt.addr, tt.token, err)
		case !tt.ok && !errors.Is(err, dashboard.ErrNeedToken):
			t.Errorf("Listen(%q, %q) = %v, want ErrNeedToken", tt.addr, tt.token, err)
		}
	}
	if got := dashboard.URL("0.0.0.0:7413", "t"); got != "http://127.0.0.1:7413/?token=t" {
		t.Errorf("URL = %s", got)
	}
}

func TestMetricsRoute(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mcptape_up 1\n") })
	_, base := newDash(t, smallStore(t), &dashboard.Options{Metrics: metrics})
	c := newAPIClient(t, base)
	if code, b, _ := c.do(http.MethodGet, "/metrics", nil, nil); code != http.StatusOK || string(b) != "mcptape_up 1\n" {
		t.Errorf("/metrics: %d %s", code, b)
	}
	_, base = newDash(t, smallStore(t), nil)
	if code, _, _ := newAPIClient(t, base).do(http.MethodGet, "/metrics", nil, nil); code != http.StatusNotFound {
		t.Errorf("/metrics without a handler: %d, want 404", code)
	}
}

func TestProfiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profiles")
	_, base := newDash(t, smallStore(t), &dashboard.Options{Profiles: dir, Backend: &testBackend{}})
	c := newAPIClient(t, base)
	type list struct {
		Default  string `json:"default"`
		Profiles []struct {
			Name    string `json:"name"`
			Default bool   `json:"default"`
			Error   string `json:"error"`
		} `json:"profiles"`
	}
	var l list
	c.get("/api/v1/profiles", &l)
	if len(l.Profiles) != 0 {
		t.Errorf("profiles of a missing directory: %+v", l)
	}
	code, b, _ := c.do(http.MethodPut, "/api/v1/profiles/ci", map[string]string{"content": `{"sampling":{"provider":"mock","overrides":[{"hint":"gpt-["}]}}`}, nil)
	if code != http.StatusBadRequest || !contains(b, "sampling.overrides[0].hint") {
		t.Errorf("an invalid profile: %d %s, want 400 naming the field", code, b)
	}
	for _, bad := range []string{`[1]`, `{"a":`} {
		if code, _, _ := c.do(http.MethodPut, "/api/v1/profiles/ci", map[string]string{"content": bad}, nil); code != http.StatusBadRequest {
			t.Errorf("profile %s: %d, want 400", bad, code)
		}
	}
	good := `{"name":"ci","sampling":{"provider":"mock","template":"mock: {{prompt}}"}}`
	c.send(http.MethodPut, "/api/v1/profiles/ci", map[string]string{"content": good}, nil)
	c.send(http.MethodPut, "/api/v1/profiles/other.v2", map[string]string{"content": `{}`}, nil)
	if b, err := os.ReadFile(filepath.Join(dir, "ci.json")); err != nil || string(b) != good {
		t.Errorf("ci.json = %q, %v", b, err)
	}
	c.send(http.MethodPut, "/api/v1/default-profile", map[string]string{"name": "ci"}, nil)
	c.get("/api/v1/profiles", &l)
	if l.Default != "ci" || len(l.Profiles) != 2 || l.Profiles[0].Name != "ci" || !l.Profiles[0].Default || l.Profiles[1].Default {
		t.Errorf("after setting the default: %+v", l)
	}
	var p struct {
		Content string `json:"content"`
		Default bool   `json:"default"`
	}
	c.get("/api/v1/profiles/ci", &p)
	if p.Content != good || !p.Default {
		t.Errorf("GET ci: %+v", p)
	}
	// A file broken by hand is listed with its error.
	os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"samplin":{}}`), 0o600)
	c.get("/api/v1/profiles", &l)
	if len(l.Profiles) != 3 || l.Profiles[0].Name != "broken" || !strings.Contains(l.Profiles[0].Error, "samplin") {
		t.Errorf("a broken profile: %+v", l.Profiles)
	}
	for _, name := range []string{"..", ".hidden", "a%2Fb", "default-profile", "x.json", strings.Repeat("n", 65)} {
		if code, _, _ := c.do(http.MethodPut, "/api/v1/profiles/"+name, map[string]string{"content": `{}`}, nil); code != http.StatusBadRequest && code != http.StatusNotFound {
			t.Errorf("PUT profile %q: %d, want 400", name, code)
		}
	}
	if code, _, _ := c.do(http.MethodPut, "/api/v1/default-profile", map[string]string{"name": "missing"}, nil); code != http.StatusNotFound {
		t.Errorf("default to a missing profile: %d, want 404", code)
	}
	if code, _, _ := c.do(http.MethodDelete, "/api/v1/profiles/ci", nil, nil); code != http.StatusNoContent {
		t.Errorf("delete: %d", code)
	}
	c.get("/api/v1/profiles", &l)
	if l.Default != "" || len(l.Profiles) != 2 {
		t.Errorf("after deleting the default: %+v", l)
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "x.json")); err == nil {
		t.Error("a profile was written outside the directory")
	}
}

// readLive reads the live tail's events through hc until want returns
// true.
func readLive(t *testing.T, hc *http.Client, base string, start func(), want func(typ, data string) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/live", nil)
	res, err := hc.Do(bearer(req))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("live: Content-Type %q", ct)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		start()
	}()
	defer func() { <-done }()
	for ev, err := range sse.Read(res.Body, &sse.ReadConfig{MaxEventSize: 1 << 20}) {
		if err != nil {
			t.Fatalf("live: %v", err)
		}
		if want(ev.Type, ev.Data) {
			return
		}
	}
	t.Fatal("live: the stream ended")
}

func TestLivePublish(t *testing.T) {
	r := newRig(t, nil)
	sawSession, sawCall := false, false
	readLive(t, http.DefaultClient, r.srv.URL, func() { r.runClient(t, fixtures.PathStateless, fixtures.ToolEcho) }, func(typ, data string) bool {
		switch {
		case typ == "session" && strings.Contains(data, `"era":"modern"`):
			sawSession = true
		case typ == "message" && strings.Contains(data, `"method":"tools/call"`) && strings.Contains(data, `"name":"echo"`):
			sawCall = true
		}
		return sawSession && sawCall
	})
}

// TestLiveBeforeAnyPage: what is recorded before any page opens the live
// tail (when the tail sends nothing) is on the Live page's first load, and
// a page that opens the tail then gets what follows.
func TestLiveBeforeAnyPage(t *testing.T) {
	r := newRig(t, nil)
	r.runClient(t, fixtures.PathStateless, fixtures.ToolEcho)
	c := newAPIClient(t, r.srv.URL)
	var recent struct {
		Messages []struct {
			Method, Name string
		} `json:"messages"`
	}
	c.get("/api/v1/live/recent", &recent)
	calls := 0
	for _, m := range recent.Messages {
		if m.Method == "tools/call" && m.Name == "echo" {
			calls++
		}
	}
	if calls == 0 {
		t.Fatalf("the Live page's first load has no echo call: %+v", recent.Messages)
	}
	readLive(t, http.DefaultClient, r.srv.URL, func() { r.runClient(t, fixtures.PathStateless, fixtures.ToolEcho) }, func(typ, data string) bool {
		return typ == "message" && strings.Contains(data, `"method":"tools/call"`) && strings.Contains(data, `"name":"echo"`)
	})
}

// TestLivePoll runs on synctest's clock: a message written into the store
// reaches the live tail on the next poll.
func TestLivePoll(t *testing.T) { synctest.Test(t, testLivePoll) }

func testLivePoll(t *testing.T) {
	store := smallStore(t)
	_, c := newMemDash(t, store, &dashboard.Options{PollInterval: 20 * time.Millisecond})
	write := func() {
		time.Sleep(100 * time.Millisecond) // five polls that find nothing
		raw := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"polled"}}`)
		err := store.Write(context.Background(), &capture.Batch{
			Sessions: []*capture.Session{{ID: "s2", Start: time.Now(), Messages: 1}},
			Messages: []*capture.Message{{Seq: 2, SessionID: "s2", Direction: protocol.ClientToServer, Time: time.Now(),
				Kind: protocol.KindRequest, Method: "tools/call", Name: "polled", Batch: -1, Raw: raw, Size: len(raw)}},
		})
		if err != nil {
			t.Error(err)
		}
	}
	readLive(t, c.hc, c.base, write, func(typ, data string) bool {
		return typ == "message" && strings.Contains(data, `"name":"polled"`) && strings.Contains(data, `"seq":2`)
	})
}
