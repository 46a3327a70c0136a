package clientconfig

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `{
  "mcpServers": {
    "a": {"command": "a-server", "args": ["x"]},
    "b": {"command": "b-server"}
  }
}
`

var opts = &AttachOptions{Executable: "/opt/mcptape/bin/mcptape"}

func writeConfig(t *testing.T, dir, name, text string) (string, []Location) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, LocationsIn(ClaudeDesktop, path, &Env{Dir: dir})
}

func TestRefusesAFileChangedMeanwhile(t *testing.T) {
	path, _ := writeConfig(t, t.TempDir(), "c.json", sample)
	c, err := load(path, false)
	if err != nil {
		t.Fatal(err)
	}
	// The client rewrites its config between mcptape's read and write.
	theirs := strings.Replace(sample, "b-server", "b-server-2", 1)
	if err := os.WriteFile(path, []byte(theirs), 0o600); err != nil {
		t.Fatal(err)
	}
	err = replace(c, []byte(`{"mcpServers": {}}`))
	if err == nil || !strings.Contains(err.Error(), "changed while mcptape was editing it") {
		t.Fatalf("got %v, want a refusal", err)
	}
	if got, _ := os.ReadFile(path); string(got) != theirs {
		t.Errorf("the client's version was overwritten:\n%s", got)
	}
}

func TestSymlinkedConfigStaysALink(t *testing.T) {
	dir := t.TempDir()
	dotfiles := filepath.Join(dir, "dotfiles")
	if err := os.Mkdir(dotfiles, 0o755); err != nil {
		t.Fatal(err)
	}
	real, _ := writeConfig(t, dotfiles, "claude.json", sample)
	link := filepath.Join(dir, "claude_desktop_config.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	locs := LocationsIn(ClaudeDesktop, link, &Env{Dir: dir})
	if _, err := Attach(locs, []string{"a"}, opts); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the config is no longer a symbolic link: %v", err)
	}
	got, _ := os.ReadFile(real)
	if !bytes.Contains(got, []byte(`"wrap", "--name", "a"`)) {
		t.Errorf("the link's target was not attached:\n%s", got)
	}
	if _, err := Detach(locs, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(real); string(got) != sample {
		t.Errorf("detach did not restore the target:\n%s", got)
	}
}

func TestStateFileProblemsRefused(t *testing.T) {
	for _, tc := range []struct{ name, state, want string }{
		{"newer version", `{"version": 2, "entries": {}}`, "written by a newer mcptape"},
		{"damaged", `{"version": 1, "entries": `, "is damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, locs := writeConfig(t, t.TempDir(), "c.json", sample)
			if err := os.WriteFile(StatePath(path), []byte(tc.state), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Attach(locs, []string{"a"}, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if tc.name == "newer version" && !errors.Is(err, ErrStateVersion) {
				t.Errorf("%v does not wrap ErrStateVersion", err)
			}
			if got, _ := os.ReadFile(path); string(got) != sample {
				t.Errorf("the config changed:\n%s", got)
			}
			if _, err := os.Stat(BackupPath(path)); err == nil {
				t.Error("a backup was written for a refused attach")
			}
		})
	}
}

func TestNoConfig(t *testing.T) {
	dir := t.TempDir()
	locs := Locations(ClaudeCode, &Env{Home: dir, Dir: filepath.Join(dir, "proj"), Getenv: func(string) string { return "" }})
	_, err := Attach(locs, nil, opts)
	var nc *NoConfigError
	if !errors.As(err, &nc) || !strings.Contains(err.Error(), filepath.Join(dir, ".claude.json")) {
		t.Errorf("attach --all without a config: %v", err)
	}
	_, err = Attach(locs, []string{"x"}, opts)
	if err == nil || !strings.Contains(err.Error(), "no Claude Code config found") || !strings.Contains(err.Error(), "--config") {
		t.Errorf("attach NAME without a config: %v", err)
	}
}

func TestUnknownNameListsEveryConfigsNames(t *testing.T) {
	home := t.TempDir()
	proj := filepath.Join(home, "proj")
	if err := os.MkdirAll(filepath.Join(proj, ".cursor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".cursor"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, filepath.Join(proj, ".cursor"), "mcp.json", `{"mcpServers": {"p1": {"command": "x"}}}`)
	writeConfig(t, filepath.Join(home, ".cursor"), "mcp.json", `{"mcpServers": {"u1": {"command": "x"}, "u2": {"url": "http://h"}}}`)
	locs := Locations(Cursor, &Env{Home: home, Dir: proj})
	_, err := Attach(locs, []string{"p1", "nope"}, opts)
	var ue *UnknownServerError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "p1, u1, u2") {
		t.Fatalf("got %v, want the names of both configs", err)
	}
	// Nothing was attached: names are resolved before anything changes.
	if s, _ := Servers(locs[0]); s[0].Attached() {
		t.Error("p1 was attached although the command was refused")
	}
}

func TestDetachByNameWhereAttached(t *testing.T) {
	home := t.TempDir()
	proj := filepath.Join(home, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(home, ".claude.json")
	if err := os.WriteFile(user, []byte(`{"mcpServers": {"db": {"command": "user-db"}}, "projects": {"`+proj+`": {"mcpServers": {"db": {"command": "local-db"}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := &Env{Home: home, Dir: proj, Getenv: func(string) string { return "" }}
	locs := Locations(ClaudeCode, env)
	// Attach both scopes, then detach by name: both are put back.
	if _, err := Attach(locs, nil, opts); err != nil {
		t.Fatal(err)
	}
	reps, err := Detach(locs, []string{"db"})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || reps[0].Results[0].Action != Detached || reps[1].Results[0].Action != Detached {
		t.Fatalf("detach db: %+v", reps)
	}
	for _, loc := range []Location{locs[0], locs[2]} {
		s, err := Servers(loc)
		if err != nil || s[0].Attached() {
			t.Errorf("%s: %v %+v", loc, err, s)
		}
	}
}

func TestByteOrderMarkKept(t *testing.T) {
	text := "\xef\xbb\xbf" + sample
	path, locs := writeConfig(t, t.TempDir(), "c.json", text)
	if _, err := Attach(locs, []string{"a"}, opts); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.HasPrefix(got, []byte("\xef\xbb\xbf{")) {
		t.Errorf("attach lost the byte order mark:\n%q", got)
	}
	if _, err := Detach(locs, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != text {
		t.Errorf("not restored byte for byte:\n%q", got)
	}
}

func TestExecutableNamedOtherwiseRefused(t *testing.T) {
	path, locs := writeConfig(t, t.TempDir(), "c.json", sample)
	_, err := Attach(locs, []string{"a"}, &AttachOptions{Executable: "/usr/local/bin/recorder"})
	if err == nil || !strings.Contains(err.Error(), "rename it") {
		t.Fatalf("got %v", err)
	}
	// A renamed mcptape is still recognised: attaching twice wraps once.
	dev := &AttachOptions{Executable: "/home/ana/bin/mcptape-dev"}
	for range 2 {
		if _, err := Attach(locs, []string{"a"}, dev); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(path)
	if bytes.Count(got, []byte(`"wrap"`)) != 1 {
		t.Errorf("wrapped twice:\n%s", got)
	}
}
