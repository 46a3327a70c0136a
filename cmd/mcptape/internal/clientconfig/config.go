package clientconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Transport is how a client reaches a server.
type Transport int

const (
	// Stdio is a local server the client launches: "command" and "args".
	Stdio Transport = iota + 1
	// HTTP is a remote server the client connects to: "url".
	HTTP
	// Unknown is an entry with neither a command nor a url.
	Unknown
)

func (t Transport) String() string {
	switch t {
	case Stdio:
		return "stdio"
	case HTTP:
		return "url"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Transport(%d)", int(t))
}

// Server is one server entry of a config, as read.
type Server struct {
	Name      string
	Transport Transport
	// Command and Args are what the entry runs (Stdio).
	Command string
	Args    []string
	// Env is the entry's "env", in file order; a value that is not a
	// string is given as its JSON text.
	Env []EnvVar
	// URL is the entry's "url" (HTTP).
	URL string
	// Headers names the entry's "headers" (their values are secrets more
	// often than not, so they are not kept).
	Headers []string
	// Wrapped is set when the entry runs through `mcptape wrap`: what it
	// wraps.
	Wrapped *Wrapped
	// Upstream is set when an HTTP entry goes through a recorder's route
	// (URL is the route's): the server's own url it replaced, as the state
	// file beside the config remembers it.
	Upstream string
	// Problem says why the entry cannot be attached; empty when it can.
	Problem string
}

// Attached reports whether the server goes through mcptape: a stdio
// server through `mcptape wrap`, an HTTP one through a recorder's route.
func (s *Server) Attached() bool { return s.Wrapped != nil || s.Upstream != "" }

// EnvVar is one member of an entry's "env".
type EnvVar struct{ Name, Value string }

// Wrapped is what an attached entry's `mcptape wrap` arguments say.
type Wrapped struct {
	// Executable is the mcptape the client launches.
	Executable string
	// Name and Data are wrap's --name and --data ("" when absent).
	Name, Data string
	// Command and Args are the server's own command line.
	Command string
	Args    []string
}

// ConfigError is a config file that cannot be read as the client's config.
// Nothing is ever written to such a file.
type ConfigError struct {
	Path string
	// Syntax is set when the file is not valid JSON.
	Syntax *SyntaxError
	// Msg describes any other problem.
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Syntax != nil {
		return fmt.Sprintf("%s is not valid JSON: %v; fix it (the client cannot read it either) and run again; nothing was changed", e.Path, e.Syntax)
	}
	return fmt.Sprintf("%s: %s; nothing was changed", e.Path, e.Msg)
}

func (e *ConfigError) Unwrap() error {
	if e.Syntax != nil {
		return e.Syntax
	}
	return nil
}

// config is one config file held in memory.
type config struct {
	path  string
	data  []byte
	root  *value
	mode  fs.FileMode
	jsonc bool
}

// maxConfigSize bounds what is read: ~/.claude.json grows with history, but
// not to this.
const maxConfigSize = 64 << 20

// load reads and parses the config at path. A missing file is an error that
// wraps fs.ErrNotExist.
func load(path string, jsonc bool) (*config, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &ConfigError{Path: path, Msg: "not a regular file"}
	}
	if fi.Size() > maxConfigSize {
		return nil, &ConfigError{Path: path, Msg: fmt.Sprintf("%d bytes, too large for a client config", fi.Size())}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseConfig(path, data, fi.Mode().Perm(), jsonc)
}

func parseConfig(path string, data []byte, mode fs.FileMode, jsonc bool) (*config, error) {
	root, err := parseJSON(data, jsonc)
	if err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			return nil, &ConfigError{Path: path, Syntax: se}
		}
		return nil, err
	}
	if root.kind != kindObject {
		return nil, &ConfigError{Path: path, Msg: "the top level is not a JSON object"}
	}
	return &config{path: path, data: data, root: root, mode: mode, jsonc: jsonc}, nil
}

// serversOf finds loc's servers object in c: the object (nil when the file
// has none yet) and the member names that lead to it from the top.
func (c *config) serversOf(loc Location) (*value, []string, error) {
	keys := []string{loc.Client.serversKey()}
	obj := c.root
	if loc.Scope == ScopeLocal {
		projects, err := c.step(obj, nil, "projects")
		if err != nil || projects == nil {
			return nil, nil, err
		}
		key := nearestProject(projects, loc.Project)
		if key == "" {
			return nil, nil, nil
		}
		p, err := c.step(projects, []string{"projects"}, key)
		if err != nil || p == nil {
			return nil, nil, err
		}
		obj, keys = p, []string{"projects", key, "mcpServers"}
	}
	s, err := c.step(obj, keys[:len(keys)-1], keys[len(keys)-1])
	if err != nil {
		return nil, nil, err
	}
	return s, keys, nil
}

// step returns obj's member key, which must be an object; nil when absent.
func (c *config) step(obj *value, at []string, key string) (*value, error) {
	m := obj.lookup(key)
	if m == nil {
		return nil, nil
	}
	where := strings.Join(append(append([]string(nil), at...), key), " › ")
	if obj.count(key) > 1 {
		return nil, &ConfigError{Path: c.path, Msg: fmt.Sprintf("%q appears more than once; remove all but one", where)}
	}
	if m.val.kind == kindNull {
		return nil, nil
	}
	if m.val.kind != kindObject {
		line, col := position(c.data, m.val.start)
		return nil, &ConfigError{Path: c.path, Msg: fmt.Sprintf("%q (line %d, column %d) is not a JSON object", where, line, col)}
	}
	return m.val, nil
}

// nearestProject is the key of projects that is dir or its nearest parent.
// Claude Code writes the keys with forward slashes on every OS.
func nearestProject(projects *value, dir string) string {
	for dir != "" {
		for _, k := range []string{dir, filepath.ToSlash(dir)} {
			if projects.lookup(k) != nil {
				return k
			}
		}
		parent := parentDir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// entry is one server entry of a config, with where its parts are.
type entry struct {
	Server
	m *member
	// command, args, url: the entry's members of those names, or nil.
	command, args, url *member
	// pointer is the entry's JSON Pointer (RFC 6901) in the file.
	pointer string
	// src is the text the offsets refer to for an entry parsed on its own
	// (a saved one); empty for an entry of a file.
	src string
}

func (e *entry) obj() *value { return e.m.val }

// entries reads the servers of loc. A file without a servers object has
// none. A name that appears twice is refused.
func (c *config) entries(loc Location) ([]*entry, error) {
	servers, keys, err := c.serversOf(loc)
	if err != nil || servers == nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []*entry
	for i := range servers.members {
		m := &servers.members[i]
		if seen[m.key] {
			line, col := position(c.data, m.keyStart)
			return nil, &ConfigError{Path: c.path, Msg: fmt.Sprintf("the server %q is defined twice (again at line %d, column %d); remove one", m.key, line, col)}
		}
		seen[m.key] = true
		out = append(out, c.readEntry(m, pointer(append(append([]string(nil), keys...), m.key))))
	}
	return out, nil
}

// pointer is the JSON Pointer of a path of member names.
func pointer(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(k))
	}
	return b.String()
}

func (c *config) readEntry(m *member, ptr string) *entry {
	e := &entry{Server: Server{Name: m.key}, m: m, pointer: ptr}
	v := m.val
	if v.kind != kindObject {
		e.Transport = Unknown
		e.Problem = "its entry is not a JSON object"
		return e
	}
	for _, key := range []string{"command", "args", "env", "url", "type", "headers"} {
		if v.count(key) > 1 {
			e.Transport = Unknown
			e.Problem = fmt.Sprintf("its entry has %q more than once", key)
			return e
		}
	}
	e.command, e.args = v.lookup("command"), v.lookup("args")
	if env := v.lookup("env"); env != nil && env.val.kind == kindObject {
		for _, ev := range env.val.members {
			val := ev.val.str
			if ev.val.kind != kindString {
				val = string(c.data[ev.val.start:ev.val.end])
			}
			e.Env = append(e.Env, EnvVar{Name: ev.key, Value: val})
		}
	}
	if h := v.lookup("headers"); h != nil && h.val.kind == kindObject {
		for _, hm := range h.val.members {
			e.Headers = append(e.Headers, hm.key)
		}
	}
	typ := ""
	if t := v.lookup("type"); t != nil && t.val.kind == kindString {
		typ = t.val.str
	}
	url := v.lookup("url")
	e.url = url
	switch {
	case e.command != nil:
		e.Transport = Stdio
		if e.command.val.kind != kindString || e.command.val.str == "" {
			e.Problem = `its "command" is not a non-empty string`
			return e
		}
		e.Command = e.command.val.str
		if e.args != nil {
			switch e.args.val.kind {
			case kindNull:
			case kindArray:
				for _, a := range e.args.val.elems {
					if a.kind != kindString {
						e.Problem = `its "args" holds a value that is not a string`
						return e
					}
					e.Args = append(e.Args, a.str)
				}
			default:
				e.Problem = `its "args" is not an array`
				return e
			}
		}
		if w, ok := parseWrap(e.Command, e.Args); ok {
			e.Wrapped = w
		}
	case url != nil || typ == "http" || typ == "sse" || typ == "streamable-http" || typ == "streamableHttp":
		e.Transport = HTTP
		if url != nil && url.val.kind == kindString {
			e.URL = url.val.str
		}
	default:
		e.Transport = Unknown
		e.Problem = `its entry has neither a "command" nor a "url"`
	}
	return e
}

// isMcptape reports whether command names an mcptape executable: its file
// name has "mcptape" in it (mcptape, mcptape.exe, mcptape-dev).
func isMcptape(command string) bool {
	base := command[strings.LastIndexAny(command, `/\`)+1:]
	return strings.Contains(strings.ToLower(base), "mcptape")
}

// parseWrap reads `mcptape wrap [--name N] [--data D] [other flags] --
// COMMAND ARGS...`; ok is false for anything else.
func parseWrap(command string, args []string) (*Wrapped, bool) {
	if !isMcptape(command) || len(args) == 0 || args[0] != "wrap" {
		return nil, false
	}
	w := &Wrapped{Executable: command}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 >= len(args) {
				return nil, false
			}
			w.Command, w.Args = args[i+1], append([]string{}, args[i+2:]...)
			return w, true
		}
		if !strings.HasPrefix(a, "-") {
			return nil, false
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if (name == "name" || name == "data") && !hasVal {
			if i+1 >= len(args) {
				return nil, false
			}
			i++
			val = args[i]
		}
		switch name {
		case "name":
			w.Name = val
		case "data":
			w.Data = val
		}
	}
	return nil, false
}
