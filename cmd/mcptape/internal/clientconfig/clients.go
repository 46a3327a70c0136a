package clientconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Client is an MCP client application whose config file lists the servers
// it launches.
type Client int

const (
	// ClaudeDesktop is Anthropic's desktop app: one claude_desktop_config.json.
	ClaudeDesktop Client = iota + 1
	// ClaudeCode is Anthropic's CLI: user and local servers in ~/.claude.json,
	// project servers in the project's .mcp.json.
	ClaudeCode
	// Cursor is the Cursor editor: ~/.cursor/mcp.json and a project's
	// .cursor/mcp.json.
	Cursor
	// VSCode is Visual Studio Code: a workspace's .vscode/mcp.json and the
	// user profile's mcp.json, under the key "servers", in JSON with comments.
	VSCode
)

// Clients lists every client, in the order `mcptape clients` shows them.
func Clients() []Client { return []Client{ClaudeDesktop, ClaudeCode, Cursor, VSCode} }

// String is the client's name on the command line.
func (c Client) String() string {
	switch c {
	case ClaudeDesktop:
		return "claude-desktop"
	case ClaudeCode:
		return "claude-code"
	case Cursor:
		return "cursor"
	case VSCode:
		return "vscode"
	}
	return fmt.Sprintf("Client(%d)", int(c))
}

// Title is the client's name as its users know it.
func (c Client) Title() string {
	switch c {
	case ClaudeDesktop:
		return "Claude Desktop"
	case ClaudeCode:
		return "Claude Code"
	case Cursor:
		return "Cursor"
	case VSCode:
		return "VS Code"
	}
	return c.String()
}

// Restart tells a user how to make the client pick up a changed config.
func (c Client) Restart() string {
	switch c {
	case ClaudeDesktop:
		return "quit Claude Desktop completely and start it again (macOS: Claude › Quit Claude in the menu bar, or ⌘Q; Windows: right-click the Claude icon in the notification area › Quit); closing its window is not enough"
	case ClaudeCode:
		return "quit the running Claude Code sessions (/exit) and start `claude` again; a running session keeps the servers it started with"
	case Cursor:
		return "quit Cursor and start it again, or turn the server off and on in Cursor Settings › MCP"
	case VSCode:
		return "restart the server in VS Code: run “MCP: List Servers” from the Command Palette, pick the server, then Restart Server (or click Restart above its entry in mcp.json)"
	}
	return "restart the client"
}

// jsonc reports whether the client reads its config as JSON with comments.
func (c Client) jsonc() bool { return c == VSCode }

// serversKey is the top-level member that holds the servers.
func (c Client) serversKey() string {
	if c == VSCode {
		return "servers"
	}
	return "mcpServers"
}

// ParseClient returns the client of a command-line name.
func ParseClient(name string) (Client, error) {
	var names []string
	for _, c := range Clients() {
		if c.String() == name {
			return c, nil
		}
		names = append(names, c.String())
	}
	return 0, fmt.Errorf("unknown client %q; the clients are %s", name, strings.Join(names, ", "))
}

// Scope says which of a client's configs a Location is.
type Scope int

const (
	// ScopeUser is the per-user config, used in every project.
	ScopeUser Scope = iota + 1
	// ScopeProject is a config inside a project directory, often shared
	// through version control.
	ScopeProject
	// ScopeLocal is Claude Code's private per-project servers, kept in
	// ~/.claude.json under the project's path.
	ScopeLocal
)

func (s Scope) String() string {
	switch s {
	case ScopeUser:
		return "user"
	case ScopeProject:
		return "project"
	case ScopeLocal:
		return "local"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Location is one place a client reads servers from: a file, and where in
// it the servers object is.
type Location struct {
	Client Client
	Scope  Scope
	// Path is the config file's path.
	Path string
	// Project is, for ScopeLocal, the directory whose entry under
	// "projects" holds the servers: the nearest of the working directory
	// and its parents that has one. Empty otherwise.
	Project string
}

func (l Location) String() string {
	s := fmt.Sprintf("%s %s config %s", l.Client, l.Scope, l.Path)
	if l.Scope == ScopeLocal {
		s += fmt.Sprintf(" (for %s)", l.Project)
	}
	return s
}

// Env is what Locations needs from the machine; the zero value means this
// machine, this user and the current directory.
type Env struct {
	// GOOS is the operating system whose conventions apply; "" means
	// runtime.GOOS.
	GOOS string
	// Home is the user's home directory; "" means os.UserHomeDir.
	Home string
	// Dir is where project configs are looked up from (it and its
	// parents); "" means the working directory.
	Dir string
	// Getenv reads an environment variable; nil means os.Getenv.
	Getenv func(string) string
	// Glob lists the paths matching a pattern; nil means filepath.Glob.
	Glob func(pattern string) ([]string, error)
	// Exists reports whether a file exists; nil means os.Stat succeeds.
	Exists func(path string) bool
}

func (e *Env) fill() Env {
	var out Env
	if e != nil {
		out = *e
	}
	if out.GOOS == "" {
		out.GOOS = runtime.GOOS
	}
	if out.Home == "" {
		out.Home, _ = os.UserHomeDir()
	}
	if out.Dir == "" {
		out.Dir, _ = os.Getwd()
	}
	if out.Getenv == nil {
		out.Getenv = os.Getenv
	}
	if out.Glob == nil {
		out.Glob = filepath.Glob
	}
	if out.Exists == nil {
		out.Exists = func(p string) bool { _, err := os.Stat(p); return err == nil }
	}
	return out
}

// join joins path elements with the separator of e's operating system, so
// that the paths of another OS can be worked out (and tested) anywhere.
func (e Env) join(elem ...string) string {
	if e.GOOS == runtime.GOOS {
		return filepath.Join(elem...)
	}
	sep := "/"
	if e.GOOS == "windows" {
		sep = `\`
	}
	parts := make([]string, 0, len(elem))
	for i, p := range elem {
		if i > 0 {
			p = strings.TrimLeft(p, `/\`)
		}
		if i < len(elem)-1 {
			p = strings.TrimRight(p, `/\`)
		}
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, sep)
}

// appData is %APPDATA% (the roaming profile) on Windows.
func (e Env) appData() string {
	if d := e.Getenv("APPDATA"); d != "" {
		return d
	}
	return e.join(e.Home, "AppData", "Roaming")
}

// xdgConfig is $XDG_CONFIG_HOME, else ~/.config.
func (e Env) xdgConfig() string {
	if d := e.Getenv("XDG_CONFIG_HOME"); d != "" {
		return d
	}
	return e.join(e.Home, ".config")
}

// ClaudeDesktopPath is where Claude Desktop keeps its config on env's OS:
//   - macOS: ~/Library/Application Support/Claude/claude_desktop_config.json
//   - Windows: %LOCALAPPDATA%\Packages\Claude_*\LocalCache\Roaming\Claude\claude_desktop_config.json
//     for the packaged (MSIX) app, the default since 2026, when its package
//     folder exists; else %APPDATA%\Claude\claude_desktop_config.json
//   - Linux (community builds): $XDG_CONFIG_HOME/Claude/claude_desktop_config.json,
//     ~/.config/Claude/… by default
func ClaudeDesktopPath(env *Env) string {
	e := env.fill()
	const file = "claude_desktop_config.json"
	switch e.GOOS {
	case "darwin":
		return e.join(e.Home, "Library", "Application Support", "Claude", file)
	case "windows":
		if local := e.Getenv("LOCALAPPDATA"); local != "" {
			// The packaged app reads a virtualised copy of %APPDATA%;
			// a file written to the plain path is never seen by it.
			pkgs, _ := e.Glob(e.join(local, "Packages", "Claude_*"))
			slices.Sort(pkgs)
			for _, p := range pkgs {
				if dir := e.join(p, "LocalCache", "Roaming", "Claude"); e.Exists(dir) {
					return e.join(dir, file)
				}
			}
		}
		return e.join(e.appData(), "Claude", file)
	}
	return e.join(e.xdgConfig(), "Claude", file)
}

// ClaudeCodeUserPath is Claude Code's ~/.claude.json (on Windows
// %USERPROFILE%\.claude.json), or $CLAUDE_CONFIG_DIR/.claude.json when that
// variable is set.
func ClaudeCodeUserPath(env *Env) string {
	e := env.fill()
	if d := e.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return e.join(d, ".claude.json")
	}
	return e.join(e.Home, ".claude.json")
}

// VSCodeUserPath is the mcp.json of VS Code's default user profile:
// ~/Library/Application Support/Code/User/mcp.json on macOS,
// %APPDATA%\Code\User\mcp.json on Windows, $XDG_CONFIG_HOME/Code/User/mcp.json
// (~/.config/Code/User/mcp.json) on Linux.
func VSCodeUserPath(env *Env) string {
	e := env.fill()
	switch e.GOOS {
	case "darwin":
		return e.join(e.Home, "Library", "Application Support", "Code", "User", "mcp.json")
	case "windows":
		return e.join(e.appData(), "Code", "User", "mcp.json")
	}
	return e.join(e.xdgConfig(), "Code", "User", "mcp.json")
}

// Locations lists where c reads servers from, highest precedence first: when
// two define a server of the same name, the client runs the first one's.
// Project configs are those of the nearest directory, from env.Dir up, that
// has one (env.Dir's own when none does). Files need not exist.
func Locations(c Client, env *Env) []Location {
	e := env.fill()
	switch c {
	case ClaudeDesktop:
		return []Location{{Client: c, Scope: ScopeUser, Path: ClaudeDesktopPath(&e)}}
	case ClaudeCode:
		user := ClaudeCodeUserPath(&e)
		return []Location{
			{Client: c, Scope: ScopeLocal, Path: user, Project: e.Dir},
			{Client: c, Scope: ScopeProject, Path: e.project(".mcp.json")},
			{Client: c, Scope: ScopeUser, Path: user},
		}
	case Cursor:
		user := e.join(e.Home, ".cursor", "mcp.json")
		if project := e.project(".cursor", "mcp.json"); project != user {
			return []Location{
				{Client: c, Scope: ScopeProject, Path: project},
				{Client: c, Scope: ScopeUser, Path: user},
			}
		}
		return []Location{{Client: c, Scope: ScopeUser, Path: user}}
	case VSCode:
		return []Location{
			{Client: c, Scope: ScopeProject, Path: e.project(".vscode", "mcp.json")},
			{Client: c, Scope: ScopeUser, Path: VSCodeUserPath(&e)},
		}
	}
	return nil
}

// project finds rel in e.Dir or its nearest parent that has it, stopping
// below the home directory (whose .cursor/mcp.json, say, is the user
// config); e.Dir/rel when none has it.
func (e Env) project(rel ...string) string {
	at := func(dir string) string { return e.join(append([]string{dir}, rel...)...) }
	for dir := e.Dir; dir != e.Home; {
		if p := at(dir); e.Exists(p) {
			return p
		}
		parent := parentDir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return at(e.Dir)
}

func parentDir(dir string) string {
	trimmed := strings.TrimRight(dir, `/\`)
	i := strings.LastIndexAny(trimmed, `/\`)
	if i < 0 {
		return dir
	}
	if i == 0 || (i == 2 && trimmed[1] == ':') {
		return trimmed[:i+1]
	}
	return trimmed[:i]
}

// LocationsIn lists the Locations of c inside the file at path, for a
// config named on the command line (--config). A file named .claude.json is
// Claude Code's user config (its local servers for env.Dir, then its user
// servers); any other file is read as the client's project config, unless
// it is the client's user config.
func LocationsIn(c Client, path string, env *Env) []Location {
	e := env.fill()
	if c == ClaudeCode && filepath.Base(path) == ".claude.json" {
		return []Location{
			{Client: c, Scope: ScopeLocal, Path: path, Project: e.Dir},
			{Client: c, Scope: ScopeUser, Path: path},
		}
	}
	scope := ScopeProject
	if c == ClaudeDesktop {
		scope = ScopeUser
	}
	for _, l := range Locations(c, &e) {
		if l.Scope == ScopeUser && samePath(l.Path, path) {
			scope = ScopeUser
		}
	}
	return []Location{{Client: c, Scope: scope, Path: path}}
}

func samePath(a, b string) bool {
	if a == b {
		return true
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}
