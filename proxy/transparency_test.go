package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// edgeUpstream serves what an MCP server's host serves besides MCP: OAuth
// metadata, a health check, errors with bodies of their own, a refusal of
// an unknown session, and a standalone GET stream that ends by itself.
func edgeUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch {
		case r.URL.Path == "/.well-known/oauth-protected-resource":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=3600")
			fmt.Fprint(w, `{"resource":"http://127.0.0.1/mcp","authorization_servers":["http://127.0.0.1:9/auth"]}`)
		case r.URL.Path == "/healthz":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "ok\n")
		case r.URL.Path == "/boom":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, "<html><body>upstream exploded</body></html>")
		case r.URL.Path == "/mcp" && r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "id: g-0\ndata:\n\n")
			fmt.Fprint(w, ": a comment\n\n")
			fmt.Fprint(w, "event: message\nid: g-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"file:///a\"}}\n\n")
			fmt.Fprint(w, "event: message\nid: g-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"s-1\",\"method\":\"roots/list\"}\n\n")
		case r.URL.Path == "/mcp" && r.Header.Get("Mcp-Session-Id") == "gone":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`)
		case r.URL.Path == "/mcp":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"`)
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_token"}`)
		default:
			http.NotFound(w, r)
		}
	})
}

// sameResponse fails unless via equals direct: status, body byte for byte,
// and every header but Date, with nothing added.
func sameResponse(t *testing.T, direct, via response) {
	t.Helper()
	if direct.err != nil || via.err != nil {
		t.Fatalf("errors: direct %v, via proxy %v", direct.err, via.err)
	}
	if via.status != direct.status || !bytes.Equal(via.body, direct.body) {
		t.Fatalf("via proxy: %d %q\ndirect:    %d %q", via.status, via.body, direct.status, direct.body)
	}
	for k := range direct.header {
		if k == "Date" {
			continue
		}
		if got, want := via.header.Values(k), direct.header.Values(k); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("header %s: via proxy %q, direct %q", k, got, want)
		}
	}
	for k := range via.header {
		if _, ok := direct.header[k]; !ok {
			t.Errorf("the proxy added header %s: %q", k, via.header.Values(k))
		}
	}
}

// TestTransparentEdges: non-MCP paths, 4xx and 5xx with bodies of their
// own, and the standalone GET stream reach the client byte for byte; the
// GET stream's messages are recorded, and the exchanges without MCP traffic
// are kept in an "http" session of their own.
func TestTransparentEdges(t *testing.T) {
	r := newRig(t, edgeUpstream(), nil)
	for _, tc := range []struct {
		name, method, path, body string
		h                        map[string]string
	}{
		{"oauth metadata", "GET", "/.well-known/oauth-protected-resource", "", nil},
		{"health check", "GET", "/healthz", "", nil},
		{"500 with html", "GET", "/boom", "", nil},
		{"404 elsewhere", "GET", "/nothing", "", nil},
		{"401 from the MCP endpoint", "POST", "/mcp", callReq, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer expired"}},
		{"404 for an unknown session", "POST", "/mcp", callReq, map[string]string{"Content-Type": "application/json", "Mcp-Session-Id": "gone"}},
		{"GET stream", "GET", "/mcp", "", map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": "s-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameResponse(t, do(t, tc.method, r.up.URL+tc.path, tc.body, tc.h), do(t, tc.method, r.px.URL+tc.path, tc.body, tc.h))
		})
	}
	r.sync(t)

	byPath := map[string]int{}
	for _, x := range r.exchanges(t) {
		byPath[x.Method+" "+x.URL]++
	}
	for _, want := range []string{"GET /.well-known/oauth-protected-resource", "GET /healthz", "GET /boom", "GET /nothing", "POST /mcp", "GET /mcp"} {
		if byPath[want] == 0 {
			t.Errorf("no exchange recorded for %s; recorded %v", want, byPath)
		}
	}
	var httpSessions, get int
	for _, s := range r.sessions(t) {
		if s.Opening == "http" {
			httpSessions++
			for _, x := range r.exchanges(t) {
				if x.SessionID == s.ID && strings.HasPrefix(x.URL, "/mcp") && x.Method == "POST" {
					t.Errorf("an MCP POST landed in the http session")
				}
			}
		}
		for _, m := range r.messages(t, s.ID) {
			if m.Method == "notifications/resources/updated" || m.Method == "roots/list" {
				get++
			}
		}
	}
	if httpSessions == 0 {
		t.Errorf("the non-MCP exchanges are in no \"http\" session")
	}
	if get != 2 {
		t.Errorf("%d of the GET stream's 2 messages recorded", get)
	}
}

// TestHTTPSUpstreamStream: an SSE answer from an https upstream arrives
// byte for byte, as from a plain one.
func TestHTTPSUpstreamStream(t *testing.T) {
	r := newRig(t, scriptedUpstream(), &rigOptions{tls: true})
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	via := do(t, "POST", r.px.URL+"/mcp", callReq, h)
	if via.err != nil || via.status != 200 || via.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("via proxy: %d %v %v", via.status, via.header, via.err)
	}
	// The scripted stream, as scriptedUpstream writes it.
	want := "id: prime-1\ndata:\n\n: keep-alive\n\n" +
		"event: message\nid: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p-2\",\"progress\":1}}\n\n" +
		"event: message\nid: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[],\"maxTokens\":5}}\n\n" +
		"retry: 1000\nevent: message\nid: e3\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n"
	if string(via.body) != want {
		t.Errorf("the stream through the proxy:\n%q\nwant\n%q", via.body, want)
	}
	r.sync(t)
	if n := len(r.all(t)); n < 4 {
		t.Errorf("%d messages recorded from the https stream, want the request, progress, sampling request and result", n)
	}
}
