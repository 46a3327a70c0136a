package clientconfig_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/clientconfig"
)

func TestCommandLineRedactsSecrets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command string
		args    []string
		want    string
	}{
		{"plain", "npx", []string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/ana/My Documents"},
			"npx -y @modelcontextprotocol/server-filesystem '/Users/ana/My Documents'"},
		{"flag value", "srv", []string{"--api-key", "abc123", "--token=xyz", "--port", "8080"},
			"srv --api-key [redacted] --token=[redacted] --port 8080"},
		{"token-shaped values", "srv", []string{"ghp_0123456789abcdefABCDEF0123456789abcd", "sk-ant-api03-abcdefghijklmnop", "AKIAIOSFODNN7EXAMPLE"},
			"srv [redacted] [redacted] [redacted]"},
		{"long word is no token", "srv", []string{"@modelcontextprotocol/server-everything", "averyveryverylongpackagenamewithoutdigits"},
			"srv @modelcontextprotocol/server-everything averyveryverylongpackagenamewithoutdigits"},
		{"database URL", "uvx", []string{"mcp-server-postgres", "postgresql://admin:hunter2@db.local:5432/app"},
			"uvx mcp-server-postgres postgresql://admin:[redacted]@db.local:5432/app"},
		{"query token", "npx", []string{"mcp-remote", "https://example.com/mcp?token=abc&team=x"},
			"npx mcp-remote 'https://example.com/mcp?team=x&token=[redacted]'"},
		{"mcp-remote header", "npx", []string{"mcp-remote", "https://example.com/mcp", "--header", "Authorization: Bearer abc.def"},
			"npx mcp-remote https://example.com/mcp --header 'Authorization: [redacted]'"},
		{"docker -e", "docker", []string{"run", "-i", "-e", "GITHUB_TOKEN=ghp_x", "-e", "LOG=debug", "img"},
			"docker run -i -e GITHUB_TOKEN=[redacted] -e LOG=debug img"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := clientconfig.CommandLine(tc.command, tc.args); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestRedactEnv(t *testing.T) {
	got := clientconfig.RedactEnv([]clientconfig.EnvVar{
		{Name: "GITHUB_PERSONAL_ACCESS_TOKEN", Value: "x"},
		{Name: "BRAVE_API_KEY", Value: "short"},
		{Name: "DATABASE_URL", Value: "postgres://u:p@h/db"},
		{Name: "SOME_ID", Value: "0123456789abcdefABCDEF0123456789"},
		{Name: "ALLOWED_DIRS", Value: "/home/ana/src"},
		{Name: "NODE_ENV", Value: "production"},
	})
	want := []clientconfig.EnvVar{
		{Name: "GITHUB_PERSONAL_ACCESS_TOKEN", Value: "[redacted]"},
		{Name: "BRAVE_API_KEY", Value: "[redacted]"},
		{Name: "DATABASE_URL", Value: "postgres://u:[redacted]@h/db"},
		{Name: "SOME_ID", Value: "[redacted]"},
		{Name: "ALLOWED_DIRS", Value: "/home/ana/src"},
		{Name: "NODE_ENV", Value: "production"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
