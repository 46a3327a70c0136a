package clientconfig

import (
	"strings"

	"github.com/mcptape/mcptape/capture"
)

// Redacted stands in for a secret in what is shown.
const Redacted = capture.Redacted

// The rules are the recorder's (capture.RedactArgs): what `mcptape
// clients` hides of a command is what a wrap's record hides of it.

// RedactArgs returns args with what looks like a secret replaced by
// Redacted: the value of a flag whose name says secret (--api-key K,
// --token=T), values that look like keys or tokens, and the password and
// secret query parameters of URLs (postgres://user:PASSWORD@host).
func RedactArgs(args []string) []string { return capture.RedactArgs(args) }

// RedactEnv returns vars with the values redacted whose names say secret,
// that look like keys or tokens, or URLs' passwords.
func RedactEnv(vars []EnvVar) []EnvVar {
	out := make([]EnvVar, len(vars))
	for i, v := range vars {
		out[i] = EnvVar{Name: v.Name, Value: capture.RedactEnvValue(v.Name, v.Value)}
	}
	return out
}

// RedactURL hides a URL's password and the values of query parameters whose
// names say secret (or that look like tokens).
func RedactURL(raw string) string { return capture.RedactURL(raw) }

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
