package main

import (
	"strings"
	"testing"
)

// What a stdio server wrote to stderr is shown in `show` (each row quotes
// its line; they were empty) and `show --tree` (among the calls, in time
// order), and both end with how the server ended. A line with terminal
// control characters is shown escaped.
func TestShowStderrRows(t *testing.T) {
	data := t.TempDir()
	cmd := mcptapeCmd(t, "wrap", "--data", data, "--name", "chatty", "--", "sh", "-c",
		`read l; echo 'weather server got a ping' >&2; echo '{"jsonrpc":"2.0","id":1,"result":{}}'; sleep 0.2; printf 'red \033[31malert\n' >&2; exit 3`)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	_ = cmd.Run()
	s, _ := routeSession(t, data, "chatty")
	code, out, e := mcptape(t, "show", "--data", data, s.ID)
	if code != 0 {
		t.Fatalf("show: %d %s", code, e)
	}
	for _, want := range []string{`stderr   -       -   25    "weather server got a ping"`, `"red \x1b[31malert"`, "exit     -       -   -     exited with code 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	code, out, e = mcptape(t, "show", "--tree", "--data", data, s.ID)
	if code != 0 {
		t.Fatalf("show --tree: %d %s", code, e)
	}
	lines := strings.Split(out, "\n")
	find := func(sub string) int {
		for i, l := range lines {
			if strings.Contains(l, sub) {
				return i
			}
		}
		t.Errorf("show --tree lacks %q:\n%s", sub, out)
		return -1
	}
	call, first, second, exit := find("ping [success]"), find("stderr: weather server got a ping"), find("stderr: red ?[31malert"), find("server process: exited with code 3")
	if !(call < first && first < second && second < exit) {
		t.Errorf("show --tree: the stderr lines, the call and the exit are not in order (%d %d %d %d):\n%s", first, call, second, exit, out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("show --tree printed a raw escape:\n%q", out)
	}
}

// `ls` where nothing was recorded says how to begin: attach for a client's
// stdio servers (Claude Desktop's users need that), record for an HTTP one.
func TestLsOnAnEmptyMachine(t *testing.T) {
	for _, data := range []string{t.TempDir() + "/none", t.TempDir()} {
		code, out, e := mcptape(t, "ls", "--data", data)
		if !strings.Contains(out+e, "mcptape attach CLIENT --all --data "+data) || !strings.Contains(out+e, "mcptape record --data "+data+" --upstream URL") {
			t.Errorf("ls --data %s: %d\n%s%s; want attach and record suggested", data, code, out, e)
		}
	}
}

// `replay server -h` names --stdio in its usage line.
func TestReplayServerUsageNamesStdio(t *testing.T) {
	_, out, e := mcptape(t, "replay", "server", "-h")
	if first, _, _ := strings.Cut(out+e, "\n"); !strings.Contains(first, "--stdio") {
		t.Errorf("replay server -h's usage line: %q", first)
	}
}
