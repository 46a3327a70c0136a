package replay_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/replay"
)

// OAuth replays: a recording of the TypeScript client authenticating to
// the OAuth fixture (RFC 9728 metadata, a 401 challenge, an authorization
// server of its own origin) replays with the fixture's MCP server out of
// the loop. A client without a token gets the recorded 401, its challenge
// naming the replay's metadata, and that metadata naming the replay as
// the resource: it starts its flow with the authorization server and
// passes. A client that holds a token is answered at once, whatever the
// token: its first run passes.
func TestOAuthReplayed(t *testing.T) {
	needPeers(t)
	o, err := fixtures.StartOAuth(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	up, _ := url.Parse(o.MCPURL())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tsClient := func(u string) *interop.ClientReport {
		// The client asks for a token for the URL it connects to: the
		// authorization server must know it, as a real one would need
		// the address registered.
		o.AcceptResource(u)
		rep, err := interop.RunClient(ctx, u, &interop.ClientOptions{OAuth: true, Steps: interop.StepsFixture})
		if err != nil {
			t.Fatalf("the TypeScript client with OAuth at %s: %v", u, err)
		}
		return rep
	}
	tape := recordTape(t, o.ResourceOrigin(), func(px string) {
		if rep := tsClient(px + up.Path); rep.OAuth == nil || rep.OAuth.Authorizations != 1 {
			t.Fatalf("recording: the client's OAuth report %+v", rep.OAuth)
		}
	})
	served := o.Stats().Authorized + o.Stats().Unauthorized
	// Each case has a replay server of its own: the first client of each.
	t.Run("with a token", func(t *testing.T) {
		s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
		h := map[string]string{"Authorization": "Bearer a-token-the-recording-never-saw"}
		g, sid := send(t, ctx, "POST", hs.URL+up.Path, rpc(1, "initialize", legacyInit), h)
		if g.Status != http.StatusOK || sid == "" {
			t.Fatalf("initialize with a token: %d %s", g.Status, g.Body)
		}
		h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = sid, "2025-11-25"
		send(t, ctx, "POST", hs.URL+up.Path, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
		g, _ = send(t, ctx, "POST", hs.URL+up.Path, rpc(2, "tools/call", `{"name":"echo","arguments":{"text":"interop-hello"}}`), h)
		if g.Status != http.StatusOK || !strings.Contains(g.Body, "interop-hello") {
			t.Errorf("a call with a token on the first run: %d %s", g.Status, g.Body)
		}
		if r := s.Report(); len(r.Misses) != 0 {
			t.Errorf("misses: %v", r.Misses)
		}
	})
	t.Run("without a token", func(t *testing.T) {
		s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
		g, _ := send(t, ctx, "POST", hs.URL+up.Path, rpc(1, "initialize", legacyInit), nil)
		challenge := g.Header["Www-Authenticate"]
		if g.Status != http.StatusUnauthorized || !strings.Contains(challenge, `resource_metadata="`+hs.URL+"/.well-known/oauth-protected-resource") {
			t.Fatalf("initialize without a token: %d, WWW-Authenticate %q; want 401 naming the replay's metadata", g.Status, challenge)
		}
		g, _ = send(t, ctx, "GET", hs.URL+"/.well-known/oauth-protected-resource"+up.Path, "", nil)
		var prm struct{ Resource string }
		if err := json.Unmarshal([]byte(g.Body), &prm); err != nil || g.Status != http.StatusOK || prm.Resource != hs.URL+up.Path {
			t.Fatalf("the protected-resource metadata: %d %s; want the replay's endpoint as the resource", g.Status, g.Body)
		}
		rep := tsClient(hs.URL + up.Path)
		if rep.OAuth == nil || rep.OAuth.Authorizations != 1 {
			t.Errorf("against the replay the client's OAuth report %+v; want it to go through the flow once", rep.OAuth)
		}
		if r := s.Report(); len(r.Misses) != 0 {
			t.Errorf("misses: %v", r.Misses)
		}
	})
	if n := o.Stats().Authorized + o.Stats().Unauthorized; n != served {
		t.Errorf("the fixture's MCP server got %d requests while the replay stood in for it", n-served)
	}
}
