package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

// rig is the fixture server behind a recording proxy, recording into a
// Badger store on disk, with the dashboard over that store fed by the
// recorder, as `mcptape record` runs them.
type rig struct {
	store *badgerstore.Store
	rec   *capture.Recorder
	up    *httptest.Server // the fixture MCP server
	px    *httptest.Server // the recording proxy
	dash  *dashboard.Server
	srv   *httptest.Server // the dashboard
}

func newRig(t testing.TB, opts *dashboard.Options) *rig {
	t.Helper()
	return newRigServer(t, opts, nil)
}

// newRigServer is newRig with the fixture server built with srv (the
// showcase tools, say).
func newRigServer(t testing.TB, opts *dashboard.Options, srv *fixtures.ServerOptions) *rig {
	t.Helper()
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r := &rig{store: store}
	o := dashboard.Options{}
	if opts != nil {
		o = *opts
	}
	o.Feed = dashboard.FeedPublish
	if r.dash, err = dashboard.New(store, &o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dash.Close() })
	r.rec, err = capture.NewRecorder(context.Background(), store, &capture.RecorderOptions{OnBatch: r.dash.Publish})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.rec.Close(ctx)
	})
	r.up = httptest.NewServer(fixtures.Handler(srv))
	t.Cleanup(r.up.Close)
	up, _ := url.Parse(r.up.URL)
	p, err := proxy.New(&proxy.Options{Upstream: up, Recorder: r.rec})
	if err != nil {
		t.Fatal(err)
	}
	r.px = httptest.NewServer(p)
	t.Cleanup(r.px.Close)
	// Long-lived GET and listen streams must not hold up Close.
	t.Cleanup(func() { r.px.CloseClientConnections(); r.up.CloseClientConnections() })
	r.srv = httptest.NewServer(r.dash)
	t.Cleanup(func() { r.srv.CloseClientConnections(); r.srv.Close() })
	knowToken(t, r.srv.URL, r.dash.Token())
	return r
}

// dashTokens maps a test dashboard's base URL to its token, so that the
// helpers that talk to it (newAPIClient, bearer, the browser's open) pass
// it as a user would: the first request through the printed ?token= URL,
// which sets the cookie, or Authorization: Bearer for scripts.
var dashTokens sync.Map

func knowToken(t testing.TB, base, token string) {
	dashTokens.Store(base, token)
	t.Cleanup(func() { dashTokens.Delete(base) })
}

// tokenOf is the token of the dashboard at base (any URL under it).
func tokenOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	tok, _ := dashTokens.Load(u.Scheme + "://" + u.Host)
	s, _ := tok.(string)
	return s
}

// bearer sets the Authorization header a script sends to the dashboard
// at req's URL.
func bearer(req *http.Request) *http.Request {
	if tok := tokenOf(req.URL.String()); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req
}

// runClient runs the fixture client through the proxy, only the steps
// named (all when none), and waits until the store has it all.
func (r *rig) runClient(t testing.TB, path string, only ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	rep, err := fixtures.RunClient(ctx, r.px.URL+path, &fixtures.ClientOptions{HTTPClient: &http.Client{Transport: tr}, Only: only})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps {
		if s.Err != "" && s.Name != fixtures.ToolError && s.Name != fixtures.ToolFail {
			t.Errorf("fixture step %s failed: %s", s.Name, s.Err)
		}
	}
	r.sync(t)
}

func (r *rig) sync(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// settle waits until every message of session id has its exchange in the
// store: the recorder writes a long-lived stream's exchange (the standalone
// GET) only once a second, after its messages.
func (r *rig) settle(t testing.TB, id string) {
	t.Helper()
	ctx := context.Background()
	fixtures.Eventually(t, 5*time.Second, func() error {
		have := map[uint64]bool{}
		for x, err := range r.store.Exchanges(ctx, id) {
			if err != nil {
				t.Fatal(err)
			}
			have[x.ID] = true
		}
		missing := 0
		for m, err := range r.store.Messages(ctx, id, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				t.Fatal(err)
			}
			if !have[m.ExchangeID] {
				missing++
			}
		}
		if missing != 0 {
			return fmt.Errorf("session %s: %d messages still name exchanges that are not stored", id, missing)
		}
		return nil
	})
}

// sessionOn returns the newest session recorded on path.
func (r *rig) sessionOn(t testing.TB, path string) *capture.Session {
	t.Helper()
	for s, err := range r.store.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Path == path {
			return s
		}
	}
	t.Fatalf("no session on %s", path)
	return nil
}

// apiClient talks to a dashboard as its pages do: with the cookie jar
// (CSRF cookie) and, for changes, the CSRF header and the Origin.
type apiClient struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func newAPIClient(t testing.TB, base string) *apiClient {
	jar, _ := cookiejar.New(nil)
	c := &apiClient{t: t, base: base, hc: &http.Client{Jar: jar, Transport: &http.Transport{Proxy: nil}}}
	// Log in as the printed URL does: ?token= sets the token cookie and
	// redirects to the page, which sets the CSRF cookie.
	res, err := c.hc.Get(base + "/?token=" + url.QueryEscape(tokenOf(base)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("logging in to the dashboard at %s: %s", base, res.Status)
	}
	return c
}

func (c *apiClient) csrf() string {
	u, _ := url.Parse(c.base)
	for _, ck := range c.hc.Jar.Cookies(u) {
		if ck.Name == "mcptape_csrf" {
			return ck.Value
		}
	}
	return ""
}

// do sends a request; body is JSON-encoded unless it is []byte.
func (c *apiClient) do(method, path string, body any, hdr map[string]string) (int, []byte, http.Header) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("X-CSRF-Token", c.csrf())
		req.Header.Set("Origin", c.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b, res.Header
}

// get GETs path and decodes a 200 answer into v.
func (c *apiClient) get(path string, v any) {
	c.t.Helper()
	code, b, _ := c.do(http.MethodGet, path, nil, nil)
	if code != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("GET %s: %v in %s", path, err, b)
		}
	}
}

// send sends a change and decodes a 2xx answer into v.
func (c *apiClient) send(method, path string, body, v any) {
	c.t.Helper()
	code, b, _ := c.do(method, path, body, nil)
	if code/100 != 2 {
		c.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

func esc(id string) string { return url.PathEscape(id) }

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

func newTestServer(h http.Handler) *httptest.Server { return httptest.NewServer(h) }
