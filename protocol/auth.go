package protocol

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
)

// OAuth on the wire: the auth-params of a WWW-Authenticate challenge, the
// members of a metadata document, the URLs of one origin seen from
// another. A proxy and a replay map the URLs a server names itself by to
// their own address with these, changing nothing else.

// SameOrigin reports whether u is on the origin of up (scheme, host and
// port, the default port implied, the host's case ignored).
func SameOrigin(u, up *url.URL) bool {
	return strings.EqualFold(u.Scheme, up.Scheme) && strings.EqualFold(u.Hostname(), up.Hostname()) &&
		portOf(u) == portOf(up)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// MapOrigin is the absolute URL s moved from the origin of from to
// scheme://host, with prefix put before its path; path and query are kept.
// ok is false when s is not an absolute URL on from's origin, or when its
// path climbs above the root with dot segments: a client resolves those,
// and under a prefix "/../" would lead out of it. A path with dot segments
// that stays within the root is mapped resolved.
func MapOrigin(s string, from *url.URL, scheme, host, prefix string) (_ string, ok bool) {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || !SameOrigin(u, from) {
		return s, false
	}
	p, escapes := RemoveDotSegments(u.Path)
	if escapes {
		return s, false
	}
	if p != u.Path {
		u.Path, u.RawPath = p, ""
	}
	u.Scheme, u.Host, u.User = scheme, host, nil
	if prefix != "" {
		u.Path = prefix + u.Path
		if u.RawPath != "" {
			u.RawPath = prefix + u.RawPath
		}
	}
	return u.String(), true
}

// RemoveDotSegments resolves the "." and ".." segments of an absolute
// path as a client does (RFC 3986, 5.2.4); escapes reports a ".." above
// the root, which the resolution drops.
func RemoveDotSegments(p string) (_ string, escapes bool) {
	if !strings.Contains(p, ".") {
		return p, false
	}
	in := strings.Split(p, "/")
	out := make([]string, 0, len(in))
	for i, seg := range in {
		switch seg {
		case ".", "..":
			if seg == ".." {
				if len(out) > 1 {
					out = out[:len(out)-1]
				} else if i > 0 {
					escapes = true
				}
			}
			if i == len(in)-1 {
				out = append(out, "") // a trailing slash
			}
		default:
			out = append(out, seg)
		}
	}
	return strings.Join(out, "/"), escapes
}

// EditAuthParam edits the values of the auth-param name (case-insensitive)
// in a WWW-Authenticate value (RFC 9110 §11.6.1), leaving every other byte
// as it was: quoted strings elsewhere are skipped whole, and a value keeps
// its quoting. edit returns the new value and whether to use it.
func EditAuthParam(v, name string, edit func(string) (string, bool)) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(v); {
		switch c := v[i]; {
		case c == '"':
			i = quotedEnd(v, i)
		case isTChar(c):
			j := i
			for j < len(v) && isTChar(v[j]) {
				j++
			}
			tok := v[i:j]
			i = j
			if !strings.EqualFold(tok, name) {
				continue
			}
			k := skipWS(v, j)
			if k >= len(v) || v[k] != '=' {
				continue
			}
			k = skipWS(v, k+1)
			var val string
			start, end, quoted := k, k, false
			if k < len(v) && v[k] == '"' {
				end, quoted = quotedEnd(v, k), true
				val = unquoteParam(v[k:end])
			} else {
				for end < len(v) && v[end] != ',' && v[end] != ' ' && v[end] != '\t' {
					end++
				}
				val = v[start:end]
			}
			i = end
			to, ok := edit(val)
			if !ok {
				continue
			}
			b.WriteString(v[last:start])
			if quoted {
				b.WriteString(quoteParam(to))
			} else {
				b.WriteString(to)
			}
			last = end
		default:
			i++
		}
	}
	if last == 0 {
		return v
	}
	b.WriteString(v[last:])
	return b.String()
}

// quotedEnd is the index after the quoted-string that starts at v[i].
func quotedEnd(v string, i int) int {
	for j := i + 1; j < len(v); j++ {
		switch v[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(v)
}

func unquoteParam(q string) string {
	q = strings.TrimPrefix(q, `"`)
	q = strings.TrimSuffix(q, `"`)
	if !strings.Contains(q, `\`) {
		return q
	}
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		if q[i] == '\\' && i+1 < len(q) {
			i++
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

func quoteParam(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func skipWS(v string, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	return i
}

// isTChar is RFC 9110's tchar.
func isTChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// EditStringMember replaces the string value of each top-level member
// named name of the JSON object doc whose edit says so, leaving every other
// byte of doc as it was. changed lists each change as its old and new
// value; nil when nothing changed (doc is then returned as it was).
func EditStringMember(doc []byte, name string, edit func(string) (string, bool)) (out []byte, changed [][2]string) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return doc, nil
	}
	type span struct {
		start, end int
		to         []byte
	}
	var spans []span
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return doc, nil
		}
		key, _ := t.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return doc, nil
		}
		if key != name {
			continue
		}
		end := int(dec.InputOffset())
		start := end - len(val)
		var s string
		if start < 0 || !bytes.Equal(doc[start:end], val) || json.Unmarshal(val, &s) != nil {
			continue
		}
		to, ok := edit(s)
		if !ok || to == s {
			continue
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(to)
		spans = append(spans, span{start, end, bytes.TrimRight(b.Bytes(), "\n")})
		changed = append(changed, [2]string{s, to})
	}
	if len(spans) == 0 {
		return doc, nil
	}
	out = make([]byte, 0, len(doc)+64)
	last := 0
	for _, sp := range spans {
		out = append(append(out, doc[last:sp.start]...), sp.to...)
		last = sp.end
	}
	return append(out, doc[last:]...), changed
}
