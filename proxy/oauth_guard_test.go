package proxy_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/proxy"
)

// Gzipped protected-resource metadata that unzips past what the proxy
// rewrites (256 KiB) reaches the client whole: before, it was unzipped
// only up to 256 KiB, edited and zipped again, so the client got a
// document cut at 256 KiB. Under the bound it is still rewritten, whole.
func TestOAuthGzippedMetadataNeverCut(t *testing.T) {
	var upURL string
	docs := map[string][]byte{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write(doc)
		zw.Close()
	}))
	defer up.Close()
	upURL = up.URL
	// Padded with whitespace, as a pretty-printer does: 300 KiB unzipped
	// is a few KiB zipped. Cut anywhere in the padding, the resource still
	// parses, and a rewrite would send the cut document on.
	doc := func(pad int) []byte {
		return []byte(`{"resource":"` + upURL + `/mcp",` + "\n  " + `"authorization_servers":["` + upURL + `"]` + strings.Repeat(" ", pad) + "}\n")
	}
	docs["/.well-known/oauth-protected-resource/big"] = doc(300 << 10)
	docs["/.well-known/oauth-protected-resource/small"] = doc(100 << 10) // under the bound
	docs["/.well-known/oauth-protected-resource/trailing"] = append(doc(0), bytes.Repeat([]byte("\n"), 300<<10)...)
	r := newRig(t, http.NotFoundHandler(), &rigOptions{upstream: upURL})

	for _, name := range []string{"big", "small", "trailing"} {
		want := docs["/.well-known/oauth-protected-resource/"+name]
		res := do(t, "GET", r.px.URL+"/.well-known/oauth-protected-resource/"+name, "", nil)
		if res.err != nil || res.status != http.StatusOK {
			t.Fatalf("%s: %v %d", name, res.err, res.status)
		}
		zr, err := gzip.NewReader(bytes.NewReader(res.body))
		if err != nil {
			t.Fatalf("%s: the metadata is not gzip: %v", name, err)
		}
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: the gzip stream is cut: %v", name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil {
			t.Errorf("%s: the client got %d bytes of the %d-byte document, not JSON: %v", name, len(got), len(want), err)
			continue
		}
		switch name {
		case "big", "trailing": // too large to rewrite: the upstream's, whole
			if !bytes.Equal(got, want) {
				t.Errorf("big: the client got %d bytes, want the upstream's %d unchanged", len(got), len(want))
			}
		case "small": // rewritten, whole
			if m["resource"] != r.px.URL+"/mcp" || len(got) != len(want)-len(upURL)+len(r.px.URL) {
				t.Errorf("small: resource %v, %d bytes; want it rewritten to %s/mcp, the rest whole", m["resource"], len(got), r.px.URL)
			}
		}
	}
}

// A resource_metadata URL (or a resource) whose path climbs out of the
// root with "/../" is left as the upstream sent it: mapped under a route's
// prefix, a client would resolve it into another route's URL (before,
// /a/../b/… reached route b). Dot segments that stay within the path are
// resolved, then mapped.
func TestOAuthMetadataURLDotSegments(t *testing.T) {
	var upURL string
	var challenge string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/mcp":
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+upURL+challenge+`"`)
			w.WriteHeader(http.StatusUnauthorized)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"resource":"%s/../b/mcp"}`, upURL)
		}
	}))
	defer up.Close()
	upURL = up.URL
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	ua, _ := url.Parse(up.URL)
	ub, _ := url.Parse(other.URL)
	p, err := proxy.New(&proxy.Options{Routes: []proxy.Route{{Name: "a", Upstream: ua}, {Name: "b", Upstream: ub}}})
	if err != nil {
		t.Fatal(err)
	}
	px := serveProxy(t, p)
	defer px.Close()
	for _, tc := range []struct{ path, want string }{
		{"/../b/.well-known/oauth-protected-resource/mcp", upURL + "/../b/.well-known/oauth-protected-resource/mcp"},
		{"/%2e%2e/b/.well-known/oauth-protected-resource/mcp", upURL + "/%2e%2e/b/.well-known/oauth-protected-resource/mcp"},
		{"/x/../../b/.well-known/oauth-protected-resource", upURL + "/x/../../b/.well-known/oauth-protected-resource"},
		{"/x/../.well-known/oauth-protected-resource/mcp", px.URL + "/a/.well-known/oauth-protected-resource/mcp"},
	} {
		challenge = tc.path
		res := do(t, "POST", px.URL+"/a/mcp", initReq, nil)
		got := res.header.Get("WWW-Authenticate")
		if want := `Bearer resource_metadata="` + tc.want + `"`; got != want {
			t.Errorf("resource_metadata %s: the client got %s, want %s", tc.path, got, want)
		}
		// Whatever the client got, resolved, stays within route a (or is the upstream's own).
		if u, err := url.Parse(strings.TrimSuffix(strings.TrimPrefix(got, `Bearer resource_metadata="`), `"`)); err == nil {
			if res := u.ResolveReference(&url.URL{}); strings.HasPrefix(res.String(), px.URL+"/b/") {
				t.Errorf("resource_metadata %s leads the client into route b: %s", tc.path, res)
			}
		}
	}
	res := do(t, "GET", px.URL+"/a/.well-known/oauth-protected-resource/mcp", "", nil)
	if want := `{"resource":"` + upURL + `/../b/mcp"}`; string(res.body) != want {
		t.Errorf("a resource climbing out of the root: the client got %s, want %s", res.body, want)
	}
}
