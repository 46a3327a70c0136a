package clientconfig

import (
	"net/url"
	"regexp"
	"strings"
)

// Redacted stands in for a secret in what is shown.
const Redacted = "[redacted]"

// secretWords mark a flag, variable, header or parameter name whose value
// is a secret; so does a name ending in "key" (API_KEY, --apikey) or being
// or ending in "pat" (a personal access token).
var secretWords = []string{"token", "secret", "password", "passwd", "auth", "credential", "cookie", "session"}

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
// AWS, Google, Stripe), JWTs, and long runs of letters and digits.
var tokenLike = regexp.MustCompile(`^(sk-|sk_|pk_|rk_|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abposr]-|AKIA|ASIA|AIza|eyJ)[A-Za-z0-9._\-]{8,}$|^[A-Za-z0-9+_\-]{32,}={0,2}$`)

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

// RedactArgs returns args with what looks like a secret replaced by
// Redacted: the value of a flag whose name says secret (--api-key K,
// --token=T), values that look like keys or tokens, and the password and
// secret query parameters of URLs (postgres://user:PASSWORD@host).
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		prev := ""
		if i > 0 && strings.HasPrefix(args[i-1], "-") && !strings.Contains(args[i-1], "=") {
			prev = strings.ToLower(strings.TrimLeft(args[i-1], "-"))
		}
		switch {
		case prev != "" && secretName(prev):
			out[i] = Redacted
		case prev == "header" || prev == "h" || prev == "headers":
			// --header "Authorization: Bearer …", as mcp-remote takes it.
			out[i] = redactHeader(a)
		case strings.HasPrefix(a, "-") && strings.Contains(a, "="):
			name, v, _ := strings.Cut(a, "=")
			if secretName(name) || looksLikeToken(v) {
				v = Redacted
			} else {
				v = redactValue(v)
			}
			out[i] = name + "=" + v
		case !strings.HasPrefix(a, "-") && strings.Contains(a, "=") && !strings.Contains(a, "://"):
			// NAME=VALUE, as in `env KEY=… cmd` or `docker run -e KEY=…`.
			name, v, _ := strings.Cut(a, "=")
			if secretName(name) || looksLikeToken(v) {
				v = Redacted
			}
			out[i] = name + "=" + v
		default:
			out[i] = redactValue(a)
		}
	}
	return out
}

// redactHeader redacts the value of a "Name: value" header whose name
// says secret.
func redactHeader(h string) string {
	name, _, ok := strings.Cut(h, ":")
	if ok && secretName(strings.TrimSpace(name)) {
		return name + ": " + Redacted
	}
	return redactValue(h)
}

// RedactEnv returns vars with the values redacted whose names say secret,
// that look like keys or tokens, or URLs' passwords.
func RedactEnv(vars []EnvVar) []EnvVar {
	out := make([]EnvVar, len(vars))
	for i, v := range vars {
		out[i] = EnvVar{Name: v.Name, Value: redactValue(v.Value)}
		if secretName(v.Name) {
			out[i].Value = Redacted
		}
	}
	return out
}

func redactValue(v string) string {
	if looksLikeToken(v) {
		return Redacted
	}
	if l := strings.ToLower(v); strings.HasPrefix(l, "bearer ") || strings.HasPrefix(l, "basic ") {
		return v[:strings.IndexByte(v, ' ')+1] + Redacted
	}
	if strings.Contains(v, "://") {
		return RedactURL(v)
	}
	return v
}

// RedactURL hides a URL's password and the values of query parameters whose
// names say secret (or that look like tokens).
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw
	}
	changed := false
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i, v := range vs {
				if secretName(k) || k == "key" || k == "code" || looksLikeToken(v) {
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

// CommandLine shows a command and its arguments as one line a user can
// read, quoting arguments with spaces, with secrets redacted.
func CommandLine(command string, args []string) string {
	parts := append([]string{command}, RedactArgs(args)...)
	for i, p := range parts {
		parts[i] = shellQuote(p)
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.ContainsAny(s, " \t\n'\"\\$`;&|<>()") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
