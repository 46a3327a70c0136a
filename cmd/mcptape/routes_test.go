package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
)

// routeLines are the URLs `record` printed for its routes, by name.
func routeLines(out string) map[string]string {
	urls := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "mcptape: route ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ":")
		if _, u, ok := strings.Cut(rest, "point its client at "); ok {
			urls[name] = strings.TrimSpace(u)
		}
	}
	return urls
}

// TestRecordTwoRoutes: one recorder, two upstreams — server-everything
// (npm) driven by the TypeScript SDK client, and the fixture server driven
// by go-sdk's client — both at once through their routes. The store holds
// one MCP session for each, labelled with its route and upstream, and the
// one dashboard lists both; the metrics carry the route label.
func TestRecordTwoRoutes(t *testing.T) {
	needPeers(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ev, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	fx := httptest.NewServer(fixtures.Handler(nil))
	defer fx.Close()
	defer fx.CloseClientConnections()

	data := t.TempDir()
	r := startRun(t, "record", "--route", "everything="+ev.URL(), "--route", "fixture="+fx.URL+fixtures.PathStateful,
		"--listen", "127.0.0.1:0", "--data", data, "--dashboard", "127.0.0.1:0")
	dashURL := r.wait(t, "dashboard at ")
	urls := routeLines(r.out.String())
	if !strings.HasSuffix(urls["everything"], "/everything/mcp") || !strings.HasSuffix(urls["fixture"], "/fixture"+fixtures.PathStateful) {
		t.Fatalf("record printed routes %v:\n%s", urls, r.out.String())
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if _, err := interop.RunClient(ctx, urls["everything"], nil); err != nil {
			t.Errorf("the TypeScript client through route everything: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
		rep, err := fixtures.RunClient(ctx, urls["fixture"], &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
		if err != nil || failures(rep) != nil {
			t.Errorf("go-sdk's client through route fixture: %v %v", err, failures(rep))
		}
	}()
	wg.Wait()

	// One dashboard shows both, each with its route and upstream.
	c := newDashClient(t, dashURL)
	type row struct {
		ID       string `json:"id"`
		Leg      string `json:"leg"`
		Route    string `json:"route"`
		Upstream string `json:"upstream"`
		Path     string `json:"path"`
		Era      string `json:"era"`
		Calls    int    `json:"calls"`
	}
	var list struct {
		Sessions []row `json:"sessions"`
	}
	byRoute := map[string][]row{}
	fixtures.Eventually(t, 10*time.Second, func() error {
		c.do(http.MethodGet, "/api/v1/sessions", &list)
		clear(byRoute)
		for _, s := range list.Sessions {
			if s.Era != "http" {
				byRoute[s.Route] = append(byRoute[s.Route], s)
			}
		}
		if len(byRoute["everything"]) == 0 || len(byRoute["fixture"]) == 0 {
			return fmt.Errorf("the dashboard lists no session of each route: %+v", byRoute)
		}
		return nil
	})
	want := map[string]struct{ upstream, path string }{
		"everything": {"http://" + ev.Addr(), "/mcp"},
		"fixture":    {fx.URL, fixtures.PathStateful},
	}
	for name, w := range want {
		ss := byRoute[name]
		if len(ss) != 1 {
			t.Errorf("route %s: %d MCP sessions in the dashboard, want 1: %+v", name, len(ss), ss)
			continue
		}
		if s := ss[0]; s.Leg != "reverse" || s.Upstream != w.upstream || s.Path != w.path || s.Calls < 2 {
			t.Errorf("route %s's session: %+v; want leg reverse, upstream %s, path %s, its calls", name, s, w.upstream, w.path)
		}
	}
	if len(byRoute) != 2 {
		t.Errorf("MCP sessions by route: %v, want only the two routes'", byRoute)
	}

	// ls says how each came, and /metrics has a series per route.
	if code, o, e := mcptape(t, "ls", "--data", data); code != 0 || !strings.Contains(o, "reverse:everything") || !strings.Contains(o, "reverse:fixture") {
		t.Errorf("ls: %d\n%s%s", code, o, e)
	}
	fams := scrapeText(t, &http.Client{Transport: &http.Transport{Proxy: nil}}, dashMetrics(dashURL))
	for _, name := range []string{"everything", "fixture"} {
		if n := histCount(fams["mcptape_proxy_upstream_latency_seconds"], "route", name); n == 0 {
			t.Errorf("no upstream latency observed for route %s in /metrics", name)
		}
	}
}

// TestRecordOAuthThroughRoute: the TypeScript SDK client's OAuth flow
// through a route: the protected-resource metadata and the challenge name
// the route's URL (http://…/gh/mcp), the client discovers the metadata
// under the route, gets a token for the route's URL and calls a tool; no
// token is stored.
func TestRecordOAuthThroughRoute(t *testing.T) {
	needPeers(t)
	o, err := fixtures.StartOAuth(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	data := t.TempDir()
	r := startRun(t, "record", "--route", "gh="+o.MCPURL(), "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off")
	r.wait(t, "route gh: ")
	u := routeLines(r.out.String())["gh"]
	o.AcceptResource(u)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	rep, err := interop.RunClient(ctx, u, &interop.ClientOptions{OAuth: true, Steps: interop.StepsFixture})
	if err != nil {
		t.Fatalf("the TypeScript client through route gh: %v", err)
	}
	if rep.OAuth == nil || rep.OAuth.Tokens < 1 {
		t.Errorf("client's OAuth report %+v", rep.OAuth)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	if found := holdsAny(t, data, o.Secrets()); len(found) > 0 {
		t.Errorf("the store's files hold secrets: %q", found)
	}
}

// TestSendAgainThroughARoute: the dashboard's Send again (and the Tools
// page's Send) on a session recorded through `--route NAME=URL` goes to
// that route, /NAME/…, as the client called it (it went to /… and got a
// 404 before), and the answer is recorded in a new session of the route.
func TestSendAgainThroughARoute(t *testing.T) {
	fx := httptest.NewServer(fixtures.Handler(nil))
	defer fx.Close()
	defer fx.CloseClientConnections()
	data := t.TempDir()
	r := startRun(t, "record", "--route", "fx="+fx.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "127.0.0.1:0")
	dashURL := r.wait(t, "dashboard at ")
	u := routeLines(r.out.String())["fx"]
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	rep, err := fixtures.RunClient(within(t, time.Minute), u, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("go-sdk's client through the route: %v %v", err, failures(rep))
	}
	c := newDashClient(t, dashURL)
	var list struct {
		Sessions []struct {
			ID, Route, Era string
		} `json:"sessions"`
	}
	sessionsOfRoute := func() []string {
		c.do(http.MethodGet, "/api/v1/sessions", &list)
		var ids []string
		for _, s := range list.Sessions {
			if s.Route == "fx" && s.Era != "http" {
				ids = append(ids, s.ID)
			}
		}
		return ids
	}
	var ids []string
	fixtures.Eventually(t, 10*time.Second, func() error {
		if ids = sessionsOfRoute(); len(ids) == 0 {
			return errors.New("no session of route fx")
		}
		return nil
	})
	if len(ids) != 1 {
		t.Fatalf("%d sessions of route fx, want 1", len(ids))
	}
	body, _ := json.Marshal(map[string]any{"session": ids[0], "method": "tools/call", "params": map[string]any{"name": "echo", "arguments": map[string]any{"text": "sent again"}}})
	res, err := c.hc.Do(withJSON(pageRequest(c.hc, c.base, http.MethodPost, "/api/v1/send", strings.NewReader(string(body)))))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(out), "sent again") {
		t.Fatalf("send again to the route's session: HTTP %d %s", res.StatusCode, out)
	}
	fixtures.Eventually(t, 10*time.Second, func() error {
		if ids = sessionsOfRoute(); len(ids) < 2 {
			return fmt.Errorf("after Send again the route has %d sessions, want the client's and the dashboard's", len(ids))
		}
		return nil
	})
	if len(ids) != 2 {
		t.Errorf("after Send again the route has %d sessions, want the client's and the dashboard's", len(ids))
	}
}

// TestReadRightAfterARun: `ls` and `show` through a running recorder,
// straight after a client's run and with no sleep, see the whole session —
// its era, its client and every message — not the session record of a
// moment before (which a tape exported from it then could not replay).
func TestReadRightAfterARun(t *testing.T) {
	fx := httptest.NewServer(fixtures.Handler(nil))
	defer fx.Close()
	defer fx.CloseClientConnections()
	r := startRecord(t, "--upstream", fx.URL+fixtures.PathStateful)
	data, u := r.data, r.url
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	for run := range 3 {
		rep, err := fixtures.RunClient(within(t, time.Minute), u, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
		if err != nil || failures(rep) != nil {
			t.Fatalf("run %d: %v %v", run, err, failures(rep))
		}
		var mcp []capture.Session
		for _, s := range lsJSON(t, data) {
			if s.Opening != "http" {
				mcp = append(mcp, s)
			}
		}
		if len(mcp) != run+1 {
			t.Fatalf("run %d: ls lists %d MCP sessions, want %d", run, len(mcp), run+1)
		}
		for _, s := range mcp {
			n := len(shown(t, data, s.ID))
			if s.Era == protocol.EraUnknown || s.Client.Name == "" || s.Messages != n || n < 4 {
				t.Errorf("run %d: session %s read at once: era %s, client %q, %d messages counted, %d shown", run, s.ID, s.Era, s.Client.Name, s.Messages, n)
			}
		}
	}
}
