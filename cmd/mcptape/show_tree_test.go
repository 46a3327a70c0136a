package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// recordFixtureClient runs `mcptape record` in front of the fixture server,
// drives the scripted client's steps only through it on the legacy
// endpoint, stops the recorder and returns the data directory.
func recordFixtureClient(t *testing.T, only ...string) string {
	t.Helper()
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	defer up.CloseClientConnections()
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data)
	proxyURL := r.wait(t, "point your MCP client at ")
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	rep, err := fixtures.RunClient(within(t, time.Minute), proxyURL, &fixtures.ClientOptions{HTTPClient: &http.Client{Transport: tr}, Only: only})
	if err != nil || failures(rep) != nil {
		t.Fatalf("client through record: %v %v", err, failures(rep))
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("record exited %d: %s", code, r.errOut.String())
	}
	return data
}

// `show SESSION --tree` prints each call with its clock time, status and
// duration, what it set off nested beneath with `[+offset]` from the call's
// start; `--tree --json` is the same tree as JSON.
func TestShowTree(t *testing.T) {
	data := recordFixtureClient(t, "echo", fixtures.ToolSample, fixtures.ToolSlow)
	code, lsOut, e := mcptape(t, "ls", "--data", data)
	if code != 0 {
		t.Fatalf("ls: %d %s", code, e)
	}
	var id string
	for _, line := range strings.Split(lsOut, "\n")[1:] {
		if strings.Contains(line, fixtures.ClientName) {
			id = strings.Fields(line)[0]
		}
	}
	if id == "" {
		t.Fatalf("ls shows no session of the fixture client:\n%s", lsOut)
	}
	code, text, e := mcptape(t, "show", "--data", data, id, "--tree")
	if code != 0 {
		t.Fatalf("show --tree: %d %s", code, e)
	}
	t.Logf("show --tree:\n%s", text)

	const clock, dur = `\d\d:\d\d:\d\d`, `(\d+µs|\d+ms|\d+\.\ds|\d+m\d+s)`
	root := regexp.MustCompile(`^\[[><*!]\] ` + clock + ` \S.*$`)
	call := regexp.MustCompile(`^\[>\] ` + clock + ` tools/call (\S+) \[success\] ` + dur + `$`)
	child := regexp.MustCompile(`^  \+-- ` + clock + ` (\S+).* \[\+` + dur + `\]$`)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var treeLines []string
	for i, l := range lines {
		if strings.HasPrefix(l, "[") {
			treeLines = lines[i:]
			break
		}
	}
	if len(treeLines) == 0 {
		t.Fatalf("show --tree printed no tree:\n%s", text)
	}
	calls := map[string]bool{}
	var underSample []string
	current := ""
	for _, l := range treeLines {
		switch {
		case call.MatchString(l):
			current = call.FindStringSubmatch(l)[1]
			calls[current] = true
		case root.MatchString(l):
			current = ""
		case strings.HasPrefix(l, "  +-- "):
			m := child.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("nested line %q lacks a clock time and an [+offset]", l)
				continue
			}
			if current == fixtures.ToolSample {
				underSample = append(underSample, m[1])
			}
		case strings.HasPrefix(l, " "):
			// results, notes, findings, deeper nesting
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	for _, want := range []string{"echo", fixtures.ToolSample, fixtures.ToolSlow} {
		if !calls[want] {
			t.Errorf("no line `[>] hh:mm:ss tools/call %s [success] duration`:\n%s", want, text)
		}
	}
	if len(underSample) != 1 || underSample[0] != protocol.MethodSampling {
		t.Errorf("under tools/call sample: %v, want its sampling/createMessage:\n%s", underSample, text)
	}

	code, js, e := mcptape(t, "show", "--data", data, "--tree", "--json", id)
	if code != 0 {
		t.Fatalf("show --tree --json: %d %s", code, e)
	}
	var tree capture.Tree
	if err := json.Unmarshal([]byte(js), &tree); err != nil {
		t.Fatalf("show --tree --json is not a tree: %v\n%s", err, js)
	}
	if tree.Session == nil || tree.Session.ID != id {
		t.Errorf("the JSON tree names session %+v, want %s", tree.Session, id)
	}
	// The JSON holds the same nodes: printed, it is the text tree.
	var again bytes.Buffer
	tree.WriteText(&again, nil)
	if got, want := again.String(), strings.Join(treeLines, "\n")+"\n"; got != want {
		t.Errorf("the JSON tree prints differently from show --tree:\n--- JSON tree\n%s--- show --tree\n%s", got, want)
	}
}
