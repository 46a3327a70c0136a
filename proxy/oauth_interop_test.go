package proxy_test

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

// lateHandler is a listener's handler set once the listener's address is
// known to what the handler needs.
type lateHandler struct{ h atomic.Pointer[http.Handler] }

func (l *lateHandler) set(h http.Handler) { l.h.Store(&h) }
func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.Error(w, "not ready", http.StatusServiceUnavailable)
}

// oauthRecording is the OAuth fixture behind two reverse proxies that
// record into one Badger store on disk: one for the MCP server, one for
// the authorization server, whose public URL is its proxy's (as a
// recorder with a route for each would be set up). The client's whole
// flow then passes through mcptape.
type oauthRecording struct {
	o        *fixtures.OAuth
	dir      string
	store    *badgerstore.Store
	rec      *capture.Recorder
	mcp, as  *proxy.Server
	resource string // the resource a client names: the MCP proxy's URL
}

func startOAuthRecording(t *testing.T, opts fixtures.OAuthOptions, redact capture.RedactOptions) *oauthRecording {
	t.Helper()
	r := &oauthRecording{dir: t.TempDir()}
	mcpH, asH := &lateHandler{}, &lateHandler{}
	var err error
	if r.mcp, err = proxy.Listen("127.0.0.1:0", mcpH, nil); err != nil {
		t.Fatal(err)
	}
	if r.as, err = proxy.Listen("127.0.0.1:0", asH, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*proxy.Server{r.mcp, r.as} {
		go s.Serve()
		t.Cleanup(func() { s.Close() })
	}
	r.resource = r.mcp.URL() + fixtures.PathStateful
	if opts.MetadataAtRoot {
		r.resource = r.mcp.URL()
	}
	opts.IssuerURL = r.as.URL()
	opts.Resources = []string{r.resource}
	r.o = startOAuthFixture(t, &opts)
	if r.store, err = badgerstore.Open(r.dir, nil); err != nil {
		t.Fatal(err)
	}
	if r.rec, err = capture.NewRecorder(context.Background(), r.store, &capture.RecorderOptions{Redact: redact}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.close(t) })
	for _, p := range []struct {
		h  *lateHandler
		up string
	}{{mcpH, r.o.ResourceOrigin()}, {asH, r.o.AuthServerURL()}} {
		u, _ := url.Parse(p.up)
		px, err := proxy.New(&proxy.Options{Upstream: u, Recorder: r.rec})
		if err != nil {
			t.Fatal(err)
		}
		p.h.set(px)
	}
	return r
}

// close stops the recorder and closes the store, so that everything is on
// disk; it may be called more than once.
func (r *oauthRecording) close(t *testing.T) {
	if r.rec != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.rec.Close(ctx); err != nil {
			t.Error(err)
		}
		r.rec = nil
	}
	if r.store != nil {
		if err := r.store.Close(); err != nil {
			t.Error(err)
		}
		r.store = nil
	}
}

// grep returns the secrets found in the files under dir. Badger compresses
// its tables with Snappy, which stores a repeated run of 4 bytes or more
// (a token's "fxat_" prefix, say) as a reference to the earlier one: a
// stored secret may not appear whole. So a secret counts as found when any
// 12 bytes of it do (as sent, or URL-encoded as a form sends it); a run of
// 12 random characters does not appear by chance. The control test,
// TestOAuthSecretsFoundUnredacted, shows that this finds every secret that
// is there.
func grep(t *testing.T, dir string, secrets []string) []string {
	t.Helper()
	const window = 12
	var files [][]byte
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files, names = append(files, b), append(names, filepath.Base(path))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, s := range secrets {
	search:
		for _, form := range []string{s, url.QueryEscape(s)} {
			for i := 0; i+window <= len(form); i++ {
				for f, b := range files {
					if bytes.Contains(b, []byte(form[i:i+window])) {
						found = append(found, s+" (in "+names[f]+")")
						break search
					}
				}
			}
		}
	}
	return found
}

// TestOAuthTypeScriptThroughProxy is the acceptance of OAuth through the
// recorder: the official TypeScript SDK client, pointed at mcptape,
// completes the OAuth flow against the fixture (registration, PKCE, code,
// token, refresh), calls a tool, and the store holds the whole flow with
// every secret redacted: the store's files on disk and an exported tape
// hold none of the codes, verifiers, tokens or client secrets. Both the
// 2025-11-25 discovery (resource_metadata in the 401) and a server whose
// metadata is at the root, found by the client's own probing.
func TestOAuthTypeScriptThroughProxy(t *testing.T) {
	needPeers(t)
	for _, tc := range []struct {
		name string
		opts fixtures.OAuthOptions
	}{
		{"2025-11-25, resource_metadata", fixtures.OAuthOptions{}},
		{"metadata at the root", fixtures.OAuthOptions{MetadataAtRoot: true, NoResourceMetadata: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startOAuthRecording(t, tc.opts, capture.RedactOptions{})
			ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
			defer cancel()
			rep, err := interop.RunClient(ctx, r.mcp.URL()+fixtures.PathStateful, &interop.ClientOptions{OAuth: true, Steps: interop.StepsFixture})
			if err != nil {
				t.Fatalf("the TypeScript client through mcptape: %v", err)
			}
			if rep.OAuth == nil || rep.OAuth.Registrations != 1 || rep.OAuth.Tokens != 2 {
				t.Errorf("client's OAuth report %+v", rep.OAuth)
			}
			st := r.o.Stats()
			if st.Registrations != 1 || st.CodeGrants != 1 || st.RefreshGrants != 1 || st.Refusals != 0 {
				t.Errorf("fixture stats %+v: want one registration, one code grant, one refresh, no refusal", st)
			}
			if err := r.rec.Sync(ctx); err != nil {
				t.Fatal(err)
			}

			// The flow is in the store.
			var flow []string
			var rewritten []string
			var echoed bool
			for s, err := range r.store.Sessions(ctx, capture.SessionQuery{}) {
				if err != nil {
					t.Fatal(err)
				}
				for x, err := range r.store.Exchanges(ctx, s.ID) {
					if err != nil {
						t.Fatal(err)
					}
					path, _, _ := strings.Cut(x.URL, "?")
					flow = append(flow, x.Method+" "+path+" "+http.StatusText(x.Status))
					if x.Rewritten != "" {
						rewritten = append(rewritten, x.Method+" "+path+" "+http.StatusText(x.Status))
					}
				}
				for m, err := range r.store.Messages(ctx, s.ID, capture.MessageQuery{}) {
					if err != nil {
						t.Fatal(err)
					}
					if m.Kind == protocol.KindResult && bytes.Contains(m.Raw, []byte(`"after-refresh"`)) {
						echoed = true
					}
				}
			}
			joined := strings.Join(flow, "\n")
			prm := "GET /.well-known/oauth-protected-resource/mcp OK"
			if tc.opts.MetadataAtRoot {
				prm = "GET /.well-known/oauth-protected-resource OK"
			}
			for _, want := range []string{prm, "GET /.well-known/oauth-authorization-server OK", "POST /register Created",
				"GET /authorize Found", "POST /token OK", "POST /mcp Unauthorized", "POST /mcp OK"} {
				if !strings.Contains(joined, want) {
					t.Errorf("the store lacks %q; it holds:\n%s", want, joined)
				}
			}
			if strings.Count(joined, "POST /token OK") != 2 {
				t.Errorf("want two token requests (the code, the refresh):\n%s", joined)
			}
			wantRewritten := []string{prm}
			if !tc.opts.NoResourceMetadata {
				wantRewritten = []string{"POST /mcp Unauthorized", prm}
			}
			for _, w := range wantRewritten {
				if !strings.Contains(strings.Join(rewritten, "\n"), w) {
					t.Errorf("%q is not marked rewritten; the rewritten exchanges: %q", w, rewritten)
				}
			}
			if !echoed {
				t.Error("the echo call after the refresh is not recorded")
			}

			// No secret on disk, nor in an exported tape.
			var tape bytes.Buffer
			if err := replay.Export(ctx, r.store, nil, &tape, "test"); err != nil {
				t.Fatal(err)
			}
			tapeFile := filepath.Join(t.TempDir(), "flow.json")
			if err := os.WriteFile(tapeFile, tape.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			r.close(t)
			secrets := r.o.Secrets()
			if len(secrets) < 6 { // client secret, code, verifier, two access and two refresh tokens
				t.Fatalf("the fixture saw only %d secrets: %q", len(secrets), secrets)
			}
			if found := grep(t, r.dir, secrets); len(found) > 0 {
				t.Errorf("the store's files hold secrets: %q", found)
			}
			if found := grep(t, filepath.Dir(tapeFile), secrets); len(found) > 0 {
				t.Errorf("the exported tape holds secrets: %q", found)
			}
			if !strings.Contains(tape.String(), `client_secret`) || !strings.Contains(tape.String(), `[redacted]`) {
				t.Error("the tape does not show the redacted flow")
			}
		})
	}
}

// TestOAuthSecretsFoundUnredacted is the control of the grep above: the same
// flow recorded with redaction off leaves the secrets in the store's files,
// so the grep does find them when they are there.
func TestOAuthSecretsFoundUnredacted(t *testing.T) {
	needPeers(t)
	r := startOAuthRecording(t, fixtures.OAuthOptions{}, capture.RedactOptions{Disabled: true})
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	if _, err := interop.RunClient(ctx, r.mcp.URL()+fixtures.PathStateful, &interop.ClientOptions{OAuth: true, Steps: interop.StepsFixture}); err != nil {
		t.Fatal(err)
	}
	r.close(t)
	secrets := r.o.Secrets()
	found := grep(t, r.dir, secrets)
	if len(found) != len(secrets) {
		t.Errorf("unredacted, the store's files hold %d of the %d secrets (%q of %q): the grep misses secrets that are there", len(found), len(secrets), found, secrets)
	}
}
