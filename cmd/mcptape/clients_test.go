package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/clientconfig"
)

// The client-config commands, end to end: the real mcptape binary, built
// here, run against a temporary home directory as a user would run it.

const desktopConfig = `{
  "globalShortcut": "Alt+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/ana/Desktop"]
    },
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_0123456789abcdefABCDEF0123456789abcd"}
    },
    "linear": {"url": "https://mcp.linear.app/mcp"}
  }
}
`

// projectConfig is a Claude Code .mcp.json with CRLF line ends.
var projectConfig = strings.ReplaceAll("{\n\t\"mcpServers\": {\n\t\t\"db\": {\"command\": \"uvx\", \"args\": [\"mcp-server-sqlite\", \"--db-path\", \"dev.db\"]}\n\t}\n}\n", "\n", "\r\n")

type cliEnv struct {
	t        *testing.T
	bin, dir string
	env      []string
}

func (c *cliEnv) run(args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	return c.runProgram(c.bin, args...)
}

func (c *cliEnv) runProgram(program string, args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	cmd := exec.Command(program, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		c.t.Fatalf("%s %v: %v", program, args, err)
	}
	return code, o.String(), e.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// entry decodes the server name of a config's mcpServers.
func entry(t *testing.T, path, name string) (command string, args []string, env map[string]string) {
	t.Helper()
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(readFile(t, path), &cfg); err != nil {
		t.Fatalf("%s no longer parses: %v", path, err)
	}
	e := cfg.MCPServers[name]
	return e.Command, e.Args, e.Env
}

func TestClientsCommandsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the mcptape binary")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin", "mcptape")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	home, proj := filepath.Join(tmp, "home"), filepath.Join(tmp, "proj")
	vars := map[string]string{"HOME": home, "USERPROFILE": home, "APPDATA": filepath.Join(home, "AppData", "Roaming")}
	desktop := clientconfig.ClaudeDesktopPath(&clientconfig.Env{Home: home, Getenv: func(k string) string { return vars[k] }})
	for path, text := range map[string]string{desktop: desktopConfig, filepath.Join(proj, ".mcp.json"): projectConfig} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	c := &cliEnv{t: t, bin: bin, dir: proj, env: env}

	t.Run("clients lists the configs, redacted", func(t *testing.T) {
		code, out, errOut := c.run("clients")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{
			"Claude Desktop (claude-desktop)", "user config: " + desktop,
			"filesystem  stdio  no", "npx -y @modelcontextprotocol/server-filesystem /home/ana/Desktop",
			"GITHUB_PERSONAL_ACCESS_TOKEN=[redacted]", "linear      url    no        https://mcp.linear.app/mcp",
			"project config: " + filepath.Join(proj, ".mcp.json"), "db    stdio  no        uvx mcp-server-sqlite --db-path dev.db",
			"user config: " + filepath.Join(home, ".cursor", "mcp.json") + " (not found)",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("clients output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "ghp_") {
			t.Errorf("clients shows a token:\n%s", out)
		}
	})

	t.Run("attach rewrites one entry, detach puts it back byte for byte", func(t *testing.T) {
		code, out, errOut := c.run("attach", "claude-desktop", "filesystem", "--data", "rec")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		command, args, _ := entry(t, desktop, "filesystem")
		want := []string{"wrap", "--name", "filesystem", "--data", filepath.Join(proj, "rec"), "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/ana/Desktop"}
		if command != bin || !slices.Equal(args, want) {
			t.Errorf("the entry runs %s %q, want %s %q", command, args, bin, want)
		}
		if _, _, env := entry(t, desktop, "github"); env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "" {
			t.Error("another server's entry lost its env")
		}
		for _, want := range []string{"filesystem: attached", "quit Claude Desktop completely and start it again", "mcptape detach claude-desktop filesystem", "A backup of the config as it was is in " + desktop + ".mcptape-backup"} {
			if !strings.Contains(out, want) {
				t.Errorf("attach output lacks %q:\n%s", want, out)
			}
		}
		attached := readFile(t, desktop)
		code, out, _ = c.run("attach", "claude-desktop", "filesystem", "--data", "rec")
		if code != 0 || !strings.Contains(out, "already attached") || !bytes.Equal(readFile(t, desktop), attached) {
			t.Errorf("attach twice: exit %d, changed=%v:\n%s", code, !bytes.Equal(readFile(t, desktop), attached), out)
		}
		if _, out, _ = c.run("clients", "claude-desktop"); !strings.Contains(out, "filesystem  stdio  yes") {
			t.Errorf("clients does not show filesystem attached:\n%s", out)
		}

		code, out, errOut = c.run("detach", "claude-desktop", "filesystem")
		if code != 0 || !strings.Contains(out, "filesystem: detached") {
			t.Fatalf("detach: exit %d: %s%s", code, out, errOut)
		}
		if got := readFile(t, desktop); string(got) != desktopConfig {
			t.Errorf("detach did not restore the config byte for byte:\n%s", got)
		}
		if got := readFile(t, desktop+".mcptape-backup"); string(got) != desktopConfig {
			t.Errorf("the backup is not the original:\n%s", got)
		}
		code, out, _ = c.run("detach", "claude-desktop", "filesystem")
		if code != 0 || !strings.Contains(out, "not attached") || !strings.Contains(out, "Nothing changed") {
			t.Errorf("detach twice: exit %d:\n%s", code, out)
		}
	})

	t.Run("attach --all of a CRLF project config and back", func(t *testing.T) {
		path := filepath.Join(proj, ".mcp.json")
		if code, out, errOut := c.run("attach", "claude-code", "--all"); code != 0 || !strings.Contains(out, "db: attached") || !strings.Contains(out, "start `claude` again") || !strings.Contains(out, "detach before you commit it") {
			t.Fatalf("exit %d: %s%s", code, out, errOut)
		}
		got := readFile(t, path)
		if bytes.Count(got, []byte("\n")) != bytes.Count(got, []byte("\r\n")) {
			t.Errorf("a line ends without CR:\n%q", got)
		}
		// The default data directory is written, absolute: the client
		// starts the server with an environment of its own.
		if command, args, _ := entry(t, path, "db"); command != bin || len(args) != 10 || !slices.Equal(args[:4], []string{"wrap", "--name", "db", "--data"}) ||
			!strings.HasPrefix(args[4], home+string(filepath.Separator)) || !slices.Equal(args[5:], []string{"--", "uvx", "mcp-server-sqlite", "--db-path", "dev.db"}) {
			t.Errorf("db runs %s %q", command, args)
		}
		if code, out, errOut := c.run("detach", "claude-code", "--all"); code != 0 || string(readFile(t, path)) != projectConfig {
			t.Errorf("detach --all: exit %d, %s%s\n%q", code, out, errOut, readFile(t, path))
		}
	})

	t.Run("refusals", func(t *testing.T) {
		broken := filepath.Join(proj, "broken.json")
		brokenText := "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n"
		if err := os.WriteFile(broken, []byte(brokenText), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"attach", "claude-desktop", "nope"}, 1, "the servers there are: filesystem, github, linear"},
			{[]string{"attach", "claude-desktop", "linear"}, 1, "it is an HTTP server (https://mcp.linear.app/mcp)"},
			{[]string{"attach", "cursor", "--config", "broken.json", "a"}, 1, "broken.json is not valid JSON: line 4, column 5"},
			{[]string{"attach", "cursor", "--all"}, 1, "no Cursor config found"},
			{[]string{"attach", "claude", "x"}, 2, "the clients are claude-desktop, claude-code, cursor, vscode"},
			{[]string{"attach", "claude-desktop"}, 2, "or give --all"},
			{[]string{"attach", "claude-desktop", "filesystem", "--all"}, 2, "not both"},
			{[]string{"detach"}, 2, "name a client"},
			{[]string{"detach", "vscode", "--all", "--config", "nowhere.json"}, 1, "--config nowhere.json: there is no such file"},
		} {
			code, out, errOut := c.run(tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("mcptape %s: exit %d, want %d and %q:\n%s%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out, errOut)
			}
		}
		if got := readFile(t, broken); string(got) != brokenText {
			t.Errorf("the invalid config was written:\n%s", got)
		}
		if got := readFile(t, desktop); string(got) != desktopConfig {
			t.Errorf("a refused command changed the config:\n%s", got)
		}
		if _, err := os.Stat(broken + ".mcptape-backup"); err == nil {
			t.Error("a backup was written for a refused command")
		}
	})

	t.Run("attach writes the path the user runs, and an absolute --data without HOME", func(t *testing.T) {
		// A package manager's layout: a versioned file, and a link to it
		// on PATH that an upgrade moves to the next version.
		versioned := filepath.Join(tmp, "cellar", "mcptape", "1.2.3", "bin", "mcptape")
		if err := os.MkdirAll(filepath.Dir(versioned), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(bin, versioned); err != nil {
			t.Fatal(err)
		}
		linkDir := filepath.Join(tmp, "usr-local-bin")
		if err := os.MkdirAll(linkDir, 0o755); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(linkDir, "mcptape")
		if err := os.Symlink(versioned, link); err != nil {
			t.Skipf("no symbolic links here: %v", err)
		}
		cfg := filepath.Join(tmp, "linked.json")
		text := `{"mcpServers": {"s": {"command": "node", "args": ["server.js"]}}}` + "\n"
		// Without HOME, run by the bare name on PATH, as a shell would.
		noHome := []string{"PATH=" + linkDir + string(os.PathListSeparator) + os.Getenv("PATH")}
		for _, how := range []struct {
			name, program string
			args          []string
		}{
			{"by the link's path", link, nil},
			{"by its name on PATH", "/bin/sh", []string{"-c", `exec mcptape "$@"`, "sh"}},
		} {
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			c2 := &cliEnv{t: t, dir: proj, env: noHome}
			code, out, errOut := c2.runProgram(how.program, append(how.args, "attach", "cursor", "s", "--config", cfg)...)
			if code != 0 {
				t.Fatalf("%s: attach exit %d: %s%s", how.name, code, out, errOut)
			}
			command, args, _ := entry(t, cfg, "s")
			if command != link {
				t.Errorf("%s: the entry runs %s; want the link the user runs, %s (not the versioned file)", how.name, command, link)
			}
			if len(args) < 5 || args[3] != "--data" || !filepath.IsAbs(args[4]) {
				t.Errorf("%s: without HOME the entry's args are %q; want an absolute --data", how.name, args)
			}
			if want := "To undo: mcptape detach cursor s --config " + cfg + "."; !strings.Contains(out, want) {
				t.Errorf("%s: attach with --config does not print %q:\n%s", how.name, want, out)
			}
			if code, out, errOut := c2.runProgram(link, "detach", "cursor", "s", "--config", cfg); code != 0 || string(readFile(t, cfg)) != text {
				t.Errorf("detach: %d %s%s", code, out, errOut)
			}
			os.Remove(cfg + ".mcptape-backup")
			os.Remove(clientconfig.StatePath(cfg))
		}
	})

	t.Run("attach --all while a dashboard holds the store and a url server is configured", func(t *testing.T) {
		data := filepath.Join(tmp, "dash-data")
		cfg := filepath.Join(tmp, "cursor.json")
		text := `{"mcpServers": {"remote": {"url": "https://mcp.example.com/mcp"}, "local": {"command": "node", "args": ["server.js"]}}}` + "\n"
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		dash := exec.Command(bin, "dashboard", "--data", data, "--listen", "127.0.0.1:0")
		dash.Env = env
		var dashOut syncBuffer
		dash.Stdout, dash.Stderr = &dashOut, &dashOut
		// A store for the dashboard to open.
		if code, _, errOut := c.run("demo", "--data", data); code != 0 {
			t.Fatalf("demo: %s", errOut)
		}
		if err := dash.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = dash.Process.Kill(); _ = dash.Wait() }()
		if !dashOut.await(20*time.Second, nil, func(out string) bool { return strings.Contains(out, "dashboard of") }) {
			t.Fatalf("the dashboard did not start:\n%s", dashOut.String())
		}
		code, out, errOut := c.run("attach", "cursor", "--all", "--config", cfg, "--data", data)
		if code != 0 {
			t.Errorf("attach --all: exit %d:\n%s%s", code, out, errOut)
		}
		if command, _, _ := entry(t, cfg, "local"); command != bin {
			t.Errorf("the stdio server was not attached: it runs %s", command)
		}
		for _, want := range []string{
			"local: attached (the client now starts `mcptape wrap … -- node server.js`)",
			"remote: skipped: it is an HTTP server (https://mcp.example.com/mcp); " + data + " is held by `mcptape dashboard` (pid " + strconv.Itoa(dash.Process.Pid) + ")",
			"start `mcptape record --routes --data " + data + "`",
			"then run `mcptape attach cursor remote --config " + cfg + " --data " + data + "`",
			"The attached stdio servers now run through `mcptape wrap`",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("attach output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "The attached HTTP servers") || strings.Contains(out, "-- ''") {
			t.Errorf("attach speaks of an HTTP server it did not attach:\n%s", out)
		}
		code, out, errOut = c.run("record", "--routes", "--data", data, "--listen", "127.0.0.1:0", "--dashboard", "off")
		if code == 0 || !strings.Contains(errOut, "is open in `mcptape dashboard` (pid "+strconv.Itoa(dash.Process.Pid)) || !strings.Contains(errOut, "stop the dashboard") {
			t.Errorf("record --routes on a directory the dashboard holds: exit %d:\n%s%s", code, out, errOut)
		}
	})

	t.Run("go run is refused", func(t *testing.T) {
		// A client would launch the temporary binary later, long gone.
		goEnv := append(slices.Clone(env), "GOCACHE="+goEnvValue(t, "GOCACHE"), "GOMODCACHE="+goEnvValue(t, "GOMODCACHE"), "GOTOOLCHAIN=local")
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		c2 := &cliEnv{t: t, dir: wd, env: goEnv}
		code, out, errOut := c2.runProgram("go", "run", ".", "attach", "claude-desktop", "filesystem")
		if code == 0 || !strings.Contains(errOut, "temporary build") {
			t.Errorf("go run … attach: exit %d:\n%s%s", code, out, errOut)
		}
		if got := readFile(t, desktop); string(got) != desktopConfig {
			t.Errorf("the config changed:\n%s", got)
		}
	})

	t.Run("an attached server runs through wrap as the client launches it, and is recorded", func(t *testing.T) {
		cfg := filepath.Join(tmp, "fixture.json")
		text := `{"mcpServers": {"fixture": {"command": "` + bin + `", "args": ["fixture", "server", "--stdio"]}}}` + "\n"
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(tmp, "recordings")
		if code, _, errOut := c.run("attach", "claude-desktop", "fixture", "--config", cfg, "--data", data); code != 0 {
			t.Fatalf("attach: exit %d: %s", code, errOut)
		}
		command, args, _ := entry(t, cfg, "fixture")
		// Launched as the client would: the entry's command and args.
		cmd := exec.Command(command, args...)
		cmd.Env = env
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		outPipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		watchdog(t, cmd, "the attached server", nil)
		lc := &lineClient{in: in, out: bufio.NewReader(outPipe)}
		lc.call(t, 1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-ai","version":"0.1.0"}}`)
		lc.notify(t, "notifications/initialized")
		if got := lc.call(t, 2, "tools/call", `{"name":"echo","arguments":{"text":"through the config"}}`); !strings.Contains(got, "through the config") {
			t.Errorf("echo through the attached entry: %s", got)
		}
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the attached server: %v", err)
		}
		code, out, errOut := c.run("ls", "--data", data, "--json")
		if code != 0 {
			t.Fatalf("ls: exit %d: %s", code, errOut)
		}
		var s capture.Session
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil {
			t.Fatalf("ls --json: %v\n%s", err, out)
		}
		if s.Leg != capture.LegStdio || s.Route != "fixture" || s.Client.Name != "claude-ai" || s.Calls != 2 {
			t.Errorf("recorded session: leg %s route %q client %q calls %d", s.Leg, s.Route, s.Client.Name, s.Calls)
		}
		if code, _, errOut := c.run("detach", "claude-desktop", "fixture", "--config", cfg); code != 0 {
			t.Fatalf("detach: exit %d: %s", code, errOut)
		}
		if got := readFile(t, cfg); string(got) != text {
			t.Errorf("detach did not restore the config:\n%s", got)
		}
	})
}

func goEnvValue(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
