package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/fixtures"
)

// cmdRun is an mcptape command running in this process until the test
// ends.
type cmdRun struct {
	args        []string
	out, errOut *syncBuffer
	cancel      context.CancelFunc
	done        chan int      // its exit code, put back by whoever takes it
	exited      chan struct{} // closed once it has exited
}

// startRun runs an mcptape command in the background; it is stopped when
// the test ends.
func startRun(t *testing.T, args ...string) *cmdRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &cmdRun{args: args, out: &syncBuffer{}, errOut: &syncBuffer{}, cancel: cancel, done: make(chan int, 1), exited: make(chan struct{})}
	go func() {
		r.done <- run(ctx, args, r.out, r.errOut)
		close(r.exited)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// wait returns the rest of the first output line that holds prefix,
// waiting up to 10 seconds for it; the test fails if the command exits
// first.
func (r *cmdRun) wait(t *testing.T, prefix string) string {
	t.Helper()
	var v string
	if r.out.await(10*time.Second, r.exited, func(out string) bool { v = outputValue(out, prefix); return v != "" }) {
		return v
	}
	select {
	case code := <-r.done:
		r.done <- code
		t.Fatalf("mcptape %s exited %d: %s%s", r.args[0], code, r.out.String(), r.errOut.String())
	default:
	}
	t.Fatalf("mcptape %s printed no %q: %s%s", r.args[0], prefix, r.out.String(), r.errOut.String())
	return ""
}

// stop cancels the command (once) and returns its exit code.
func (r *cmdRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		r.done <- code
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("mcptape %s did not stop", r.args[0])
		return -1
	}
}

// stoppedStore stops the recorder r, which must exit 0, and opens the
// store it recorded into in data (closed when the test ends).
func (r *cmdRun) stoppedStore(t *testing.T, data string) *badgerstore.Store {
	t.Helper()
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	st, err := badgerstore.Open(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startCmd runs an mcptape command in the background until the test ends,
// and returns the value of the first output line that starts with prefix.
func startCmd(t *testing.T, prefix string, args ...string) (value string, out *syncBuffer, stop func() int) {
	t.Helper()
	r := startRun(t, args...)
	return r.wait(t, prefix), r.out, func() int { return r.stop(t) }
}

// dashClient is a browser-like client of a dashboard: it keeps the CSRF
// cookie and sends it back in the header.
type dashClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

// newDashClient logs in to the dashboard at printed, the URL mcptape
// printed (with its ?token=), as a browser does: the token is traded for
// a cookie, and the page sets the CSRF cookie.
func newDashClient(t *testing.T, printed string) *dashClient {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Transport: &http.Transport{Proxy: nil}}
	return &dashClient{t: t, base: dashLogin(t, hc, printed), hc: hc}
}

// dashLogin opens the URL a dashboard printed with hc (which needs a
// cookie jar) and returns the dashboard's base URL, without a slash.
func dashLogin(t *testing.T, hc *http.Client, printed string) string {
	t.Helper()
	u, err := url.Parse(printed)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("the dashboard's printed URL %q carries no token", printed)
	}
	res, err := hc.Get(printed)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.RawQuery != "" {
		t.Fatalf("opening %s: %s at %s, want the page, without the token in its address", printed, res.Status, res.Request.URL)
	}
	return u.Scheme + "://" + u.Host
}

// dashMetrics is the /metrics URL of the dashboard that printed printed,
// with its token in the query, which scrapeText sends as Prometheus does.
func dashMetrics(printed string) string {
	u, _ := url.Parse(printed)
	return u.Scheme + "://" + u.Host + "/metrics?token=" + u.Query().Get("token")
}

func (c *dashClient) do(method, path string, v any) int {
	c.t.Helper()
	res, err := c.hc.Do(pageRequest(c.hc, c.base, method, path, nil))
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

// pageRequest is a request to the dashboard API at base as its page makes
// it: anything but a GET carries the CSRF cookie (from hc's jar) back in
// the X-CSRF-Token header, from the dashboard's origin.
func pageRequest(hc *http.Client, base, method, path string, body io.Reader) *http.Request {
	req, _ := http.NewRequest(method, base+path, body)
	if method != http.MethodGet {
		u, _ := url.Parse(base)
		for _, ck := range hc.Jar.Cookies(u) {
			if ck.Name == "mcptape_csrf" {
				req.Header.Set("X-CSRF-Token", ck.Value)
			}
		}
		req.Header.Set("Origin", base)
	}
	return req
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
	rep, err := fixtures.RunClient(within(t, time.Minute), proxyURL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("client through record: %v %v", err, failures(rep))
	}
	c := newDashClient(t, dashURL)
	var list sessionList
	fixtures.Eventually(t, 10*time.Second, func() error {
		c.do(http.MethodGet, "/api/v1/sessions", &list)
		if len(list.Sessions) == 0 || list.Sessions[0].Status != "closed" {
			return fmt.Errorf("the dashboard does not list the closed session: %+v", list)
		}
		return nil
	})
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
	rep, err = fixtures.RunClient(within(t, time.Minute), started.URL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
	if err != nil || failures(rep) != nil {
		t.Errorf("client against the replay server: %v %v", err, failures(rep))
	}
	// Stop: the replay server is gone, and its address refuses connections.
	if code := c.do(http.MethodDelete, "/api/v1/sessions/"+url.PathEscape(id)+"/replay?url="+url.QueryEscape(started.URL), nil); code != http.StatusOK && code != http.StatusNoContent {
		t.Errorf("stop replay: HTTP %d", code)
	}
	if res, err := hc.Post(started.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); err == nil {
		res.Body.Close()
		t.Errorf("the stopped replay server still answers: HTTP %d", res.StatusCode)
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

// TestDashboardServesMetrics: a default `mcptape record` (dashboard on, no
// --metrics) collects the proxy's and the recorder's metrics and serves them
// at /metrics on the dashboard's listener, behind the dashboard's token (a
// bearer token, as Prometheus sends it), on loopback too. `mcptape
// dashboard`, where nothing records, serves the process's.
func TestDashboardServesMetrics(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	dashURL, out, stop := startCmd(t, "dashboard at ", "record", "--upstream", up.URL+fixtures.PathStateless, "--listen", "127.0.0.1:0",
		"--data", data, "--dashboard", "127.0.0.1:0")
	proxyURL := outputValue(out.String(), "point your MCP client at ")
	base, _, _ := strings.Cut(dashURL, "?")
	// record prints the metrics note after the dashboard's line.
	if got := awaitValue(t, out, "Prometheus metrics at "); !strings.HasPrefix(got, base+"metrics (") || !strings.Contains(got, "Authorization: Bearer") {
		t.Errorf("record printed metrics at %q, want %smetrics and how to send the token", got, base)
	}
	// On loopback too, /metrics wants the token.
	if res, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Get(base + "metrics"); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics on loopback without the token: %v %v, want 401", res.Status, err)
	} else {
		res.Body.Close()
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	calls := []struct{ method, tool string }{{"tools/call", "echo"}, {"tools/call", "echo"}, {"tools/call", "echo"},
		{"tools/call", "add"}, {"tools/call", "add"}, {"tools/call", "error"}, {"tools/list", ""}, {"tools/list", ""}, {"server/discover", ""}}
	for i, c := range calls {
		modernCall(t, hc, proxyURL, i, c.method, c.tool)
	}
	want := map[string]float64{ // upstream latency samples by method and tool
		"method=tools/call,tool=echo": 3, "method=tools/call,tool=add": 2, "method=tools/call,tool=error": 1,
		"method=tools/list,tool=": 2, "method=server/discover,tool=": 1,
	}
	fams := scrapeUntil(t, hc, dashMetrics(dashURL), func(fams map[string]*dto.MetricFamily) error {
		if n := familyValues(fams, "mcptape_capture_messages_stored_total")[""]; n != float64(2*len(calls)) { // each call and its answer
			return fmt.Errorf("%v messages stored, want %d", n, 2*len(calls))
		}
		return nil
	})
	if got := familyValues(fams, "mcptape_proxy_upstream_latency_seconds"); !maps.Equal(got, want) {
		t.Errorf("upstream latency samples on the dashboard's /metrics: %v, want %v", got, want)
	}
	if got := familyValues(fams, "mcptape_proxy_requests_total"); got["code=200,method=tools/call"] != 6 ||
		got["code=200,method=tools/list"] != 2 || got["code=200,method=server/discover"] != 1 {
		t.Errorf("requests by method and status: %v", got)
	}
	if got := familyValues(fams, "mcptape_capture_errors_total"); got["code=-32000,method=tools/call,tool=error"] != 1 {
		t.Errorf("JSON-RPC errors: %v", got)
	}
	for _, name := range []string{"mcptape_build_info", "go_goroutines", "mcptape_capture_store_size_bytes"} {
		if fams[name] == nil {
			t.Errorf("the dashboard's /metrics has no %s", name)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("record exited %d", code)
	}

	// Off loopback the dashboard's token guards /metrics too; Prometheus
	// sends it as a bearer token.
	dashURL, out, stop = startCmd(t, "dashboard at ", "record", "--upstream", up.URL+fixtures.PathStateless, "--listen", "127.0.0.1:0",
		"--data", data, "--dashboard", "0.0.0.0:0", "--dashboard-token", "metrics-token-1")
	if note := awaitValue(t, out, "Prometheus metrics at "); !strings.Contains(note, "Authorization: Bearer") || strings.Contains(note, "metrics-token-1") {
		t.Errorf("off loopback, record printed %q", note)
	}
	u, _ := url.Parse(dashURL)
	metricsURL := "http://" + u.Host + "/metrics"
	for _, c := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer wrong", http.StatusUnauthorized}, {"Bearer metrics-token-1", http.StatusOK}} {
		req, _ := http.NewRequest("GET", metricsURL, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.want || (c.want == http.StatusOK && !strings.Contains(string(b), "mcptape_proxy_requests_in_flight")) {
			t.Errorf("/metrics off loopback with %q: %d %.100s, want %d", c.auth, res.StatusCode, b, c.want)
		}
	}
	stop()

	// Nothing records: the build, Go and process metrics only.
	dashURL, _, stop = startCmd(t, "dashboard of "+data+" at ", "dashboard", "--data", data, "--listen", "127.0.0.1:0")
	fams = scrapeText(t, hc, dashMetrics(dashURL))
	for _, name := range []string{"mcptape_build_info", "go_goroutines", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("mcptape dashboard's /metrics has no %s", name)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "mcptape_proxy_") || strings.HasPrefix(name, "mcptape_capture_") {
			t.Errorf("mcptape dashboard's /metrics has %s, with nothing recording", name)
		}
	}
	stop()
}

// awaitValue waits up to 10 seconds for an output line holding prefix,
// which a command may print after the line a test waited for, and returns
// the rest of it.
func awaitValue(t *testing.T, out *syncBuffer, prefix string) string {
	t.Helper()
	var v string
	if !out.await(10*time.Second, nil, func(out string) bool { v = outputValue(out, prefix); return v != "" }) {
		t.Fatalf("no %q in the output:\n%s", prefix, out.String())
	}
	return v
}

// outputValue is the rest of the first output line holding prefix.
func outputValue(out, prefix string) string {
	for _, line := range strings.Split(out, "\n") {
		if _, v, ok := strings.Cut(line, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
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
	if code, _, e := mcptape(t, "dashboard", "--data", t.TempDir()+"/missing"); code != 1 || !strings.Contains(e, "no store at") {
		t.Errorf("dashboard of a missing directory: %d %s", code, e)
	}

	// A busy port: the error names the flag the command has (it said
	// --dashboard, a flag of record's only).
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	code, _, e := mcptape(t, "dashboard", "--data", data, "--listen", busy.Addr().String())
	if code != 1 || !strings.Contains(e, "--listen "+busy.Addr().String()) || !strings.Contains(e, "choose another address with --listen") || strings.Contains(e, "--dashboard") {
		t.Errorf("dashboard on a busy port: %d %s", code, e)
	}
}
