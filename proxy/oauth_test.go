package proxy_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

func startOAuthFixture(t *testing.T, opts *fixtures.OAuthOptions) *fixtures.OAuth {
	t.Helper()
	o, err := fixtures.StartOAuth(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// exchangeAt is the recorded exchange whose method and URL are these.
func (r *rig) exchangeAt(t *testing.T, method, u string) *capture.Exchange {
	t.Helper()
	for _, x := range r.exchanges(t) {
		if x.Method == method && x.URL == u {
			return x
		}
	}
	t.Fatalf("no exchange %s %s recorded", method, u)
	return nil
}

// frames are the messages of an exchange.
func (r *rig) framesOf(t *testing.T, x *capture.Exchange) []*capture.Message {
	t.Helper()
	var out []*capture.Message
	for _, m := range r.messages(t, x.SessionID) {
		if m.ExchangeID == x.ID {
			out = append(out, m)
		}
	}
	return out
}

// TestOAuthRewrite: through reverse mode, the resource_metadata URL of a
// 401's and a 403's WWW-Authenticate and the resource of the protected-
// resource metadata name the proxy as the client addressed it, path kept;
// every other byte is the upstream's; the record keeps the upstream's
// original and says what was rewritten.
func TestOAuthRewrite(t *testing.T) {
	o := startOAuthFixture(t, &fixtures.OAuthOptions{AdminTools: []string{fixtures.ToolAdd}})
	r := newRig(t, nil, &rigOptions{upstream: o.ResourceOrigin()})
	const prmPath = "/.well-known/oauth-protected-resource/mcp"
	jsonPost := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

	// 401
	direct := do(t, "POST", o.MCPURL(), initReq, jsonPost)
	got := do(t, "POST", r.px.URL+"/mcp", initReq, jsonPost)
	want := strings.Replace(direct.header.Get("WWW-Authenticate"), o.ResourceOrigin()+prmPath, r.px.URL+prmPath, 1)
	if got.status != 401 || got.header.Get("WWW-Authenticate") != want || want == direct.header.Get("WWW-Authenticate") {
		t.Fatalf("401 through the proxy: %d %q\nwant %q", got.status, got.header.Get("WWW-Authenticate"), want)
	}
	if !bytes.Equal(got.body, direct.body) {
		t.Errorf("the 401's body changed: %q, upstream %q", got.body, direct.body)
	}

	// The metadata, addressed as 127.0.0.1 and as localhost.
	directPRM := do(t, "GET", o.ResourceOrigin()+prmPath, "", nil)
	for _, base := range []string{r.px.URL, strings.Replace(r.px.URL, "127.0.0.1", "localhost", 1)} {
		got := do(t, "GET", base+prmPath, "", nil)
		want := strings.Replace(string(directPRM.body), `"resource": "`+o.MCPURL()+`"`, `"resource": "`+base+`/mcp"`, 1)
		if got.status != 200 || string(got.body) != want || want == string(directPRM.body) {
			t.Errorf("metadata at %s:\n%s\nwant (the upstream's bytes, the resource changed):\n%s", base, got.body, want)
		}
		if cl := got.header.Get("Content-Length"); cl != strconv.Itoa(len(got.body)) {
			t.Errorf("Content-Length %q for %d bytes", cl, len(got.body))
		}
	}

	// 403: a token without the admin scope calls the admin tool.
	tok := directToken(t, o)
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}`
	auth := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer " + tok}
	direct403 := do(t, "POST", o.MCPURL(), call, auth)
	got403 := do(t, "POST", r.px.URL+"/mcp", call, auth)
	want = strings.Replace(direct403.header.Get("WWW-Authenticate"), o.ResourceOrigin()+prmPath, r.px.URL+prmPath, 1)
	if got403.status != 403 || got403.header.Get("WWW-Authenticate") != want || !strings.Contains(want, "insufficient_scope") {
		t.Errorf("403 through the proxy: %d %q\nwant %q", got403.status, got403.header.Get("WWW-Authenticate"), want)
	}

	// Nothing else is touched: the authorization server's metadata is not
	// the resource server's to give (404 passes through), nor is any other
	// response.
	if res := do(t, "GET", r.px.URL+"/.well-known/oauth-authorization-server", "", nil); res.status != 404 {
		t.Errorf("AS metadata at the resource server: %d", res.status)
	}

	r.sync(t)
	x401 := r.exchangeAt(t, "POST", "/mcp")
	if !strings.Contains(x401.Rewritten, "WWW-Authenticate resource_metadata "+o.ResourceOrigin()+prmPath+" → "+r.px.URL+prmPath) {
		t.Errorf("the 401's exchange is marked %q", x401.Rewritten)
	}
	if x401.ResponseHeader.Get("WWW-Authenticate") != direct.header.Get("WWW-Authenticate") {
		t.Errorf("the 401's recorded header is %q, want the upstream's %q", x401.ResponseHeader.Get("WWW-Authenticate"), direct.header.Get("WWW-Authenticate"))
	}
	var prm []*capture.Exchange
	for _, x := range r.exchanges(t) {
		if x.URL == prmPath {
			prm = append(prm, x)
		}
		if x.URL == "/.well-known/oauth-authorization-server" && x.Rewritten != "" {
			t.Errorf("an exchange that was not rewritten is marked %q", x.Rewritten)
		}
	}
	if len(prm) != 2 {
		t.Fatalf("%d metadata exchanges recorded, want 2", len(prm))
	}
	for _, x := range prm {
		if !strings.Contains(x.Rewritten, "protected-resource metadata resource "+o.MCPURL()+" → ") {
			t.Errorf("the metadata's exchange is marked %q", x.Rewritten)
		}
		if x.ResponseHeader.Get("Content-Length") != strconv.Itoa(len(directPRM.body)) {
			t.Errorf("recorded Content-Length %q, want the upstream's %d", x.ResponseHeader.Get("Content-Length"), len(directPRM.body))
		}
		fs := r.framesOf(t, x)
		if len(fs) != 1 || fs[0].Direction != protocol.ServerToClient || !bytes.Equal(fs[0].Raw, directPRM.body) {
			t.Errorf("the metadata's recorded body is %d frames %v, want the upstream's bytes", len(fs), fs)
		}
	}
}

// directToken gets an access token from the fixture's authorization
// server directly, with golang.org/x/oauth2.
func directToken(t *testing.T, o *fixtures.OAuth) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Post(o.IssuerURL()+fixtures.PathRegister, "application/json",
		strings.NewReader(`{"redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ID string `json:"client_id"`
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if err := json.Unmarshal(b, &reg); err != nil {
		t.Fatal(err)
	}
	conf := &oauth2.Config{ClientID: reg.ID, RedirectURL: "http://127.0.0.1:9/cb",
		Endpoint: oauth2.Endpoint{AuthURL: o.IssuerURL() + fixtures.PathAuthorize, TokenURL: o.IssuerURL() + fixtures.PathToken, AuthStyle: oauth2.AuthStyleInParams}}
	v := oauth2.GenerateVerifier()
	res, err = hc.Get(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v), oauth2.SetAuthURLParam("resource", o.MCPURL())))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, _ := url.Parse(res.Header.Get("Location"))
	ctx := context.WithValue(t.Context(), oauth2.HTTPClient, hc)
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(v), oauth2.SetAuthURLParam("resource", o.MCPURL()))
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// TestOAuthRewriteEdges: a gzipped metadata document is rewritten and
// recorded decoded; a metadata URL on another origin, which reverse mode
// cannot route, is left alone and the exchange is not marked; a metadata
// URL outside the well-known path is followed.
func TestOAuthRewriteEdges(t *testing.T) {
	var upURL string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/mcp":
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+upURL+`/meta/prm.json", realm="x"`)
			w.WriteHeader(401)
		case "/foreign":
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="https://auth.example.com/.well-known/oauth-protected-resource"`)
			w.WriteHeader(401)
		case "/meta/prm.json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, `{"resource":"`+upURL+`/mcp","authorization_servers":["`+upURL+`"]}`)
			zw.Close()
		case "/.well-known/oauth-protected-resource/other":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"resource":"https://elsewhere.example/mcp"}`)
		}
	})
	r := newRig(t, up, nil)
	upURL = r.up.URL

	res := do(t, "POST", r.px.URL+"/mcp", initReq, nil)
	if want := `Bearer resource_metadata="` + r.px.URL + `/meta/prm.json", realm="x"`; res.header.Get("WWW-Authenticate") != want {
		t.Errorf("WWW-Authenticate %q, want %q", res.header.Get("WWW-Authenticate"), want)
	}
	res = do(t, "GET", r.px.URL+"/meta/prm.json", "", nil) // the client does not decompress: see the bytes
	zr, err := gzip.NewReader(bytes.NewReader(res.body))
	if err != nil {
		t.Fatalf("the rewritten metadata is not gzip any more: %v (%q)", err, res.body)
	}
	doc, _ := io.ReadAll(zr)
	if want := `{"resource":"` + r.px.URL + `/mcp","authorization_servers":["` + upURL + `"]}`; string(doc) != want {
		t.Errorf("metadata %s, want %s", doc, want)
	}
	if res.header.Get("Content-Encoding") != "gzip" || res.header.Get("Content-Length") != "" && res.header.Get("Content-Length") != strconv.Itoa(len(res.body)) {
		t.Errorf("headers %v for %d bytes", res.header, len(res.body))
	}
	foreign := do(t, "POST", r.px.URL+"/foreign", initReq, nil)
	if got := foreign.header.Get("WWW-Authenticate"); !strings.Contains(got, "https://auth.example.com/") {
		t.Errorf("a metadata URL on another origin was changed: %q", got)
	}
	other := do(t, "GET", r.px.URL+"/.well-known/oauth-protected-resource/other", "", nil)
	if string(other.body) != `{"resource":"https://elsewhere.example/mcp"}` {
		t.Errorf("a resource on another origin was changed: %s", other.body)
	}

	r.sync(t)
	if x := r.exchangeAt(t, "POST", "/foreign"); x.Rewritten != "" {
		t.Errorf("the exchange nothing was changed in is marked %q", x.Rewritten)
	}
	x := r.exchangeAt(t, "GET", "/meta/prm.json")
	fs := r.framesOf(t, x)
	if x.Rewritten == "" || len(fs) != 1 || string(fs[0].Raw) != `{"resource":"`+upURL+`/mcp","authorization_servers":["`+upURL+`"]}` {
		t.Errorf("the gzipped metadata is recorded as %v (marked %q), want the upstream's document, decoded", fs, x.Rewritten)
	}
}
