package capture

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/url"
	"strings"
)

// Redaction of the bodies of plain HTTP exchanges: above all the OAuth
// traffic a client sends through mcptape (metadata, dynamic registration,
// authorize redirects, token requests), whose forms and JSON documents
// carry codes, verifiers, secrets and tokens by name. The values removed
// are learned, so they are scrubbed wherever they appear later.

// sensitiveField reports whether a form or JSON member of this name holds a
// secret: OAuth's codes, verifiers, tokens, assertions and client secrets,
// and anything named like a secret or a password. state, token_type,
// code_challenge and client_id are not secrets.
func sensitiveField(name string) bool {
	l := strings.ToLower(name)
	switch l {
	case "code", "code_verifier", "device_code", "user_code", "assertion", "client_assertion",
		"token", "api_key", "apikey", "key", "id_token_hint", "pin", "otp":
		return true
	}
	return strings.HasSuffix(l, "_token") || strings.Contains(l, "secret") || strings.Contains(l, "password")
}

// plainBody redacts a plain HTTP body (not MCP) by its content type: the
// values of sensitive members of a form or a JSON document, then every
// secret learned so far. It returns b itself when nothing changed.
func (r *redactor) plainBody(b []byte, contentType string) ([]byte, bool) {
	if r.opts.Disabled || len(b) == 0 {
		return b, false
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	changed := false
	switch {
	case mt == "application/x-www-form-urlencoded":
		b, changed = r.form(b)
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		b, changed = r.jsonMembers(b)
	}
	b, scrubbed := r.body(b)
	return b, changed || scrubbed
}

// form redacts the values of sensitive fields of an urlencoded form,
// leaving every other byte as it was.
func (r *redactor) form(b []byte) ([]byte, bool) {
	var out []byte
	changed := false
	for i := 0; i <= len(b); {
		j := bytes.IndexByte(b[i:], '&')
		if j < 0 {
			j = len(b)
		} else {
			j += i
		}
		pair := b[i:j]
		k, v, hasV := bytes.Cut(pair, []byte("="))
		name, err := url.QueryUnescape(string(k))
		if hasV && err == nil && sensitiveField(name) && len(v) > 0 {
			if val, err := url.QueryUnescape(string(v)); err == nil {
				r.learn(val)
			}
			r.learn(string(v))
			if out == nil {
				out = append(make([]byte, 0, len(b)), b[:i]...)
			}
			out = append(append(append(out, k...), '='), Redacted...)
			changed = true
		} else if out != nil {
			out = append(out, pair...)
		}
		if j < len(b) && out != nil {
			out = append(out, '&')
		}
		i = j + 1
	}
	if !changed {
		return b, false
	}
	return out, true
}

// jsonMembers redacts the string values of sensitive members, at any
// depth, of a JSON document, leaving every other byte as it was. A body
// that is not JSON is left to the learned-secret scrub.
func (r *redactor) jsonMembers(b []byte) ([]byte, bool) {
	type span struct{ start, end int }
	var spans []span
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	// The open containers: whether each is an object, and whether that
	// object expects a member name next.
	type open struct{ object, key bool }
	var stack []open
	sensitiveNext := false
	// valueDone notes that the open object's value has been read: a name
	// comes next.
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].key = true
		}
		sensitiveNext = false
	}
	for {
		before := int(dec.InputOffset())
		t, err := dec.Token()
		if err != nil {
			break
		}
		isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].key
		switch v := t.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				stack = append(stack, open{object: v == '{', key: v == '{'})
				sensitiveNext = false
			case '}', ']':
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
				valueDone()
			}
		case string:
			if isKey {
				stack[len(stack)-1].key = false
				sensitiveNext = sensitiveField(v)
				continue
			}
			if sensitiveNext && v != "" {
				end := int(dec.InputOffset())
				start := before
				for start < end && b[start] != '"' {
					start++ // past whitespace and the colon
				}
				r.learn(v)
				spans = append(spans, span{start, end})
			}
			valueDone()
		default:
			valueDone()
		}
	}
	if len(spans) == 0 {
		return b, false
	}
	out := make([]byte, 0, len(b))
	last := 0
	for _, s := range spans {
		out = append(append(out, b[last:s.start]...), `"`+Redacted+`"`...)
		last = s.end
	}
	return append(out, b[last:]...), true
}

// location redacts the sensitive query parameters of a redirect's target
// (an authorization response's code), learning them.
func (r *redactor) location(v string) (string, bool) {
	i := strings.IndexByte(v, '?')
	if i < 0 {
		return v, false
	}
	u, err := url.Parse(v)
	if err != nil {
		return v[:i] + "?" + Redacted, true
	}
	s := r.url(u)
	if s == u.RequestURI() {
		return v, false
	}
	_, q, _ := strings.Cut(s, "?")
	frag := ""
	if j := strings.IndexByte(v, '#'); j > i {
		frag = v[j:]
	}
	return v[:i] + "?" + q + frag, true
}

// basicSecret learns the password of a Basic Authorization value (an OAuth
// client secret, say), which appears in bodies decoded, not in base64.
func (r *redactor) basicSecret(v string) {
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return
	}
	if _, pw, ok := strings.Cut(string(dec), ":"); ok {
		if s, err := url.QueryUnescape(pw); err == nil {
			r.learn(s)
		}
		r.learn(pw)
	}
}
