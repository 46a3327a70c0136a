package proxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcptape/mcptape/protocol"
)

// OAuth through a reverse proxy.
//
// A client that connects to mcptape's address checks the OAuth metadata it
// is given against that address: the resource of the protected-resource
// metadata (RFC 9728) must name the URL the client connects to, and it
// fetches that metadata from the resource_metadata URL of the server's
// WWW-Authenticate challenge. An upstream names itself in both, so reverse
// mode rewrites exactly those two to the proxy's own URL as the client
// addressed it, the path kept; nothing else changes (the authorization
// servers, the tokens, the rest of the metadata's bytes). The exchange is
// recorded as the upstream sent it and marked Rewritten.
//
// A URL on another origin than the upstream's is left alone: the client
// fetches it directly, which the proxy cannot change in reverse mode.

// wellKnownPRM is RFC 9728's well-known path prefix.
const wellKnownPRM = "/.well-known/oauth-protected-resource"

// maxMetadataBody bounds a protected-resource metadata document the proxy
// reads to rewrite, as it arrives; maxMetadataDoc bounds it decoded (a
// gzipped one). A larger one passes whole and unchanged.
const (
	maxMetadataBody = 64 << 10
	maxMetadataDoc  = 4 * maxMetadataBody
)

// frontMap maps URLs on a route's upstream origin onto the proxy as a client
// addressed it: a function of the route's upstream and the proxy's URL, so
// that each route of a recorder (and each Host a client uses) maps its own.
type frontMap struct {
	up     *url.URL // the route's upstream; only its origin matters
	scheme string   // the proxy's, as the client addressed it
	host   string
	prefix string // the route's path prefix on the proxy, "" for a single upstream
}

// frontOf is the proxy's origin as the client of r addressed it: the
// scheme of the connection and the Host the client sent (the listener's
// address when it sent none).
func frontOf(r *http.Request) (scheme, host string) {
	scheme = "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host = r.Host
	if host == "" {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			host = la.String()
		}
	}
	return scheme, host
}

// mapURL is s on the proxy: the upstream's origin replaced by the proxy's,
// the route's prefix put before the path, path and query kept. ok is false
// when s is not an absolute URL on the upstream's origin, or when its path
// climbs above the root with dot segments: a client resolves those, and
// under a route's prefix "/../" would lead into another route. A path with
// dot segments that stays within the root is mapped resolved.
func (m frontMap) mapURL(s string) (_ string, ok bool) {
	return protocol.MapOrigin(s, m.up, m.scheme, m.host, m.prefix)
}

// removeDotSegments resolves the "." and ".." segments of an absolute
// path (see protocol.RemoveDotSegments).
func removeDotSegments(p string) (_ string, escapes bool) { return protocol.RemoveDotSegments(p) }

// upstreamPath is the upstream's path for a path a client asked the proxy
// for under a route's prefix: the prefix comes off, also from inside a
// well-known path, where a client discovering metadata for
// http://proxy/PREFIX/mcp puts it (/.well-known/oauth-protected-resource/PREFIX/mcp
// is /.well-known/oauth-protected-resource/mcp upstream). ok is false for
// a path outside the route.
func (m frontMap) upstreamPath(p string) (_ string, ok bool) {
	if m.prefix == "" {
		return p, true
	}
	if rest, found := strings.CutPrefix(p, m.prefix); found && (rest == "" || rest[0] == '/') {
		return cmpOr(rest, "/"), true
	}
	if rest, found := strings.CutPrefix(p, "/.well-known/"); found {
		name, tail, _ := strings.Cut(rest, "/")
		tail = "/" + tail
		if in, found := strings.CutPrefix(tail, m.prefix); found && (in == "" || in[0] == '/') {
			return "/.well-known/" + name + in, true
		}
	}
	return p, false
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// original is what the recorder is told of a rewritten response: the
// upstream's header values that changed and its body, and what changed.
type original struct {
	header http.Header // the changed headers' original values
	body   []byte      // the original body when it changed, else nil
	note   []string
}

// recorded is the header as the upstream sent it: h, as the client gets
// it, with the changed values put back.
func (o *original) recorded(h http.Header) http.Header {
	r := h.Clone()
	for k, vs := range o.header {
		r[k] = vs
	}
	return r
}

// oauthRewrites is the proxy's memory of metadata URLs outside the
// well-known path (a resource_metadata the upstream named elsewhere), so
// that the client's fetch of one is rewritten too; and of the foreign
// origins it has warned about.
type oauthRewrites struct {
	some   atomic.Int32 // len(paths)
	mu     sync.Mutex
	paths  map[string]bool // upstream paths of protected-resource metadata
	warned map[string]bool
}

// maxRemembered bounds each of oauthRewrites' sets.
const maxRemembered = 64

func (o *oauthRewrites) remember(set *map[string]bool, v string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if *set == nil {
		*set = map[string]bool{}
	}
	if (*set)[v] || len(*set) >= maxRemembered {
		return false
	}
	(*set)[v] = true
	o.some.Store(int32(len(o.paths)))
	return true
}

func (o *oauthRewrites) isMetadataPath(p string) bool {
	if strings.HasPrefix(p, wellKnownPRM) && (len(p) == len(wellKnownPRM) || p[len(wellKnownPRM)] == '/') {
		return true
	}
	if o.some.Load() == 0 {
		return false // no other path remembered: no lock for an MCP stream's GET
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.paths[p]
}

// rewriteOAuth rewrites what a client needs to authenticate through the
// proxy, and keeps the original for the record (x.orig).
func (p *Proxy) rewriteOAuth(res *http.Response, x *exchange) error {
	if x == nil || x.front.up == nil {
		return nil
	}
	// The common case, every MCP response, costs these two tests.
	challenge := (res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden) && len(res.Header["Www-Authenticate"]) > 0
	ra := x.rt.oauth
	metadata := res.StatusCode == http.StatusOK && res.Request.Method == http.MethodGet && ra.isMetadataPath(res.Request.URL.Path)
	if !challenge && !metadata {
		return nil
	}
	o := &original{header: http.Header{}}
	if challenge {
		p.rewriteChallenges(res, x.rt, x.front, o)
	}
	if metadata {
		if err := p.rewriteMetadata(res, x.rt, x.front, o); err != nil {
			return err
		}
	}
	if len(o.note) > 0 {
		x.orig = o
	}
	return nil
}

// rewriteChallenges maps the resource_metadata URLs of WWW-Authenticate.
func (p *Proxy) rewriteChallenges(res *http.Response, rt *route, m frontMap, o *original) {
	vs := res.Header.Values("Www-Authenticate")
	if len(vs) == 0 {
		return
	}
	out := make([]string, len(vs))
	changed := false
	for i, v := range vs {
		out[i] = rewriteParam(v, "resource_metadata", func(u string) (string, bool) {
			to, ok := m.mapURL(u)
			if !ok {
				p.warnForeign(rt, "resource_metadata", u)
				return u, false
			}
			if to == u {
				return u, false
			}
			if pu, err := url.Parse(u); err == nil && !rt.oauth.isMetadataPath(pu.Path) {
				rt.oauth.remember(&rt.oauth.paths, pu.Path)
			}
			o.note = append(o.note, fmt.Sprintf("WWW-Authenticate resource_metadata %s → %s", u, to))
			return to, true
		})
		changed = changed || out[i] != v
	}
	if changed {
		o.header["Www-Authenticate"] = vs
		res.Header["Www-Authenticate"] = out
	}
}

// warnForeign logs, once per URL, a metadata URL the proxy cannot route.
func (p *Proxy) warnForeign(rt *route, what, u string) {
	if pu, err := url.Parse(u); err == nil && pu.IsAbs() {
		if _, escapes := removeDotSegments(pu.Path); escapes {
			if rt.oauth.remember(&rt.oauth.warned, what+" "+u) {
				p.log.Warn("OAuth metadata names a URL whose path climbs above its root with /../; the proxy leaves it as the upstream sent it rather than map it onto another route",
					"what", what, "url", u, "upstream", rt.base, "route", rt.name)
			}
			return
		}
	}
	if rt.oauth.remember(&rt.oauth.warned, what+" "+u) {
		p.log.Warn("OAuth metadata names another origin than the upstream's, which reverse mode cannot route; a client that checks it against mcptape's address may refuse it, and must then reach the server by its own URL (through a forward proxy that records it)",
			"what", what, "url", u, "upstream", rt.base, "route", rt.name)
	}
}

// rewriteParam edits the values of the auth-param name in a
// WWW-Authenticate value (see protocol.EditAuthParam).
func rewriteParam(v, name string, edit func(string) (string, bool)) string {
	return protocol.EditAuthParam(v, name, edit)
}

// rewriteMetadata maps the resource of a protected-resource metadata
// document, editing only that member's value in the body's bytes.
func (p *Proxy) rewriteMetadata(res *http.Response, rt *route, m frontMap, o *original) error {
	if mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type")); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil
	}
	enc := strings.ToLower(res.Header.Get("Content-Encoding"))
	if enc != "" && enc != "identity" && enc != "gzip" {
		p.log.Warn("protected-resource metadata in a Content-Encoding the proxy does not rewrite; a client checking its resource against mcptape's address may refuse it",
			"encoding", enc, "path", res.Request.URL.Path)
		return nil
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxMetadataBody+1))
	if err != nil {
		return fmt.Errorf("reading the protected-resource metadata to rewrite it: %w", err)
	}
	keep := func() { res.Body = &joinedBody{Reader: io.MultiReader(bytes.NewReader(raw), res.Body), c: res.Body} }
	if len(raw) > maxMetadataBody {
		keep()
		p.log.Warn("protected-resource metadata larger than the proxy rewrites; passed unchanged", "limit", maxMetadataBody, "path", res.Request.URL.Path)
		return nil
	}
	res.Body.Close()
	doc := raw
	if enc == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err == nil {
			doc, err = io.ReadAll(io.LimitReader(zr, maxMetadataDoc+1))
		}
		if err != nil || len(doc) > maxMetadataDoc {
			// Never a cut document: the upstream's bytes, whole.
			res.Body = io.NopCloser(bytes.NewReader(raw))
			if err == nil {
				p.log.Warn("protected-resource metadata larger than the proxy rewrites once unzipped; passed unchanged", "limit", maxMetadataDoc, "path", res.Request.URL.Path)
			}
			return nil
		}
	}
	edited, notes := editResource(doc, func(u string) (string, bool) {
		to, ok := m.mapURL(u)
		if !ok {
			p.warnForeign(rt, "resource", u)
		}
		return to, ok
	})
	if notes == nil {
		res.Body = io.NopCloser(bytes.NewReader(raw))
		return nil
	}
	if enc == "gzip" {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		_, _ = zw.Write(edited)
		_ = zw.Close()
		edited = zb.Bytes()
	}
	res.Body = io.NopCloser(bytes.NewReader(edited))
	if res.ContentLength >= 0 || res.Header.Get("Content-Length") != "" {
		res.ContentLength = int64(len(edited))
		res.Header.Set("Content-Length", strconv.Itoa(len(edited)))
	}
	o.body = raw
	o.note = append(o.note, notes...)
	return nil
}

// joinedBody reads the bytes already taken, then the rest of a body.
type joinedBody struct {
	io.Reader
	c io.Closer
}

func (j *joinedBody) Close() error { return j.c.Close() }

// editResource replaces the value of each top-level "resource" member of a
// JSON object whose edit says so, leaving every other byte of doc as it
// was. notes says what changed; nil when nothing did.
func editResource(doc []byte, edit func(string) (string, bool)) ([]byte, []string) {
	out, changed := protocol.EditStringMember(doc, "resource", edit)
	var notes []string
	for _, c := range changed {
		notes = append(notes, fmt.Sprintf("protected-resource metadata resource %s → %s", c[0], c[1]))
	}
	return out, notes
}
