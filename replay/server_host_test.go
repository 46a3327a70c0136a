package replay_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/replay"
)

// On a loopback listener the replay server refuses a request that names a
// foreign Host, as the recorder and go-sdk's servers do: a web page that
// rebinds its own name to 127.0.0.1 must not reach the recorded server.
// AllowAnyHost (the CLI's --allow-any-host) turns the check off.
func TestReplayServerRefusesForeignHost(t *testing.T) {
	tape := counterTape(t)
	send := func(t *testing.T, u, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", u, strings.NewReader(modernCall(1, "count", `{}`)))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range modernHeaders {
			req.Header.Set(k, v)
		}
		tr := &http.Transport{Proxy: nil}
		defer tr.CloseIdleConnections()
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	port := hs.URL[strings.LastIndex(hs.URL, ":"):]
	for _, host := range []string{"evil.example.com", "evil.example.com" + port, "127.0.0.1.nip.io" + port, "10.0.0.1" + port} {
		code, body := send(t, hs.URL+"/mcp", host)
		if code != http.StatusForbidden || !strings.Contains(body, "--allow-any-host") {
			t.Errorf("Host %s: %d %q, want 403 naming --allow-any-host", host, code, body)
		}
	}
	if r := s.Report(); r.Served != 0 {
		t.Errorf("a refused request was served: %+v", r)
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "[::1]" + port, "LOCALHOST", "app.localhost" + port} {
		if code, body := send(t, hs.URL+"/mcp", host); code != http.StatusOK || !strings.Contains(body, `"text":"`) {
			t.Errorf("Host %s: %d %q, want the recorded answer", host, code, body)
		}
	}

	_, open := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, AllowAnyHost: true})
	if code, body := send(t, open.URL+"/mcp", "evil.example.com"); code != http.StatusOK {
		t.Errorf("AllowAnyHost: a foreign Host got %d %q, want 200", code, body)
	}
}
