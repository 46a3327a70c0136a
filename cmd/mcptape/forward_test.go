package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/ca"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
)

// upstreamTLS is a TLS configuration for a loopback server whose
// certificate a CA of its own signs (not mcptape's): the file of that CA
// is what `record --upstream-ca` takes.
func upstreamTLS(t *testing.T) (*tls.Config, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "upstream-ca")
	if _, err := ca.Init(dir, nil); err != nil {
		t.Fatal(err)
	}
	auth, err := ca.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := auth.Leaf("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{*leaf}}, ca.CertPath(dir)
}

// startForward runs `mcptape record --forward --mitm 127.0.0.1` with its
// own CA (ca init first) and returns the proxy's URL and the CA's file.
func startForward(t *testing.T, data, upstreamCA string, extra ...string) (*cmdRun, string, string) {
	t.Helper()
	if code, _, e := mcptape(t, "ca", "init", "--data", data); code != 0 {
		t.Fatalf("ca init: %s", e)
	}
	args := append([]string{"record", "--forward", "--mitm", "127.0.0.1", "--upstream-ca", upstreamCA,
		"--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off"}, extra...)
	r := startRun(t, args...)
	px := urlRE.FindString(r.wait(t, "forward proxy at "))
	if px == "" {
		t.Fatalf("no proxy URL in %q", r.out.String())
	}
	return r, px, ca.CertPath(caDir(data))
}

// node22 is the pinned Node 22, or the test is skipped (failed where the
// peers are required).
func node22(t *testing.T) string {
	t.Helper()
	needPeers(t)
	p, err := interop.Node22()
	if err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return p
}

// proxyEnv is what makes Node 22 (and so the TypeScript SDK, and Claude
// Code) use a proxy and trust mcptape's CA.
func proxyEnv(px, caFile string) []string {
	return []string{"NODE_USE_ENV_PROXY=1", "HTTPS_PROXY=" + px, "HTTP_PROXY=" + px, "https_proxy=" + px, "http_proxy=" + px,
		"NO_PROXY=", "no_proxy=", "NODE_EXTRA_CA_CERTS=" + caFile}
}

// tapeDoc is the part of an exported tape these tests read.
type tapeDoc struct {
	Sessions []struct {
		Session struct {
			Leg, Route, Upstream, Path, Opening string
			Calls                               int
		} `json:"session"`
		Exchanges []struct {
			Method, URL, Rewritten string
			Status                 int
		} `json:"exchanges"`
	} `json:"sessions"`
}

func exportForwardTape(t *testing.T, data string) (string, *tapeDoc) {
	t.Helper()
	tape := filepath.Join(t.TempDir(), "forward.tape")
	if code, _, e := mcptape(t, "export", "--data", data, "-q", "-o", tape); code != 0 {
		t.Fatalf("export: %d %s", code, e)
	}
	b, err := os.ReadFile(tape)
	if err != nil {
		t.Fatal(err)
	}
	var doc tapeDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return tape, &doc
}

// TestRecordForwardMITMOAuth is the forward-mode case: Node 22
// (NODE_USE_ENV_PROXY=1, HTTPS_PROXY, an empty NO_PROXY,
// NODE_EXTRA_CA_CERTS) runs the TypeScript SDK client against the OAuth
// fixture behind TLS, by its own URLs, through `record --forward --mitm`:
// the client registers, authorizes, gets a token and calls a tool. The
// store holds the MCP session and the authorization server's traffic, on
// the MITM leg, unchanged (nothing rewritten), with no secret in the
// store's files or an exported tape.
func TestRecordForwardMITMOAuth(t *testing.T) {
	node := node22(t)
	upTLS, upCA := upstreamTLS(t)
	o, err := fixtures.StartOAuth(&fixtures.OAuthOptions{TLS: upTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	data := t.TempDir()
	r, px, caFile := startForward(t, data, upCA)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	rep, err := interop.RunClient(ctx, o.MCPURL(), &interop.ClientOptions{OAuth: true, Steps: interop.StepsFixture,
		Node: node, Env: proxyEnv(px, caFile)})
	if err != nil {
		t.Fatalf("the TypeScript client (Node 22) through record --forward --mitm: %v", err)
	}
	if rep.OAuth == nil || rep.OAuth.Tokens < 1 || rep.OAuth.Registrations != 1 {
		t.Errorf("the client's OAuth report: %+v", rep.OAuth)
	}
	if st := o.Stats(); st.CodeGrants < 1 || st.Authorized < 1 {
		t.Errorf("the fixture saw %+v: no token granted, or no authorized call", st)
	}

	tape, doc := exportForwardTape(t, data)
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	var mcpCalls int
	var token, metadata bool
	for _, s := range doc.Sessions {
		if s.Session.Leg != "mitm" {
			t.Errorf("a session on leg %q, want every one on mitm: %+v", s.Session.Leg, s.Session)
		}
		if s.Session.Upstream == o.ResourceOrigin() && s.Session.Opening != "http" {
			mcpCalls += s.Session.Calls
		}
		for _, x := range s.Exchanges {
			if x.Rewritten != "" {
				t.Errorf("forward mode rewrote %s %s: %s", x.Method, x.URL, x.Rewritten)
			}
			if s.Session.Upstream == o.AuthServerURL() && x.Method == http.MethodPost && strings.HasPrefix(x.URL, fixtures.PathToken) {
				token = true
			}
			if s.Session.Upstream == o.AuthServerURL() && s.Session.Opening != "http" {
				t.Errorf("the authorization server's traffic (not MCP) is in a %q session, want an http one", s.Session.Opening)
			}
			if strings.HasPrefix(x.URL, fixtures.WellKnownProtectedResource) && x.Status == http.StatusOK {
				metadata = true
			}
		}
	}
	if mcpCalls < 2 || !token || !metadata {
		t.Errorf("recorded: %d MCP calls to %s, token request %v, resource metadata %v; want the whole flow", mcpCalls, o.ResourceOrigin(), token, metadata)
	}
	if found := holdsAny(t, data, o.Secrets()); len(found) > 0 {
		t.Errorf("the store's files hold secrets: %q", found)
	}
	if found := holdsAny(t, filepath.Dir(tape), o.Secrets()); len(found) > 0 {
		t.Errorf("the exported tape holds secrets: %q", found)
	}
}

// TestRecordForwardCurl: curl through the forward proxy, plain (-x) and
// into an intercepted tunnel (-x, --cacert mcptape's CA): both recorded,
// on their legs, with the server's answer unchanged.
func TestRecordForwardCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal("curl is not installed (.ci/run installs it)")
		}
		t.Skip("no curl")
	}
	plain, secure, upCA := forwardTargets(t)
	data := t.TempDir()
	r, px, caFile := startForward(t, data, upCA)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, u := range []string{plain.URL + fixtures.PathStateless, secure.URL + fixtures.PathStateless} {
		out, err := exec.Command("curl", "-sS", "--max-time", "20", "-x", px, "--cacert", caFile,
			"-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream",
			"-d", init, u).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"serverInfo"`) {
			t.Errorf("curl -x %s %s: %v %s", px, u, err, out)
		}
	}
	got := legsByUpstream(t, r, data, "")
	if got[plain.URL] != "forward" || got[secure.URL] != "mitm" || len(got) != 2 {
		t.Errorf("sessions by upstream and leg: %v; want %s on forward and %s on mitm", got, plain.URL, secure.URL)
	}
}

// TestRecordMITMNeedsCA: --mitm without mcptape's CA refuses to start,
// saying how to make one.
func TestRecordMITMNeedsCA(t *testing.T) {
	code, _, e := mcptape(t, "record", "--forward", "--mitm", "*.example.com", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--dashboard", "off")
	if code == 0 || !strings.Contains(e, "mcptape ca init") {
		t.Errorf("record --mitm without a CA: %d %s", code, e)
	}
	code, _, e = mcptape(t, "record", "--mitm", "*.example.com", "--upstream", "http://127.0.0.1:1/mcp")
	if code != 2 || !strings.Contains(e, "--forward") {
		t.Errorf("--mitm without --forward: %d %s", code, e)
	}
}

// --forward warns that it is an open proxy when it listens where others
// can reach it (tested on the address check: tests listen on loopback only).
func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:7411": true, "[::1]:7411": true, "0.0.0.0:7411": false, "[::]:7411": false, "192.0.2.1:7411": false} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%s) = %v", addr, got)
		}
	}
}

// TestRecordForwardPythonRequests: Python's requests, set up as the README
// says (HTTPS_PROXY and HTTP_PROXY at the forward proxy, REQUESTS_CA_BUNDLE
// holding mcptape's CA), reaches a plain and a TLS MCP server by their own
// URLs; both exchanges are recorded, on the forward and the MITM leg.
func TestRecordForwardPythonRequests(t *testing.T) {
	if err := exec.Command("python3", "-c", "import requests").Run(); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal("python3 with requests is not installed (.ci/run installs python3-requests)")
		}
		t.Skip("no python3 with requests")
	}
	plain, secure, upCA := forwardTargets(t)
	data := t.TempDir()
	r, px, caFile := startForward(t, data, upCA)
	const script = `import sys, requests
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "python-requests", "version": "1"}}}
for u in sys.argv[1:]:
    r = requests.post(u, json=init, headers={"Accept": "application/json, text/event-stream"}, timeout=20)
    print(r.status_code, r.text)
`
	cmd := exec.Command("python3", "-c", script, plain.URL+fixtures.PathStateless, secure.URL+fixtures.PathStateless)
	cmd.Env = append(os.Environ(), "HTTP_PROXY="+px, "HTTPS_PROXY="+px, "http_proxy="+px, "https_proxy="+px, "NO_PROXY=", "no_proxy=", "REQUESTS_CA_BUNDLE="+caFile)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Count(string(out), `"serverInfo"`) != 2 {
		t.Fatalf("python requests through the forward proxy: %v\n%s", err, out)
	}
	got := legsByUpstream(t, r, data, "python-requests")
	if got[plain.URL] != "forward" || got[secure.URL] != "mitm" || len(got) != 2 {
		t.Errorf("sessions of python-requests by upstream and leg: %v; want %s on forward and %s on mitm", got, plain.URL, secure.URL)
	}
}

// forwardTargets are a plain and a TLS fixture server for the forward
// proxy's tests, and the file of the CA the TLS one's certificate is from.
func forwardTargets(t *testing.T) (plain, secure *httptest.Server, upCA string) {
	t.Helper()
	upTLS, upCA := upstreamTLS(t)
	plain = httptest.NewServer(fixtures.Handler(nil))
	t.Cleanup(plain.Close)
	secure = httptest.NewUnstartedServer(fixtures.Handler(nil))
	secure.TLS = upTLS
	secure.StartTLS()
	t.Cleanup(secure.Close)
	return plain, secure, upCA
}

// legsByUpstream stops the recorder r and returns the leg of each session
// in data with a request and its answer, by upstream; client, when not "",
// keeps only that client's sessions.
func legsByUpstream(t *testing.T, r *cmdRun, data, client string) map[string]string {
	t.Helper()
	st := r.stoppedStore(t, data)
	got := map[string]string{}
	for s, err := range st.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Messages >= 2 && (client == "" || s.Client.Name == client) {
			got[s.Upstream] = s.Leg.String()
		}
	}
	return got
}
