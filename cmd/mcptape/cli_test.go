package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/fixtures"
)

// TestHelpOnEveryCommand: -h works for every command and subcommand,
// wherever it comes, and says how the command is used.
func TestHelpOnEveryCommand(t *testing.T) {
	var cases [][]string
	for _, c := range commands() {
		cases = append(cases, []string{c.name, "-h"})
	}
	cases = append(cases,
		[]string{"replay", "server", "-h"}, []string{"replay", "client", "--help"},
		[]string{"fixture", "server", "-h"}, []string{"fixture", "client", "-h"}, []string{"fixture", "oauth", "-h"},
		[]string{"ca", "init", "-h"}, []string{"ca", "path", "--help"},
		[]string{"metrics", "grafana", "-h"}, []string{"metrics", "-h"},
		[]string{"show", "SOME-SESSION", "-h"}, // after the argument, too
		[]string{"help", "export"},
	)
	for _, args := range cases {
		code, out, errOut := mcptape(t, args...)
		name := strings.Join(args[:len(args)-1], " ")
		switch args[0] {
		case "help":
			name = args[1]
		case "show":
			name = "show"
		}
		if code != exitOK || !strings.Contains(errOut+out, "usage: mcptape "+name) {
			t.Errorf("mcptape %s: exit %d, want 0 and its usage; stdout %q stderr %q", strings.Join(args, " "), code, out, errOut)
		}
		// The flag package takes back-quoted text in a flag's usage as the
		// name of its value: "-stdio mcptape wrap" instead of "-stdio".
		for _, line := range strings.Split(errOut+out, "\n") {
			head, _, _ := strings.Cut(line, "\t")
			if f := strings.Fields(head); len(f) > 2 && strings.HasPrefix(line, "  -") && !strings.HasPrefix(f[1], "'") {
				t.Errorf("mcptape %s: the flag line %q names its value with several words", strings.Join(args, " "), line)
			}
		}
		if strings.Count(errOut+out, "(default") > strings.Count(errOut+out, "\n  -") {
			t.Errorf("mcptape %s: a flag gives its default twice:\n%s", strings.Join(args, " "), errOut+out)
		}
	}
	// A group's -h lists its subcommands.
	if _, _, errOut := mcptape(t, "replay", "-h"); !strings.Contains(errOut, "mcptape replay server --tape FILE") || !strings.Contains(errOut, "mcptape replay client --tape FILE --target URL") {
		t.Errorf("replay -h does not list server and client:\n%s", errOut)
	}
}

// TestBadFlagValue: a mistake on the command line is one line that says
// what the flag wants, not the flag package's error twice around the whole
// flag list.
func TestBadFlagValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"record", "--upstream", "http://127.0.0.1:1/mcp", "--idle-gap", "5"}, `--idle-gap "5": needs a unit, e.g. 5m`},
		{[]string{"record", "--idle-gap", "soon"}, `--idle-gap "soon": want a duration such as 500ms, 30s, 5m or 1h30m`},
		{[]string{"ls", "--limit", "ten"}, `--limit "ten": want a whole number`},
		{[]string{"record", "--upstrem", "http://x"}, "unknown flag --upstrem; did you mean --upstream?"},
		{[]string{"ls", "--data"}, "--data needs a value"},
		{[]string{"replay", "client", "--timeout", "30"}, `--timeout "30": needs a unit, e.g. 30m`},
	} {
		code, out, errOut := mcptape(t, tc.args...)
		if code != exitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q; want %d and nothing", tc.args, code, out, exitUsage)
		}
		if strings.Count(errOut, tc.says) != 1 {
			t.Errorf("%q: stderr says\n%s\nwant %q once", tc.args, errOut, tc.says)
		}
		if lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1; lines > 2 || strings.Contains(errOut, "-log-level") {
			t.Errorf("%q: %d lines on stderr, want the error and where to find the usage:\n%s", tc.args, lines, errOut)
		}
	}
}

func TestUnknownCommandSuggests(t *testing.T) {
	for in, want := range map[string]string{"recrod": "did you mean `mcptape record`?", "dashbord": "did you mean `mcptape dashboard`?", "exprot": "did you mean `mcptape export`?", "shwo": "did you mean `mcptape show`?"} {
		code, _, errOut := mcptape(t, in)
		if code != exitUsage || !strings.Contains(errOut, want) || !strings.Contains(errOut, "mcptape help") {
			t.Errorf("mcptape %s: exit %d, %q; want a suggestion %q", in, code, errOut, want)
		}
	}
	if _, _, errOut := mcptape(t, "frobnicate"); strings.Contains(errOut, "did you mean") {
		t.Errorf("a far-off command got a suggestion: %q", errOut)
	}
	if _, _, errOut := mcptape(t, "replay", "sever"); !strings.Contains(errOut, "did you mean server?") {
		t.Errorf("replay sever: %q", errOut)
	}
}

// TestVersionFromBuildInfo builds the binary and checks that `mcptape
// version` prints the module version the Go toolchain recorded in it.
func TestVersionFromBuildInfo(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command")
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "mcptape")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	info, err := exec.Command(gobin, "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+mod\s+github.com/mcptape/mcptape\s+(\S+)`).FindSubmatch(info)
	if m == nil {
		t.Fatalf("go version -m shows no main module:\n%s", info)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "mcptape "+string(m[1])) {
		t.Errorf("mcptape version printed %q; the binary's build information says %s", got, m[1])
	}
	if rev := regexp.MustCompile(`vcs.revision=([0-9a-f]{12})`).FindSubmatch(info); rev != nil && !strings.Contains(string(out), string(rev[1])) {
		t.Errorf("mcptape version printed %q without the commit %s it was built from", out, rev[1])
	}
	// -ldflags -X still wins, for packagers.
	if version == "dev" {
		t.Error("version is still the placeholder dev")
	}
}

// TestReadCommandsCreateNoStore: ls, show, export and dashboard on a
// directory that holds no store say so and leave it as it was. (The
// dashboard owns an empty directory, for wraps to record into: see
// TestFiveWrapsOneStore.)
func TestReadCommandsCreateNoStore(t *testing.T) {
	for _, args := range [][]string{{"ls"}, {"show", "SOME-SESSION"}, {"export"}, {"dashboard", "--listen", "127.0.0.1:0"}} {
		missing := filepath.Join(t.TempDir(), "no-such-dir")
		empty := t.TempDir()
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("not a store"), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs := []string{missing, empty, other}
		if args[0] == "dashboard" {
			dirs = []string{missing, other}
		}
		for _, dir := range dirs {
			code, out, errOut := mcptape(t, append(args, "--data", dir)...)
			if code != exitError || !strings.Contains(errOut, "no store at "+dir) || strings.Contains(out, "dashboard of") {
				t.Errorf("%s --data %s: exit %d, stdout %q, stderr %q; want 1 and no store at the path", args[0], dir, code, out, errOut)
			}
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Errorf("%s created %s", args[0], missing)
		}
		if ents, _ := os.ReadDir(empty); len(ents) > 0 && args[0] != "dashboard" {
			t.Errorf("%s wrote %d files into an empty directory", args[0], len(ents))
		}
		if ents, _ := os.ReadDir(other); len(ents) != 1 {
			t.Errorf("%s wrote into a directory that is not a store: %d files now", args[0], len(ents))
		}
	}
}

// TestNotATapeSaysWhatItIs: a file that is not a tape is named for what it
// looks like, wherever a tape is read.
func TestNotATapeSaysWhatItIs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	har := write("session.har", `{"log":{"version":"1.2","creator":{"name":"mcptape"},"entries":[]}}`)
	profile := write("ci.json", `{"name":"ci","sampling":{"provider":"mock"}}`)
	empty := write("empty.json", "")
	store := filepath.Join(dir, "store")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"replay", "server", "--listen", "127.0.0.1:0", "--tape", har}, "this is a HAR file"},
		{[]string{"replay", "client", "--target", "http://127.0.0.1:1/mcp", "--tape", har}, "this is a HAR file"},
		{[]string{"import", "--data", store, har}, "this is a HAR file"},
		{[]string{"replay", "server", "--listen", "127.0.0.1:0", "--tape", profile}, "this is a testing profile; pass it with --profile"},
		{[]string{"import", "--data", store, empty}, "the file is empty"},
	} {
		code, _, errOut := mcptape(t, tc.args...)
		if code != exitError || !strings.Contains(errOut, tc.says) || strings.Contains(errOut, "Go value") {
			t.Errorf("%q: exit %d, %q; want it to say %q", tc.args, code, errOut, tc.says)
		}
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Error("import of a file that is not a tape created the store")
	}
}

// TestReplayClientStopsAfterFailedInitialize: against something that is
// not an MCP server, each session ends at its first failed opening call
// with one line that says so, instead of a failure per recorded call.
func TestReplayClientStopsAfterFailedInitialize(t *testing.T) {
	tape := recordTapeFile(t, fixtures.PathStateful, fixtures.ToolEcho, fixtures.ToolAdd, "list_tools")
	notMCP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<!doctype html><title>Not Found</title>"))
	}))
	defer notMCP.Close()
	code, out, errOut := mcptape(t, "replay", "client", "--tape", tape, "--target", notMCP.URL+"/mcp")
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	if n := strings.Count(out, "failed, so the rest of the session was not replayed; is --target the server's MCP endpoint?"); n != 1 {
		t.Errorf("the stop is said %d times, want once:\n%s%s", n, out, errOut)
	}
	if n := strings.Count(out, "ERROR"); n > 3 {
		t.Errorf("%d ERROR lines, want the opening call's and the stop only:\n%s", n, out)
	}
	if strings.Contains(out, "tools/call") {
		t.Errorf("calls after the failed opening were still sent:\n%s", out)
	}
}
