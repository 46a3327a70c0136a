package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/fixtures"
)

// The recorder's local read API (the one recorder.json announces) takes
// the dashboard's Host rule: with the right token but a Host that names no
// loopback host (a page that rebound its name to 127.0.0.1), both refuse
// with 403 (before, the API answered 200). A loopback Host is served.
func TestRecorderAPIRefusesForeignHost(t *testing.T) {
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	data := t.TempDir()
	dashURL, _, stop := startCmd(t, "dashboard at ", "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0",
		"--data", data, "--dashboard", "127.0.0.1:0")
	defer stop()
	a, err := remotestore.ReadAnnouncement(data)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	get := func(u, host, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	api, _ := url.Parse(a.API)
	d, _ := url.Parse(dashURL)
	dashToken := d.Query().Get("token")
	for _, host := range []string{"evil.example", "evil.example:" + api.Port(), "127.0.0.1.nip.io"} {
		if code := get(a.API+"/v1/status", host, a.Token); code != http.StatusForbidden {
			t.Errorf("the recorder's API, Host %q with the right token: %d, want 403", host, code)
		}
		if code := get(strings.TrimSuffix(d.Scheme+"://"+d.Host, "/")+"/api/v1/sessions", host, dashToken); code != http.StatusForbidden {
			t.Errorf("the dashboard, Host %q with the right token: %d, want 403", host, code)
		}
	}
	for _, host := range []string{api.Host, "localhost:" + api.Port()} {
		if code := get(a.API+"/v1/status", host, a.Token); code != http.StatusOK {
			t.Errorf("the recorder's API, Host %q with the right token: %d, want 200", host, code)
		}
	}
}
