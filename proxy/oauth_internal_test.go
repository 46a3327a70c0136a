package proxy

import (
	"net/url"
	"strings"
	"testing"
)

func testMap(t *testing.T, up, host, prefix string) frontMap {
	t.Helper()
	u, err := url.Parse(up)
	if err != nil {
		t.Fatal(err)
	}
	return frontMap{up: u, scheme: "http", host: host, prefix: prefix}
}

func TestFrontMapURL(t *testing.T) {
	m := testMap(t, "https://MCP.example.com/mcp", "127.0.0.1:7411", "")
	for _, tc := range []struct{ in, want string }{
		{"https://mcp.example.com/mcp", "http://127.0.0.1:7411/mcp"},
		{"https://mcp.example.com:443/.well-known/oauth-protected-resource/mcp?x=1", "http://127.0.0.1:7411/.well-known/oauth-protected-resource/mcp?x=1"},
		{"https://mcp.example.com", "http://127.0.0.1:7411"}, // a pathless resource stays pathless
		{"https://user:pw@mcp.example.com/a%2Fb", "http://127.0.0.1:7411/a%2Fb"},
	} {
		if got, ok := m.mapURL(tc.in); !ok || got != tc.want {
			t.Errorf("mapURL(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	for _, in := range []string{"http://mcp.example.com/mcp", "https://mcp.example.com:8443/mcp", "https://auth.example.com/mcp", "/relative", "not a url\x7f"} {
		if got, ok := m.mapURL(in); ok || got != in {
			t.Errorf("mapURL(%q) = %q, %v; want it unchanged", in, got, ok)
		}
	}
	routed := testMap(t, "http://127.0.0.1:3001/mcp", "localhost:7411", "/github")
	if got, _ := routed.mapURL("http://127.0.0.1:3001/.well-known/oauth-protected-resource/mcp"); got != "http://localhost:7411/github/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("with a route prefix: %q", got)
	}
}

func TestFrontMapUpstreamPath(t *testing.T) {
	single := testMap(t, "http://127.0.0.1:3001/mcp", "127.0.0.1:7411", "")
	if got, ok := single.upstreamPath("/.well-known/oauth-protected-resource/mcp"); !ok || got != "/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("single upstream: %q %v", got, ok)
	}
	m := testMap(t, "http://127.0.0.1:3001/mcp", "127.0.0.1:7411", "/github")
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/github/mcp", "/mcp", true},
		{"/github", "/", true},
		{"/github/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource/mcp", true},
		{"/.well-known/oauth-protected-resource/github/mcp", "/.well-known/oauth-protected-resource/mcp", true},
		{"/.well-known/oauth-protected-resource/github", "/.well-known/oauth-protected-resource", true},
		{"/.well-known/oauth-authorization-server/github", "/.well-known/oauth-authorization-server", true},
		{"/githubx/mcp", "/githubx/mcp", false},
		{"/.well-known/oauth-protected-resource/other/mcp", "/.well-known/oauth-protected-resource/other/mcp", false},
	} {
		if got, ok := m.upstreamPath(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("upstreamPath(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRewriteParam(t *testing.T) {
	m := testMap(t, "http://127.0.0.1:3001/mcp", "127.0.0.1:7411", "")
	edit := func(u string) (string, bool) { return m.mapURL(u) }
	const up, px = "http://127.0.0.1:3001/.well-known/oauth-protected-resource/mcp", "http://127.0.0.1:7411/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct{ name, in, want string }{
		{"quoted", `Bearer resource_metadata="` + up + `", scope="mcp:tools"`, `Bearer resource_metadata="` + px + `", scope="mcp:tools"`},
		{"unquoted", `Bearer resource_metadata=` + up + `, scope=x`, `Bearer resource_metadata=` + px + `, scope=x`},
		{"case and spaces", `bearer error="insufficient_scope",Resource_Metadata = "` + up + `"`, `bearer error="insufficient_scope",Resource_Metadata = "` + px + `"`},
		{"two challenges", `Basic realm="x", Bearer resource_metadata="` + up + `"`, `Basic realm="x", Bearer resource_metadata="` + px + `"`},
		{"inside another quoted value", `Bearer error_description="resource_metadata=` + up + `", scope="a"`, `Bearer error_description="resource_metadata=` + up + `", scope="a"`},
		{"escaped quote before", `Bearer realm="a\"b", resource_metadata="` + up + `"`, `Bearer realm="a\"b", resource_metadata="` + px + `"`},
		{"another origin", `Bearer resource_metadata="https://auth.example.com/prm"`, `Bearer resource_metadata="https://auth.example.com/prm"`},
		{"no parameter", `Bearer realm="mcp"`, `Bearer realm="mcp"`},
		{"name without value", `Bearer resource_metadata`, `Bearer resource_metadata`},
		{"unterminated", `Bearer resource_metadata="` + up, `Bearer resource_metadata="` + px + `"`},
	} {
		if got := rewriteParam(tc.in, "resource_metadata", edit); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestEditResource(t *testing.T) {
	edit := func(u string) (string, bool) {
		return testMap(t, "http://127.0.0.1:3001/", "127.0.0.1:7411", "").mapURL(u)
	}
	doc := "{\n  \"scopes_supported\" : [\"a\"],\n  \"resource\":\t\"http:\\/\\/127.0.0.1:3001\\/mcp\" ,\n" +
		"  \"nested\": {\"resource\": \"http://127.0.0.1:3001/mcp\"},\n  \"x\": \"\\u00e9\"\n}\n"
	got, notes := editResource([]byte(doc), edit)
	want := strings.Replace(doc, `"http:\/\/127.0.0.1:3001\/mcp"`, `"http://127.0.0.1:7411/mcp"`, 1)
	if string(got) != want {
		t.Errorf("edited:\n%s\nwant:\n%s", got, want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "http://127.0.0.1:7411/mcp") {
		t.Errorf("notes %q", notes)
	}
	for _, d := range []string{
		`[{"resource":"http://127.0.0.1:3001/mcp"}]`,   // not an object
		`{"resource":"https://elsewhere.example/mcp"}`, // another origin
		`{"resource":42}`, // not a string
		`{"authorization_servers":["http://127.0.0.1:3001"]}`, // no resource
		`{"resource":"http://127.0.0.1:3001/mcp"`,             // cut short before the end is fine, garbage is not
	} {
		got, notes := editResource([]byte(d), edit)
		if d == `{"resource":"http://127.0.0.1:3001/mcp"` {
			if string(got) != `{"resource":"http://127.0.0.1:7411/mcp"` {
				t.Errorf("cut document: %s", got)
			}
			continue
		}
		if string(got) != d || notes != nil {
			t.Errorf("editResource(%s) = %s, %q; want it unchanged", d, got, notes)
		}
	}
}
