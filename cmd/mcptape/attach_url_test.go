package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
)

const cursorURLConfig = `{
  "mcpServers": {
    "remote tools": { "url": "%s", "headers": { "X-Team": "a" } },
    "local": { "command": "npx", "args": ["-y", "some-server"] }
  }
}
`

// TestAttachURLServer: `mcptape attach` of a client's url server asks the
// running recorder (`record --routes`) for a route and points the entry
// at it; the client's traffic is then recorded under that route; attach
// again changes nothing, and detach puts the file back byte for byte.
// With no recorder running, attach says to start one.
func TestAttachURLServer(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	original := strings.Replace(cursorURLConfig, "%s", up.URL+fixtures.PathStateful, 1)
	if err := os.WriteFile(cfg, []byte(original), 0o600); err != nil {
		t.Fatal(err)
	}

	// No recorder yet.
	empty := t.TempDir()
	code, out, e := mcptape(t, "attach", "cursor", "remote tools", "--config", cfg, "--data", empty)
	if !strings.Contains(out+e, "mcptape record --routes") || string(readFile(t, cfg)) != original {
		t.Errorf("attach with no recorder running: %d %s%s", code, out, e)
	}

	data := t.TempDir()
	r := startRun(t, "record", "--routes", "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off")
	r.wait(t, "no route yet")
	code, out, e = mcptape(t, "attach", "cursor", "remote tools", "--config", cfg, "--data", data)
	if code != 0 || !strings.Contains(out, "remote tools: attached") {
		t.Fatalf("attach: %d %s%s", code, out, e)
	}
	attached := string(readFile(t, cfg))
	var newURL string
	for _, line := range strings.Split(attached, "\n") {
		if _, rest, ok := strings.Cut(line, `"url": "`); ok {
			newURL, _, _ = strings.Cut(rest, `"`)
		}
	}
	if !strings.HasPrefix(newURL, "http://127.0.0.1:") || !strings.HasSuffix(newURL, "/remote-tools"+fixtures.PathStateful) {
		t.Fatalf("the entry's url is %q, want the recorder's route:\n%s", newURL, attached)
	}
	if want := strings.Replace(original, up.URL+fixtures.PathStateful, newURL, 1); attached != want {
		t.Errorf("attach changed more than the url:\n%s", attached)
	}

	if code, out, e := mcptape(t, "clients", "cursor", "--config", cfg); code != 0 ||
		!strings.Contains(out, "url    yes") || !strings.Contains(out, up.URL+fixtures.PathStateful+"  (via "+newURL+")") {
		t.Errorf("clients does not show the url server attached:\n%s%s", out, e)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rep, err := fixtures.RunClient(ctx, newURL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("a client at the attached url: %v %v", err, failures(rep))
	}

	if code, out, e = mcptape(t, "attach", "cursor", "remote tools", "--config", cfg, "--data", data); code != 0 || !strings.Contains(out, "already attached") || string(readFile(t, cfg)) != attached {
		t.Errorf("attach twice: %d %s%s", code, out, e)
	}
	// A recorder started again on the data directory serves the route
	// attach added: the client's url still works.
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	r = startRun(t, "record", "--routes", "--listen", strings.TrimPrefix(routeBase(newURL), "http://"), "--data", data, "--dashboard", "off")
	if got := r.wait(t, "route remote-tools: "); !strings.Contains(got, newURL) {
		t.Errorf("the restarted recorder's route: %q, want %s", got, newURL)
	}
	rep, err = fixtures.RunClient(ctx, newURL, &fixtures.ClientOptions{HTTPClient: hc, Only: []string{fixtures.ToolEcho}})
	if err != nil || failures(rep) != nil {
		t.Fatalf("a client at the attached url, after the recorder restarted: %v %v", err, failures(rep))
	}

	if code, out, e = mcptape(t, "detach", "cursor", "remote tools", "--config", cfg); code != 0 || !strings.Contains(out, "remote tools: detached") {
		t.Errorf("detach: %d %s%s", code, out, e)
	}
	if got := string(readFile(t, cfg)); got != original {
		t.Errorf("detach did not restore the config byte for byte:\n%s", got)
	}

	st := r.stoppedStore(t, data)
	var found int
	for s, err := range st.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Route == "remote-tools" && s.Calls >= 2 && s.Upstream == up.URL {
			found++
		}
	}
	if found != 2 {
		t.Errorf("%d sessions recorded on route remote-tools, want one per recorder", found)
	}
}

// routeBase is scheme://host:port of a URL.
func routeBase(u string) string { return urlRE.FindString(u) }
