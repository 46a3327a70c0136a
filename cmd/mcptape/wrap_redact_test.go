package main

import (
	"strings"
	"testing"
)

// Secrets in a server's arguments and environment (a database URL's
// password, a key-looking value, a token-named variable) are redacted when
// they are written, by the rules `mcptape clients` shows commands with,
// and so are what --redact-arg and --redact-env name: in the session's
// command, in every message that repeats them, and in an exported tape.
func TestWrapRedactsArgsAndEnv(t *testing.T) {
	data := t.TempDir()
	const (
		dbPassword = "s3cretPassw0rd"
		envToken   = "tok-9f8e7d6c5b4a3928"
		tenant     = "acme-tenant-7731"
		mine       = "my-own-secret-value"
	)
	dbURL := "postgresql://admin:" + dbPassword + "@db.local:5432/app"
	cmd := mcptapeCmd(t, "wrap", "--data", data, "--name", "db",
		"--redact-arg", `tenant=([\w-]+)`, "--redact-env", "MY_*", "--",
		"sh", "-c", `read l; printf '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"connected to %s as %s for %s with %s"}]}}\n' "$1" "$API_TOKEN" "$2" "$MY_SETTING"`,
		"sh", dbURL, "tenant="+tenant)
	cmd.Env = append(cmd.Env, "API_TOKEN="+envToken, "DATABASE_URL="+dbURL, "MY_SETTING="+mine, "LOG_LEVEL=debug")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"query"}}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), dbPassword) {
		t.Fatalf("the client did not get the server's answer as sent: %s", out)
	}
	s, ms := routeSession(t, data, "db")
	args, env := strings.Join(s.Command.Args, " "), strings.Join(s.Command.Env, " ")
	stored := args + " " + env
	for _, m := range ms {
		stored += " " + string(m.Raw)
	}
	for _, secret := range []string{dbPassword, envToken, tenant, mine} {
		if strings.Contains(stored, secret) {
			t.Errorf("%q is stored in clear:\nargs %s\nenv %s", secret, args, env)
		}
	}
	for _, kept := range []string{"postgresql://admin:[redacted]@db.local:5432/app", "tenant=[redacted]", "LOG_LEVEL=debug", "API_TOKEN=[redacted]", "MY_SETTING=[redacted]"} {
		if !strings.Contains(stored, kept) {
			t.Errorf("the record lacks %q:\nargs %s\nenv %s", kept, args, env)
		}
	}
	code, tape, e := mcptape(t, "export", "--data", data, "-q", s.ID)
	if code != 0 {
		t.Fatalf("export: %d %s", code, e)
	}
	for _, secret := range []string{dbPassword, envToken, tenant, mine} {
		if strings.Contains(tape, secret) {
			t.Errorf("the exported tape holds %q", secret)
		}
	}
	if code, _, e := mcptape(t, "wrap", "--redact-arg", "(", "--", "true"); code != exitUsage || !strings.Contains(e, "--redact-arg") {
		t.Errorf("a bad --redact-arg: %d %s", code, e)
	}
}
