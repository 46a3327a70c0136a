package clientconfig_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/clientconfig"
)

// fakeEnv is a machine of another OS: files lists what exists.
func fakeEnv(goos, home, dir string, vars map[string]string, files ...string) *clientconfig.Env {
	exists := map[string]bool{}
	for _, f := range files {
		exists[f] = true
	}
	return &clientconfig.Env{
		GOOS: goos, Home: home, Dir: dir,
		Getenv: func(k string) string { return vars[k] },
		Exists: func(p string) bool { return exists[p] },
		Glob: func(pattern string) ([]string, error) {
			prefix := strings.TrimSuffix(pattern, "*")
			var out []string
			for f := range exists {
				if rest, ok := strings.CutPrefix(f, prefix); ok && !strings.ContainsAny(rest, `/\`) {
					out = append(out, f)
				}
			}
			return out, nil
		},
	}
}

func paths(locs []clientconfig.Location) []string {
	var out []string
	for _, l := range locs {
		out = append(out, l.Scope.String()+" "+l.Path)
	}
	return out
}

func TestDefaultPaths(t *testing.T) {
	mac := fakeEnv("darwin", "/Users/ana", "/Users/ana/src/app", nil)
	win := fakeEnv("windows", `C:\Users\ana`, `C:\Users\ana\src\app`, map[string]string{"APPDATA": `C:\Users\ana\AppData\Roaming`, "LOCALAPPDATA": `C:\Users\ana\AppData\Local`})
	msix := fakeEnv("windows", `C:\Users\ana`, `C:\Users\ana\src\app`, map[string]string{"APPDATA": `C:\Users\ana\AppData\Roaming`, "LOCALAPPDATA": `C:\Users\ana\AppData\Local`},
		`C:\Users\ana\AppData\Local\Packages\Claude_pzs8sxrjxfjjc`, `C:\Users\ana\AppData\Local\Packages\Claude_pzs8sxrjxfjjc\LocalCache\Roaming\Claude`)
	linux := fakeEnv("linux", "/home/ana", "/home/ana/src/app", nil)
	xdg := fakeEnv("linux", "/home/ana", "/home/ana/src/app", map[string]string{"XDG_CONFIG_HOME": "/home/ana/.xdg", "CLAUDE_CONFIG_DIR": "/home/ana/.claude-work"})
	for _, tc := range []struct {
		name   string
		client clientconfig.Client
		env    *clientconfig.Env
		want   []string
	}{
		{"macOS Claude Desktop", clientconfig.ClaudeDesktop, mac, []string{"user /Users/ana/Library/Application Support/Claude/claude_desktop_config.json"}},
		{"Windows Claude Desktop", clientconfig.ClaudeDesktop, win, []string{`user C:\Users\ana\AppData\Roaming\Claude\claude_desktop_config.json`}},
		{"Windows Claude Desktop, packaged (MSIX)", clientconfig.ClaudeDesktop, msix, []string{`user C:\Users\ana\AppData\Local\Packages\Claude_pzs8sxrjxfjjc\LocalCache\Roaming\Claude\claude_desktop_config.json`}},
		{"Linux Claude Desktop", clientconfig.ClaudeDesktop, linux, []string{"user /home/ana/.config/Claude/claude_desktop_config.json"}},
		{"Linux Claude Desktop, XDG_CONFIG_HOME", clientconfig.ClaudeDesktop, xdg, []string{"user /home/ana/.xdg/Claude/claude_desktop_config.json"}},
		{"macOS Claude Code", clientconfig.ClaudeCode, mac, []string{"local /Users/ana/.claude.json", "project /Users/ana/src/app/.mcp.json", "user /Users/ana/.claude.json"}},
		{"Windows Claude Code", clientconfig.ClaudeCode, win, []string{`local C:\Users\ana\.claude.json`, `project C:\Users\ana\src\app\.mcp.json`, `user C:\Users\ana\.claude.json`}},
		{"Claude Code, CLAUDE_CONFIG_DIR", clientconfig.ClaudeCode, xdg, []string{"local /home/ana/.claude-work/.claude.json", "project /home/ana/src/app/.mcp.json", "user /home/ana/.claude-work/.claude.json"}},
		{"macOS Cursor", clientconfig.Cursor, mac, []string{"project /Users/ana/src/app/.cursor/mcp.json", "user /Users/ana/.cursor/mcp.json"}},
		{"Windows Cursor", clientconfig.Cursor, win, []string{`project C:\Users\ana\src\app\.cursor\mcp.json`, `user C:\Users\ana\.cursor\mcp.json`}},
		{"macOS VS Code", clientconfig.VSCode, mac, []string{"project /Users/ana/src/app/.vscode/mcp.json", "user /Users/ana/Library/Application Support/Code/User/mcp.json"}},
		{"Windows VS Code", clientconfig.VSCode, win, []string{`project C:\Users\ana\src\app\.vscode\mcp.json`, `user C:\Users\ana\AppData\Roaming\Code\User\mcp.json`}},
		{"Linux VS Code", clientconfig.VSCode, linux, []string{"project /home/ana/src/app/.vscode/mcp.json", "user /home/ana/.config/Code/User/mcp.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, paths(clientconfig.Locations(tc.client, tc.env))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestProjectConfigFoundFromSubdirectory(t *testing.T) {
	env := fakeEnv("linux", "/home/ana", "/home/ana/src/app/internal/x", nil,
		"/home/ana/src/app/.mcp.json", "/home/ana/src/app/.cursor/mcp.json", "/home/ana/.cursor/mcp.json")
	got := paths(clientconfig.Locations(clientconfig.ClaudeCode, env))
	if got[1] != "project /home/ana/src/app/.mcp.json" {
		t.Errorf("Claude Code project config: %v", got)
	}
	// ~/.cursor/mcp.json is Cursor's user config, never a project's.
	got = paths(clientconfig.Locations(clientconfig.Cursor, fakeEnv("linux", "/home/ana", "/home/ana/notes", nil, "/home/ana/.cursor/mcp.json")))
	if d := cmp.Diff([]string{"project /home/ana/notes/.cursor/mcp.json", "user /home/ana/.cursor/mcp.json"}, got); d != "" {
		t.Errorf("Cursor from a directory without a project config (-want +got):\n%s", d)
	}
	got = paths(clientconfig.Locations(clientconfig.Cursor, fakeEnv("linux", "/home/ana", "/home/ana", nil, "/home/ana/.cursor/mcp.json")))
	if d := cmp.Diff([]string{"user /home/ana/.cursor/mcp.json"}, got); d != "" {
		t.Errorf("Cursor from the home directory (-want +got):\n%s", d)
	}
}

func TestLocationsIn(t *testing.T) {
	env := fakeEnv("linux", "/home/ana", "/home/ana/app", nil)
	for _, tc := range []struct {
		client clientconfig.Client
		path   string
		want   []string
	}{
		{clientconfig.ClaudeCode, "/tmp/x/.claude.json", []string{"local /tmp/x/.claude.json", "user /tmp/x/.claude.json"}},
		{clientconfig.ClaudeCode, "/tmp/x/servers.json", []string{"project /tmp/x/servers.json"}},
		{clientconfig.ClaudeDesktop, "/tmp/x/c.json", []string{"user /tmp/x/c.json"}},
		{clientconfig.Cursor, "/home/ana/.cursor/mcp.json", []string{"user /home/ana/.cursor/mcp.json"}},
		{clientconfig.VSCode, "/tmp/x/mcp.json", []string{"project /tmp/x/mcp.json"}},
	} {
		if d := cmp.Diff(tc.want, paths(clientconfig.LocationsIn(tc.client, tc.path, env))); d != "" {
			t.Errorf("%s --config %s (-want +got):\n%s", tc.client, tc.path, d)
		}
	}
}

func TestParseClient(t *testing.T) {
	for _, c := range clientconfig.Clients() {
		got, err := clientconfig.ParseClient(c.String())
		if err != nil || got != c {
			t.Errorf("ParseClient(%q) = %v, %v", c.String(), got, err)
		}
	}
	_, err := clientconfig.ParseClient("claude")
	if err == nil || !strings.Contains(err.Error(), "claude-desktop, claude-code, cursor, vscode") {
		t.Errorf("an unknown client: %v; want the names listed", err)
	}
}
