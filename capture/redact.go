package capture

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"net/http"
	"net/url"
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
	if len(r.pseudonyms) >= seenNames {
		clear(r.pseudonyms)
	}
	r.pseudonyms[id] = p
	return p
}

// secretWords mark a name (a flag, an environment variable) whose value is
// a secret.
var secretWords = []string{"key", "token", "secret", "password", "passwd", "auth", "credential", "cookie", "private"}

// secretName reports whether a flag or variable name names a secret.
func secretName(name string) bool {
	l := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// secretPrefixes start well-known credential formats.
var secretPrefixes = []string{"sk-", "sk_", "pk_live_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_", "github_pat_", "glpat-",
	"xoxb-", "xoxp-", "xoxa-", "AKIA", "ASIA", "AIza", "ya29.", "eyJ", "npm_", "hf_", "Bearer "}

// secretValue reports whether a value looks like a credential by itself:
// a known prefix, or a long run of token characters with letters and digits
// mixed (a random key), as opposed to a path, a URL or a word.
func secretValue(v string) bool {
	for _, p := range secretPrefixes {
		if strings.HasPrefix(v, p) && len(v) >= len(p)+8 {
			return true
		}
	}
	if len(v) < 24 || strings.ContainsAny(v, "/\\:. ") {
		return false
	}
	var letters, digits int
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letters++
		case c == '-' || c == '_' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return letters > 0 && digits > 0
}

// command redacts a stdio server's command line and environment: the
// value of a secret-named flag (--api-key=V, or --api-key V), of a
// secret-named variable, and any value that looks like a credential. The
// values it removes are learned, so they are scrubbed from messages too.
func (r *redactor) command(c Command) Command {
	out := Command{Dir: c.Dir, PID: c.PID, Exit: c.Exit}
	out.Args = make([]string, len(c.Args))
	copy(out.Args, c.Args)
	out.Env = make([]string, len(c.Env))
	copy(out.Env, c.Env)
	if len(out.Env) == 0 {
		out.Env = nil
	}
	if r.opts.Disabled {
		return out
	}
	for i := 1; i < len(out.Args); i++ {
		a := out.Args[i]
		if name, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "-") {
			if secretName(name) || secretValue(val) {
				r.learn(val)
				out.Args[i] = name + "=" + Redacted
			}
			continue
		}
		if strings.HasPrefix(a, "-") && secretName(a) && i+1 < len(out.Args) && !strings.HasPrefix(out.Args[i+1], "-") {
			r.learn(out.Args[i+1])
			out.Args[i+1] = Redacted
			i++
			continue
		}
		if secretValue(a) {
			r.learn(a)
			out.Args[i] = Redacted
		}
	}
	for i, kv := range out.Env {
		name, val, ok := strings.Cut(kv, "=")
		if ok && val != "" && (secretName(name) || secretValue(val)) {
			r.learn(val)
			out.Env[i] = name + "=" + Redacted
		}
	}
	return out
}
