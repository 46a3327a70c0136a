package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/fixtures"
)

// startCmd runs an mcptape command in the background until the test ends,
// and returns the value of the first output line that starts with prefix.
func startCmd(t *testing.T, prefix string, args ...string) (value string, out *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &syncBuffer{}
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, out, &errOut) }()
	code := -1
	stop = func() int {
		cancel()
		if code == -1 {
			select {
			case code = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("mcptape %s did not stop", args[0])
			}
		}
		return code
	}
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(out.String(), "\n") {
			if _, v, ok := strings.Cut(line, prefix); ok {
				return strings.TrimSpace(v), out, stop
			}
		}
		select {
		case code = <-done:
			t.Fatalf("mcptape %s exited %d: %s%s", args[0], code, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcptape %s printed no %q: %s%s", args[0], prefix, out.String(), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dashClient is a browser-like client of a dashboard: it keeps the CSRF
// cookie and sends it back in the header.
type dashClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newDashClient(t *testing.T, base string) *dashClient {
	jar, _ := cookiejar.New(nil)
	c := &dashClient{t: t, base: strings.TrimRight(base, "/"), hc: &http.Client{Jar: jar, Transport: &http.Transport{Proxy: nil}}}
	c.do(http.MethodGet, "/api/v1/info", nil)
	return c
}

func (c *dashClient) do(method, path string, v any) int {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, nil)
	if method != http.MethodGet {
		u, _ := url.Parse(c.base)
		for _, ck := range c.hc.Jar.Cookies(u) {
			if ck.Name == "mcptape_csrf" {
				req.Header.Set("X-CSRF-Token", ck.Value)
			}
		}
		req.Header.Set("Origin", c.base)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if v != nil && res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return res.StatusCode
}

type sessionList struct {
	Sessions []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"sessions"`
}

func TestRecordServesTheDashboard(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	dashURL, out, stop := startCmd(t, "dashboard at ", "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0",
		"--data", data, "--dashboard", "127.0.0.1:0")
	var proxyURL string
	for _, line := range strings.Split(out.String(), "\n") {
		if _, u, ok := strings.Cut(line, "point your MCP client at "); ok {
			proxyURL = strings.TrimSpace(u)
		}
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	rep, err := fixtures.RunClient(context.Background(), proxyURL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("client through record: %v %v", err, failures(rep))
	}
	c := newDashClient(t, dashURL)
	var list sessionList
	for i := 0; len(list.Sessions) == 0 || list.Sessions[0].Status != "closed"; i++ {
		if i > 200 {
			t.Fatalf("the dashboard never listed the closed session: %+v", list)
		}
		time.Sleep(20 * time.Millisecond)
		c.do(http.MethodGet, "/api/v1/sessions", &list)
	}
	id := list.Sessions[0].ID
	if code := c.do(http.MethodGet, "/sessions/"+url.PathEscape(id), nil); code != http.StatusOK {
		t.Errorf("the session page: %d", code)
	}

	// The announcement points `mcptape dashboard` at this dashboard.
	a, err := remotestore.ReadAnnouncement(data)
	if err != nil || a.Dashboard != dashURL {
		t.Errorf("announcement %+v (%v), want the dashboard %s", a, err, dashURL)
	}
	if code, o, e := mcptape(t, "dashboard", "--data", data); code != 1 || !strings.Contains(e, "its dashboard is at "+dashURL) {
		t.Errorf("dashboard while recording: %d %s%s", code, o, e)
	}

	// The replay button: a replay server of the session, which the same
	// client script passes against.
	var started struct {
		URL string `json:"url"`
	}
	if code := c.do(http.MethodPost, "/api/v1/sessions/"+url.PathEscape(id)+"/replay", &started); code != http.StatusOK || !strings.HasPrefix(started.URL, "http://127.0.0.1:") {
		t.Fatalf("start replay: %d %+v", code, started)
	}
	rep, err = fixtures.RunClient(context.Background(), started.URL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
	if err != nil || failures(rep) != nil {
		t.Errorf("client against the replay server: %v %v", err, failures(rep))
	}
	if code := stop(); code != 0 {
		t.Errorf("record exited %d", code)
	}

	// Nothing records now: `mcptape dashboard` opens the store itself, and
	// `ls` still works beside it.
	dashURL, _, stop = startCmd(t, "dashboard of "+data+" at ", "dashboard", "--data", data, "--listen", "127.0.0.1:0")
	c = newDashClient(t, dashURL)
	c.do(http.MethodGet, "/api/v1/sessions", &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != id {
		t.Errorf("mcptape dashboard lists %+v, want %s", list, id)
	}
	var info struct {
		Live     string          `json:"live"`
		Features map[string]bool `json:"features"`
	}
	c.do(http.MethodGet, "/api/v1/info", &info)
	if info.Live != "poll" || !info.Features["export"] || !info.Features["import"] || !info.Features["profiles"] || !info.Features["startReplay"] {
		t.Errorf("info %+v", info)
	}
	if code, o, e := mcptape(t, "ls", "--data", data); code != 0 || !strings.Contains(o, id) {
		t.Errorf("ls beside the dashboard: %d %s%s", code, o, e)
	}
	if code := stop(); code != 0 {
		t.Errorf("dashboard exited %d", code)
	}
}

func TestDashboardServesMetrics(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	dashURL, _, stop := startCmd(t, "dashboard at ", "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0",
		"--data", t.TempDir(), "--dashboard", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
	defer stop()
	res, err := http.Get(dashURL + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "mcptape_build_info") {
		t.Errorf("the dashboard's /metrics: %d %.200s", res.StatusCode, b)
	}
}

func TestDashboardFlags(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	data := t.TempDir()
	_, out, stop := startCmd(t, "point your MCP client at ", "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0",
		"--data", data, "--dashboard", "off")
	if strings.Contains(out.String(), "dashboard") {
		t.Errorf("--dashboard off still printed a dashboard: %s", out.String())
	}
	if a, err := remotestore.ReadAnnouncement(data); err != nil || a.Dashboard != "" {
		t.Errorf("announcement %+v (%v), want no dashboard", a, err)
	}
	if code, _, e := mcptape(t, "dashboard", "--data", data); code != 1 || !strings.Contains(e, "dashboard off") {
		t.Errorf("dashboard beside a recorder without one: %d %s", code, e)
	}
	stop()

	// Off loopback, a token is made up and printed once, in the URL.
	dashURL, _, stop := startCmd(t, "dashboard of "+data+" at ", "dashboard", "--data", data, "--listen", "0.0.0.0:0")
	u, err := url.Parse(dashURL)
	if err != nil || len(u.Query().Get("token")) < 32 {
		t.Fatalf("dashboard off loopback printed %s, want a URL with a token", dashURL)
	}
	res, err := http.Get(u.Scheme + "://" + u.Host + "/api/v1/info")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", res.StatusCode)
	}
	stop()
	dashURL, _, stop = startCmd(t, "dashboard of "+data+" at ", "dashboard", "--data", data, "--listen", "0.0.0.0:0", "--token", "my-token-123")
	if !strings.HasSuffix(dashURL, "/?token=my-token-123") {
		t.Errorf("--token: %s", dashURL)
	}
	stop()
	if code, _, e := mcptape(t, "dashboard", "--data", t.TempDir()+"/missing"); code != 1 || !strings.Contains(e, "no recordings in") {
		t.Errorf("dashboard of a missing directory: %d %s", code, e)
	}
}
