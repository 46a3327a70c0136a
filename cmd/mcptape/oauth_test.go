package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
)

// holdsAny returns the secrets of which any 12 bytes (as sent, or
// URL-encoded) appear in a file under dir: Badger's Snappy tables may keep
// a secret only in pieces (see proxy's TestOAuthSecretsFoundUnredacted).
func holdsAny(t *testing.T, dir string, secrets []string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range secrets {
		search:
			for _, form := range []string{s, url.QueryEscape(s)} {
				for i := 0; i+12 <= len(form); i++ {
					if bytes.Contains(b, []byte(form[i:i+12])) {
						found = append(found, s+" in "+filepath.Base(path))
						break search
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestRecordOAuth is the case: the official TypeScript SDK client
// pointed at `mcptape record` in front of an OAuth-protected server
// (RFC 9728 metadata) authenticates — it used to stop at "Protected
// resource … does not match expected …" — and calls a tool; the recording
// shows the rewritten metadata and challenge, and holds no token.
func TestRecordOAuth(t *testing.T) {
	needPeers(t)
	o, err := fixtures.StartOAuth(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", o.MCPURL(), "--listen", "127.0.0.1:0", "--data", data, "--dashboard", "off")
	proxyURL := r.wait(t, "point your MCP client at ")
	// The client asks for a token for the URL it connects to: the
	// authorization server must know it, as a real one would need mcptape's
	// URL registered (see docs/recording.md).
	o.AcceptResource(proxyURL)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	rep, err := interop.RunClient(ctx, proxyURL, &interop.ClientOptions{OAuth: true, Steps: interop.StepsFixture})
	if err != nil {
		t.Fatalf("the TypeScript client through mcptape record: %v", err)
	}
	if rep.OAuth == nil || rep.OAuth.Tokens != 2 {
		t.Errorf("client's OAuth report %+v", rep.OAuth)
	}

	tape := filepath.Join(t.TempDir(), "oauth.tape")
	if code, _, e := mcptape(t, "export", "--data", data, "-q", "-o", tape); code != 0 {
		t.Fatalf("export while recording: %d %s", code, e)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	b, err := os.ReadFile(tape)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sessions []struct {
			Exchanges []struct {
				Method, URL, Rewritten string
				Status                 int
			} `json:"exchanges"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var rewritten []string
	for _, s := range doc.Sessions {
		for _, x := range s.Exchanges {
			if x.Rewritten != "" {
				rewritten = append(rewritten, x.Method+" "+x.URL+": "+x.Rewritten)
			}
		}
	}
	joined := strings.Join(rewritten, "\n")
	for _, want := range []string{
		"GET /.well-known/oauth-protected-resource/mcp: protected-resource metadata resource " + o.MCPURL() + " → " + proxyURL,
		"POST /mcp: WWW-Authenticate resource_metadata " + o.MetadataURL(fixtures.PathStateful) + " → ",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the tape's rewritten exchanges lack %q:\n%s", want, joined)
		}
	}
	if found := holdsAny(t, data, o.Secrets()); len(found) > 0 {
		t.Errorf("the store's files hold secrets: %q", found)
	}
	if found := holdsAny(t, filepath.Dir(tape), o.Secrets()); len(found) > 0 {
		t.Errorf("the exported tape holds secrets: %q", found)
	}
}

// TestFixtureOAuthCommand: `mcptape fixture oauth` serves the protected
// server and the authorization server, and says how to record through
// mcptape.
func TestFixtureOAuthCommand(t *testing.T) {
	r := startRun(t, "fixture", "oauth", "--listen", "127.0.0.1:0", "--auth-listen", "127.0.0.1:0", "--admin-tool", "add")
	mcpURL := r.wait(t, "MCP server (bearer tokens) at ")
	asURL, _, _ := strings.Cut(r.wait(t, "authorization server at "), " ")
	res, err := http.Post(mcpURL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || !strings.Contains(res.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Errorf("the MCP server without a token: %d %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
	res, err = http.Get(asURL + fixtures.WellKnownAuthorizationServer)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(b), `"registration_endpoint":"`+asURL+`/register"`) {
		t.Errorf("authorization server metadata: %d %s", res.StatusCode, b)
	}
	// The hint is printed after the authorization server's line: wait for it.
	if hint := r.wait(t, "to record through mcptape, "); !strings.Contains(hint, "--accept-resource") {
		t.Errorf("the command does not say how to record through mcptape:\n%s", r.out.String())
	}
	if code := r.stop(t); code != 0 {
		t.Errorf("exit %d: %s", code, r.errOut.String())
	}
}
