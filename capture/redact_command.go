package capture

import (
	"net/url"
	"path"
	"regexp"
	"strings"
)

// The redaction of a server's command line and environment: one set of
// rules for what the recorder stores (a stdio session's Command) and what
// `mcptape clients` shows, so that a secret either hides is hidden by both.

// secretWords mark a flag, variable, header or parameter name whose value
// is a secret; so does a name ending in "key" (API_KEY, --apikey) or being
// or ending in "pat" (a personal access token).
var secretWords = []string{"token", "secret", "password", "passwd", "auth", "credential", "cookie", "session", "private", "api_key", "api-key", "apikey"}

// secretName reports whether a flag, variable or parameter name says its
// value is a secret.
func secretName(name string) bool {
	l := strings.ToLower(strings.TrimLeft(name, "-"))
	if strings.HasSuffix(l, "key") || l == "pat" || strings.HasSuffix(l, "_pat") || strings.HasSuffix(l, "-pat") {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// tokenLike matches values that look like keys and tokens whatever they are
// called: well-known prefixes (OpenAI, Anthropic, GitHub, GitLab, Slack,
// AWS, Google, Stripe, npm, Hugging Face), JWTs, and long runs of letters
// and digits.
var tokenLike = regexp.MustCompile(`^(sk-|sk_|pk_|rk_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abposr]-|AKIA|ASIA|AIza|ya29\.|eyJ|npm_|hf_)[A-Za-z0-9._\-]{8,}$|^[A-Za-z0-9+_\-]{24,}={0,2}$`)

// looksLikeToken reports whether a value looks like a credential by itself,
// as opposed to a path, a URL or a word.
func looksLikeToken(v string) bool {
	if !tokenLike.MatchString(v) {
		return false
	}
	// A long run of one kind (a long word, a hex-free name) is no key.
	var letters, digits bool
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			digits = true
		case r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z':
			letters = true
		}
	}
	return letters && digits
}

// RedactArgs returns a command's arguments (without the program) with
// what looks like a secret replaced by Redacted: the value of a flag whose
// name says secret (--api-key K, --token=T), of a NAME=VALUE argument
// whose name does (docker -e GITHUB_TOKEN=…), of a secret header
// (--header "Authorization: Bearer …", as mcp-remote takes it), values that
// look like keys or tokens, and URLs' passwords and secret query
// parameters (postgresql://admin:PASSWORD@host).
func RedactArgs(args []string) []string { return redactArgs(args, nil, nil) }

// RedactEnvValue returns the value of environment variable name as it is
// shown and stored: Redacted when the name says secret or the value looks
// like a key; a URL's password and secret parameters hidden.
func RedactEnvValue(name, value string) string { return redactEnv(name, value, nil, nil) }

// RedactURL hides a URL's password and the values of query parameters whose
// names say secret (or that look like tokens). Anything else is returned as
// it is.
func RedactURL(raw string) string { return redactURL(raw, nil) }

// redactArgs is RedactArgs, learning each secret it removes, and applying
// the extra patterns.
func redactArgs(args []string, extra []*regexp.Regexp, learn func(string)) []string {
	if learn == nil {
		learn = func(string) {}
	}
	out := make([]string, len(args))
	for i, a := range args {
		prev := ""
		if i > 0 && strings.HasPrefix(args[i-1], "-") && !strings.Contains(args[i-1], "=") {
			prev = strings.ToLower(strings.TrimLeft(args[i-1], "-"))
		}
		switch {
		case prev != "" && secretName(prev) && !strings.HasPrefix(a, "-"):
			learn(a)
			out[i] = Redacted
		case prev == "header" || prev == "h" || prev == "headers":
			out[i] = redactHeader(a, learn)
		case strings.HasPrefix(a, "-") && strings.Contains(a, "="):
			name, v, _ := strings.Cut(a, "=")
			if secretName(name) || looksLikeToken(v) {
				learn(v)
				v = Redacted
			} else {
				v = redactValue(v, learn)
			}
			out[i] = name + "=" + v
		case !strings.HasPrefix(a, "-") && strings.Contains(a, "=") && !strings.Contains(a, "://"):
			name, v, _ := strings.Cut(a, "=")
			if secretName(name) || looksLikeToken(v) {
				learn(v)
				v = Redacted
			}
			out[i] = name + "=" + v
		default:
			out[i] = redactValue(a, learn)
		}
		out[i] = redactPatterns(out[i], extra, learn)
	}
	return out
}

// redactPatterns redacts what the patterns match in s: each match, or its
// first group.
func redactPatterns(s string, extra []*regexp.Regexp, learn func(string)) string {
	for _, re := range extra {
		var b strings.Builder
		last := 0
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			start, end := m[0], m[1]
			if len(m) >= 4 && m[2] >= 0 {
				start, end = m[2], m[3]
			}
			if start < last || start == end {
				continue
			}
			learn(s[start:end])
			b.WriteString(s[last:start])
			b.WriteString(Redacted)
			last = end
		}
		if last > 0 {
			b.WriteString(s[last:])
			s = b.String()
		}
	}
	return s
}

// redactEnv is RedactEnvValue, learning what it removes, with names
// matching an extra pattern secret too.
func redactEnv(name, value string, extra []string, learn func(string)) string {
	if learn == nil {
		learn = func(string) {}
	}
	if value == "" {
		return value
	}
	secret := secretName(name)
	for _, p := range extra {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(name)); ok {
			secret = true
		}
	}
	if secret {
		learn(value)
		return Redacted
	}
	return redactValue(value, learn)
}

// redactHeader redacts the value of a "Name: value" header whose name
// says secret.
func redactHeader(h string, learn func(string)) string {
	name, v, ok := strings.Cut(h, ":")
	if ok && (secretName(strings.TrimSpace(name)) || strings.EqualFold(strings.TrimSpace(name), "authorization")) {
		learn(strings.TrimSpace(v))
		return name + ": " + Redacted
	}
	return redactValue(h, learn)
}

func redactValue(v string, learn func(string)) string {
	if looksLikeToken(v) {
		learn(v)
		return Redacted
	}
	if l := strings.ToLower(v); strings.HasPrefix(l, "bearer ") || strings.HasPrefix(l, "basic ") {
		learn(v[strings.IndexByte(v, ' ')+1:])
		return v[:strings.IndexByte(v, ' ')+1] + Redacted
	}
	if strings.Contains(v, "://") {
		return redactURL(v, learn)
	}
	return v
}

// redactURL is RedactURL, learning what it removes.
func redactURL(raw string, learn func(string)) string {
	if learn == nil {
		learn = func(string) {}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw
	}
	changed := false
	if pw, has := u.User.Password(); has {
		learn(pw)
		if esc := url.PathEscape(pw); esc != pw {
			learn(esc)
		}
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i, v := range vs {
				if secretName(k) || k == "key" || k == "code" || looksLikeToken(v) {
					learn(v)
					vs[i] = "REDACTED"
					changed = true
				}
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return raw
	}
	// url's encoder escapes the brackets; show the marker as the rest.
	return strings.ReplaceAll(u.String(), "REDACTED", Redacted)
}

// command redacts a stdio server's command line and environment (see
// RedactArgs and RedactEnvValue, and RedactOptions.Args and Env). The
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
	if len(out.Args) > 1 {
		copy(out.Args[1:], redactArgs(out.Args[1:], r.opts.Args, r.learn))
	}
	for i, kv := range out.Env {
		if name, val, ok := strings.Cut(kv, "="); ok {
			out.Env[i] = name + "=" + redactEnv(name, val, r.opts.Env, r.learn)
		}
	}
	return out
}
