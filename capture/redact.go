package capture

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Redacted replaces a secret value in stored headers, URLs and bodies.
const Redacted = "[redacted]"

// RedactOptions configures redaction at write time. The zero value redacts
// the default set.
type RedactOptions struct {
	// Disabled turns redaction off entirely (local debugging only; the
	// CLI warns). Session ids are then stored as they are.
	Disabled bool
	// Headers adds header names to redact (case-insensitive), beyond
	// the defaults: Authorization, Proxy-Authorization, Cookie,
	// Set-Cookie, and every header whose name contains "api-key",
	// "apikey", "api_key", "token", "secret" or "password".
	Headers []string
	// Args adds patterns for secrets in a stdio server's arguments (wrap
	// --redact-arg), beyond the default rules (see RedactArgs): the part
	// of an argument a pattern matches, or its first group when it has
	// one, is redacted, and scrubbed from messages too.
	Args []*regexp.Regexp
	// Env adds names of environment variables whose values are secrets
	// (wrap --redact-env), beyond the default rules (see RedactEnvValue):
	// shell patterns (path.Match: DB_*), matched without regard to case.
	Env []string
	// PseudonymKey keys the HMAC that turns an Mcp-Session-Id into its
	// stored pseudonym; keep it per store so pseudonyms are stable across
	// restarts. Nil means a fixed, public key (pseudonyms are then stable
	// but guessable for short ids).
	PseudonymKey []byte
}

// redactor applies RedactOptions. It also learns the secret values it
// removed from headers and scrubs them wherever they reappear in bodies
// (a bearer token echoed by a server, say). Owned by the pipeline goroutine.
type redactor struct {
	opts    RedactOptions
	extra   map[string]bool
	learned [][]byte
	// seen remembers sensitive's answer by header name (at most
	// seenNames): the same few names come with every exchange.
	seen map[string]bool
	// pseudonyms remembers pseudonym's answers (at most seenNames): a
	// session's id comes with each of its requests, and an HMAC per
	// request cost more than the rest of its header's redaction.
	pseudonyms map[string]string
	// headers are the last headers header redacted, and what it made of
	// them: a client sends the same headers with every request of a
	// session (see headerCached).
	headers [4]redactedHeader
	next    int
}

// redactedHeader is a header and its redaction.
type redactedHeader struct{ in, out http.Header }

// seenNames bounds redactor.seen; it is cleared when full.
const seenNames = 256

func newRedactor(opts RedactOptions) *redactor {
	r := &redactor{opts: opts, extra: map[string]bool{}, seen: map[string]bool{}, pseudonyms: map[string]string{}}
	for _, h := range opts.Headers {
		r.extra[strings.ToLower(h)] = true
	}
	return r
}

var sensitiveHeaderWords = []string{"api-key", "apikey", "api_key", "token", "secret", "password"}

// sensitive reports whether a header's values are secrets. The answer is
// remembered by name: the check runs for every header of every exchange,
// the same few names come each time, and lowering each name on the heap was
// most of the redactor's cost.
func (r *redactor) sensitive(name string) bool {
	if v, ok := r.seen[name]; ok {
		return v
	}
	v := r.sensitiveName(strings.ToLower(name))
	if len(r.seen) >= seenNames {
		clear(r.seen)
	}
	r.seen[name] = v
	return v
}

// sensitiveName is sensitive for a lowered name.
func (r *redactor) sensitiveName(l string) bool {
	switch l {
	case "authorization", "proxy-authorization", "cookie", "set-cookie":
		return true
	}
	if r.extra[l] {
		return true
	}
	for _, w := range sensitiveHeaderWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// isSessionIDHeader is http.CanonicalHeaderKey(k) == "Mcp-Session-Id"
// without building the canonical key.
func isSessionIDHeader(k string) bool {
	const want = "Mcp-Session-Id"
	if k == want {
		return true
	}
	return len(k) == len(want) && http.CanonicalHeaderKey(k) == want
}

// header returns h with its session ids pseudonymised and its secrets
// redacted. Copy on write: h itself comes back when nothing in it changes
// (the recorder's header maps are never modified once handed to it: Begin's
// contract for a request, Tap.Response's own clone for a response), else a
// new map that shares the unchanged values with h. h is never modified.
func (r *redactor) header(h http.Header) http.Header {
	if h == nil || r.opts.Disabled {
		return h
	}
	if len(h) > maxCachedHeader {
		return r.redactHeader(h)
	}
	for _, c := range r.headers {
		if c.in != nil && sameHeader(c.in, h) {
			return c.out
		}
	}
	out := r.redactHeader(h)
	r.headers[r.next] = redactedHeader{h, out}
	r.next = (r.next + 1) % len(r.headers)
	return out
}

// maxCachedHeader bounds the names of a header whose redaction header
// remembers.
const maxCachedHeader = 32

// redactHeader is header, without remembering.
func (r *redactor) redactHeader(h http.Header) http.Header {
	var out http.Header
	for k, vs := range h {
		var nv []string
		switch {
		case isSessionIDHeader(k):
			nv = make([]string, len(vs))
			for i, v := range vs {
				nv[i] = r.pseudonym(v)
			}
		case r.sensitive(k):
			nv = make([]string, len(vs))
			for i, v := range vs {
				nv[i] = r.redactValue(k, v)
			}
		case k == "Location" && len(vs) == 1 && strings.IndexByte(vs[0], '?') >= 0:
			// A redirect's target: an OAuth authorization response carries
			// its code in the query (redact_body.go).
			v, changed := r.location(vs[0])
			if !changed {
				continue
			}
			nv = []string{v}
		default:
			continue
		}
		if out == nil {
			out = make(http.Header, len(h))
			for k2, vs2 := range h {
				out[k2] = vs2
			}
		}
		out[k] = nv
	}
	if out == nil {
		return h
	}
	return out
}

func (r *redactor) redactValue(name, v string) string {
	secret := v
	kept := ""
	if l := strings.ToLower(name); l == "authorization" || l == "proxy-authorization" {
		// Keep the scheme ("Bearer"): it helps debugging and is no secret.
		if i := strings.IndexByte(v, ' '); i > 0 {
			kept, secret = v[:i+1], strings.TrimSpace(v[i+1:])
		}
		r.basicSecret(v)
	}
	if l := strings.ToLower(name); l == "cookie" || l == "set-cookie" {
		for _, part := range strings.Split(v, ";") {
			if _, val, ok := strings.Cut(part, "="); ok {
				r.learn(strings.TrimSpace(val))
			}
		}
	}
	r.learn(secret)
	return kept + Redacted
}

// learn remembers a secret for body scrubbing; short values would match
// too much innocent text, so only values of 8 bytes or more are kept.
func (r *redactor) learn(s string) {
	if len(s) < 8 || len(r.learned) >= 64 {
		return
	}
	for _, l := range r.learned {
		if string(l) == s {
			return
		}
	}
	r.learned = append(r.learned, []byte(s))
}

// body scrubs learned secrets from b, returning b itself when nothing
// matched, else a new slice.
func (r *redactor) body(b []byte) ([]byte, bool) {
	if r.opts.Disabled || len(r.learned) == 0 {
		return b, false
	}
	changed := false
	for _, s := range r.learned {
		if bytes.Contains(b, s) {
			b = bytes.ReplaceAll(b, s, []byte(Redacted))
			changed = true
		}
	}
	return b, changed
}

// sensitiveQuery are the query parameters redacted in stored URLs: OAuth's
// codes, verifiers, tokens, assertions and client secrets, and keys.
// state is not a secret.
var sensitiveQuery = map[string]bool{
	"access_token": true, "refresh_token": true, "id_token": true, "token": true,
	"code": true, "code_verifier": true, "device_code": true, "client_secret": true,
	"assertion": true, "client_assertion": true, "registration_access_token": true,
	"subject_token": true, "actor_token": true,
	"api_key": true, "apikey": true, "key": true, "password": true,
}

// url redacts sensitive query parameters (OAuth codes and tokens, keys).
func (r *redactor) url(u *url.URL) string {
	s := u.RequestURI()
	if r.opts.Disabled || u.RawQuery == "" {
		return s
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return u.EscapedPath() + "?" + Redacted
	}
	changed := false
	for k, vs := range q {
		if sensitiveQuery[strings.ToLower(k)] {
			for i, v := range vs {
				r.learn(v)
				vs[i] = Redacted
			}
			changed = true
		}
	}
	if !changed {
		return s
	}
	return u.EscapedPath() + "?" + q.Encode()
}

var pseudoEnc = base32.StdEncoding.WithPadding(base32.NoPadding)

var defaultPseudonymKey = []byte("mcptape session pseudonym v1")

// pseudonym is the stored stand-in for an Mcp-Session-Id: stable for the
// same id and key, and not reversible.
func (r *redactor) pseudonym(id string) string {
	if r.opts.Disabled {
		return id
	}
	if p, ok := r.pseudonyms[id]; ok {
		return p
	}
	key := r.opts.PseudonymKey
	if len(key) == 0 {
		key = defaultPseudonymKey
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	p := "sid-" + strings.ToLower(pseudoEnc.EncodeToString(m.Sum(nil))[:16])
	if r.pseudonyms != nil { // nil in a redactor made for one pseudonym
		if len(r.pseudonyms) >= seenNames {
			clear(r.pseudonyms)
		}
		r.pseudonyms[id] = p
	}
	return p
}
