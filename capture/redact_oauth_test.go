package capture_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// The secrets of an OAuth flow, as an authorization server and a client
// would send them.
const (
	oClientSecret = "cs_5ecretValue-0123456789abcdef"
	oRegToken     = "rat_RegistrationAccess-0123456789"
	oCode         = "ac_AuthorizationCode-0123456789ab"
	oVerifier     = "ver_PkceCodeVerifier-0123456789abcdefghijklmnop"
	oAccess       = "at_AccessToken-0123456789abcdefghijkl"
	oRefresh      = "rt_RefreshToken-0123456789abcdefghijkl"
	oAccess2      = "at_SecondAccessToken-0123456789abcdefgh"
	oRefresh2     = "rt_SecondRefreshToken-0123456789abcdefg"
	oCode2        = "ac_SecondCode-0123456789abcdefghijkl"
)

// oauthFlow drives the recorder with the traffic of an OAuth flow that
// passes through mcptape: metadata, registration, authorize, code and
// refresh token requests, then an MCP call whose result echoes the token.
func oauthFlow(d *driver) {
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
	jsonOut := map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"}
	d.exchange(ex{method: "GET", path: "/.well-known/oauth-authorization-server", reqHeader: map[string]string{"MCP-Protocol-Version": "2025-11-25"},
		respHeader: map[string]string{"Content-Type": "application/json"},
		resp:       []string{`{"issuer":"http://127.0.0.1:7411","token_endpoint":"http://127.0.0.1:7411/token"}`}})
	d.exchange(ex{method: "POST", path: "/register", reqHeader: map[string]string{"Content-Type": "application/json"},
		body:   `{"client_name":"c","redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"client_secret_post"}`,
		status: 201, respHeader: jsonOut,
		resp: []string{`{"client_id":"client-1",`, `"client_secret": "` + oClientSecret + `", "nested": {"registration_access_token":"` + oRegToken + `"},"redirect_uris":["http://127.0.0.1:9/cb"]}`}})
	d.exchange(ex{method: "GET", path: "/authorize?response_type=code&client_id=client-1&code_challenge=chal&state=st-1&resource=http%3A%2F%2F127.0.0.1%3A7411%2Fmcp",
		status: 302, respHeader: map[string]string{"Location": "http://127.0.0.1:9/cb?code=" + oCode + "&state=st-1&iss=http%3A%2F%2F127.0.0.1%3A7411"}})
	d.exchange(ex{method: "POST", path: "/token", reqHeader: form,
		body:       "grant_type=authorization_code&code=" + oCode + "&code_verifier=" + oVerifier + "&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&client_id=client-1&client_secret=" + oClientSecret,
		respHeader: jsonOut,
		resp:       []string{`{"access_token":"` + oAccess + `","token_type":"Bearer","expires_in":3600,"refresh_token":"` + oRefresh + `","scope":"mcp:tools"}`}})
	// A refresh with Basic client authentication, answered gzipped.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"access_token":"` + oAccess2 + `","refresh_token":"` + oRefresh2 + `"}`))
	zw.Close()
	basic := map[string]string{"Content-Type": "application/x-www-form-urlencoded",
		"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("client-1:"+oClientSecret))}
	d.exchange(ex{method: "POST", path: "/token", reqHeader: basic, body: "grant_type=refresh_token&refresh_token=" + oRefresh,
		respHeader: map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, resp: []string{gz.String()}})
	// The callback, had it passed through the proxy.
	d.exchange(ex{method: "GET", path: "/cb?code=" + oCode2 + "&state=st-2", status: 404,
		respHeader: map[string]string{"Content-Type": "text/plain"}, resp: []string{"no callback here\n"}})
	// MCP traffic with the token, and a server that echoes it.
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + oAccess2},
		body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}`, respHeader: map[string]string{"Content-Type": "application/json"},
		resp: []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"your token is ` + oAccess2 + `"}]}}`}})
}

var oauthSecrets = []string{oClientSecret, oRegToken, oCode, oVerifier, oAccess, oRefresh, oAccess2, oRefresh2, oCode2}

// everything is every stored record of the driver's store, as JSON.
func (d *driver) everything() string {
	d.t.Helper()
	var b strings.Builder
	for _, s := range d.sessions() {
		j, _ := json.Marshal(s)
		b.Write(j)
		for x, err := range d.store.Exchanges(context.Background(), s.ID) {
			if err != nil {
				d.t.Fatal(err)
			}
			j, _ := json.Marshal(x)
			b.Write(j)
		}
		for _, m := range d.messages(s.ID) {
			j, _ := json.Marshal(m)
			b.Write(j)
			b.Write(m.Raw) // as bytes too, not only base64
		}
	}
	return b.String()
}

func (d *driver) sessions() []*capture.Session {
	d.t.Helper()
	if err := d.rec.Sync(context.Background()); err != nil {
		d.t.Fatal(err)
	}
	var out []*capture.Session
	for s, err := range d.store.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			d.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestOAuthTrafficRedacted: the OAuth flow is recorded, bodies included, so
// a user can follow it, with every code, verifier, token and secret
// redacted wherever it appears: headers, URLs, forms, JSON, a gzipped
// body, and an MCP result that echoes a token.
func TestOAuthTrafficRedacted(t *testing.T) {
	d := newDriver(t, nil)
	oauthFlow(d)
	all := d.everything()
	for _, s := range oauthSecrets {
		if strings.Contains(all, s) {
			t.Errorf("the store holds the secret %q", s)
		}
	}

	var frames []string
	var httpSession, mcpSession *capture.Session
	for _, s := range d.sessions() {
		switch s.Opening {
		case "http":
			httpSession = s
		default:
			mcpSession = s
		}
	}
	if httpSession == nil || mcpSession == nil {
		t.Fatalf("sessions %+v: want the plain HTTP one and the MCP one", d.sessions())
	}
	for _, m := range d.messages(httpSession.ID) {
		if m.Kind != protocol.KindFrame {
			t.Errorf("plain HTTP message %d is a %s, want a frame", m.Seq, m.Kind)
		}
		frames = append(frames, m.Direction.String()+" "+string(m.Raw))
	}
	got := strings.Join(frames, "\n")
	for _, want := range []string{
		`{"issuer":"http://127.0.0.1:7411","token_endpoint":"http://127.0.0.1:7411/token"}`, // no secret: byte for byte
		`"redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"client_secret_post"}`,
		`"client_secret": "[redacted]", "nested": {"registration_access_token":"[redacted]"}`,
		"grant_type=authorization_code&code=[redacted]&code_verifier=[redacted]&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&client_id=client-1&client_secret=[redacted]",
		`"access_token":"[redacted]","token_type":"Bearer","expires_in":3600,"refresh_token":"[redacted]","scope":"mcp:tools"`,
		"grant_type=refresh_token&refresh_token=[redacted]",
		`{"access_token":"[redacted]","refresh_token":"[redacted]"}`, // the gzipped answer, decoded
		"no callback here",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the plain HTTP frames lack %s:\n%s", want, got)
		}
	}
	var authorize, callback *capture.Exchange
	for x, err := range d.store.Exchanges(context.Background(), httpSession.ID) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(x.URL, "/authorize"):
			authorize = x
		case strings.HasPrefix(x.URL, "/cb"):
			callback = x
		}
	}
	if loc := authorize.ResponseHeader.Get("Location"); !strings.Contains(loc, "code=%5Bredacted%5D") || !strings.Contains(loc, "state=st-1") {
		t.Errorf("the authorize redirect's Location is stored as %q: want its code redacted, its state kept", loc)
	}
	if !strings.Contains(callback.URL, "code=%5Bredacted%5D") || !strings.Contains(callback.URL, "state=st-2") {
		t.Errorf("the callback's URL is stored as %q", callback.URL)
	}
	for _, m := range d.messages(mcpSession.ID) {
		if m.Kind == protocol.KindResult && !strings.Contains(string(m.Raw), "your token is [redacted]") {
			t.Errorf("the result that echoes the token is stored as %s", m.Raw)
		}
	}

	// The control: with redaction off, the same flow stores them, so the
	// check above can fail.
	off := newDriver(t, &capture.RecorderOptions{Redact: capture.RedactOptions{Disabled: true}})
	oauthFlow(off)
	all = off.everything()
	for _, s := range oauthSecrets {
		if !strings.Contains(all, s) {
			t.Errorf("with redaction off, the store lacks %q: the check above proves nothing", s)
		}
	}
}

// A plain body is stored up to capture.MaxPlainBody, the rest counted; a
// JSON POST that is no JSON-RPC and names no MCP header is plain HTTP, one
// with an MCP header is a malformed MCP request.
func TestPlainBodies(t *testing.T) {
	d := newDriver(t, nil)
	big := strings.Repeat("x", capture.MaxPlainBody+100)
	d.exchange(ex{method: "GET", path: "/health", respHeader: map[string]string{"Content-Type": "text/plain"}, resp: []string{big[:1000], big[1000:]}})
	d.exchange(ex{method: "POST", path: "/mcp", reqHeader: map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
		body: `{"hello":"world"}`, status: 400, respHeader: map[string]string{"Content-Type": "text/plain"}, resp: []string{"bad\n"}})
	var sawCut, sawInvalid bool
	for _, s := range d.sessions() {
		for _, m := range d.messages(s.ID) {
			if m.Kind == protocol.KindFrame && len(m.Raw) == capture.MaxPlainBody && hasFinding(m, capture.FindingOversize) {
				sawCut = true
				if !strings.Contains(m.Findings[0].Message, "65636 bytes") {
					t.Errorf("the cut body's finding %q does not count the whole", m.Findings[0].Message)
				}
			}
			if m.Kind == protocol.KindInvalid && string(m.Raw) == `{"hello":"world"}` {
				sawInvalid = true
			}
		}
	}
	if !sawCut {
		t.Error("the large plain body is not stored cut to MaxPlainBody with an oversize finding")
	}
	if !sawInvalid {
		t.Error("a JSON POST with an MCP Accept header that is no JSON-RPC is not recorded as an invalid MCP message")
	}
}
