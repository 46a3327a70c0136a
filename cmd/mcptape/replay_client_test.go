package main

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/fixtures"
)

// shout rewrites the echo tool's result on its way out (same length, so
// Content-Length stays right).
type shout struct{ http.ResponseWriter }

func (s shout) Write(b []byte) (int, error) {
	_, err := s.ResponseWriter.Write([]byte(strings.ReplaceAll(string(b), `"text":"hello, tape"`, `"text":"HELLO, TAPE"`)))
	return len(b), err
}
func (s shout) Flush()                      { _ = http.NewResponseController(s.ResponseWriter).Flush() }
func (s shout) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func fixtureServer(t *testing.T, wrap bool) string {
	t.Helper()
	h := fixtures.Handler(nil)
	if wrap {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner.ServeHTTP(shout{w}, r) })
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL
}

func TestReplayClientCommand(t *testing.T) {
	src := demoStore(t)
	tape := filepath.Join(t.TempDir(), "demo.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", src, "-o", tape, "-q"); code != 0 {
		t.Fatal(errOut)
	}

	// Against the server it was recorded from: no difference, exit 0.
	code, out, errOut := mcptape(t, "replay", "client", "--tape", tape, "--target", fixtureServer(t, false))
	if code != 0 || !strings.Contains(out, "PASS: 2 session(s)") || strings.Contains(out, "DIFF") {
		t.Fatalf("replay client against the fixture server: exit %d\n%s%s", code, out, errOut)
	}

	// Against a server whose echo changed: the diff, exit 1, and JUnit.
	junit := filepath.Join(t.TempDir(), "replay.xml")
	code, out, errOut = mcptape(t, "replay", "client", "--tape", tape, "--target", fixtureServer(t, true), "--junit", junit)
	if code != exitError {
		t.Fatalf("against a changed server: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"DIFF", "tools/call echo", "result.content[0].text", `recorded: "hello, tape"`, `live:     "HELLO, TAPE"`, "FAIL: 2 session(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "differs from the recording: 2 problem(s)") {
		t.Errorf("stderr: %s", errOut)
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the JUnit file does not parse: %v\n%s", err, b)
	}
	cases := 0
	for _, s := range doc.Suites {
		cases += len(s.Cases)
	}
	if len(doc.Suites) != 2 || doc.Failures != 2 || doc.Errors != 0 || doc.Tests != cases || cases < 40 {
		t.Errorf("JUnit: %d suites, %d tests (%d cases), %d failures, %d errors", len(doc.Suites), doc.Tests, cases, doc.Failures, doc.Errors)
	}

	// The changed path ignored, one session only: exit 0.
	code, out, errOut = mcptape(t, "replay", "client", "--tape", tape, "--target", fixtureServer(t, true),
		"--ignore", "result.content[0].text", "--session", strings.Fields(out)[1][:20], "-v")
	if code != 0 || !strings.Contains(out, "PASS: 1 session(s)") || !strings.Contains(out, "ok     #") {
		t.Errorf("with --ignore and --session: exit %d\n%s%s", code, out, errOut)
	}

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--target", "http://127.0.0.1:1"}, "--tape is required"},
		{[]string{"--tape", tape}, "--target is required"},
		{[]string{"--tape", tape, "--target", "http://127.0.0.1:1", "--ignore", "result..text"}, "--ignore: bad ignore path"},
		{[]string{"--tape", tape, "--target", "http://127.0.0.1:1", "--session", "nosuch"}, `--session: no such session in the tape: "nosuch"`},
		{[]string{"--tape", tape, "--target", "http://127.0.0.1:1", "--header", "nocolon"}, "want 'Name: value'"},
	} {
		code, _, errOut := mcptape(t, append([]string{"replay", "client"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.says) {
			t.Errorf("replay client %q: exit %d, %s", tc.args, code, errOut)
		}
	}
	if code, _, errOut := mcptape(t, "replay", "client", "--tape", tape, "--target", "ftp://x"); code != exitError || !strings.Contains(errOut, "not an http(s) URL") {
		t.Errorf("bad target: exit %d, %s", code, errOut)
	}
}

// TestReplayClientStrict: a server whose sampling prompt changed gets the
// testing profile's answer, not the recorded answer to the old prompt;
// --strict counts that as a difference of its call.
func TestReplayClientStrict(t *testing.T) {
	src := demoStore(t)
	tape := filepath.Join(t.TempDir(), "demo.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", src, "-o", tape, "-q"); code != 0 {
		t.Fatal(errOut)
	}
	profile := filepath.Join("..", "..", "replay", "testdata", "profiles", "default.json")
	inner := fixtures.Handler(nil)
	changed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(rewrite{w, strings.NewReplacer("Say hello to the tape.", "Say HELLO to the tape.")}, r)
	}))
	t.Cleanup(func() { changed.CloseClientConnections(); changed.Close() })

	code, out, errOut := mcptape(t, "replay", "client", "--tape", tape, "--target", changed.URL, "--profile", profile, "--strict")
	if code != exitError {
		t.Fatalf("--strict against a changed prompt: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"tools/call sample", "answers[0]", "no recorded request matches the live sampling/createMessage", "answered by the testing profile"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = mcptape(t, "replay", "client", "--tape", tape, "--target", fixtureServer(t, false), "--profile", profile, "--strict")
	if code != 0 || strings.Contains(out, "answers[") {
		t.Errorf("--strict against the recorded server: exit %d\n%s%s", code, out, errOut)
	}
}

// rewrite replaces strings in what a handler writes (of the same length,
// so Content-Length stays right).
type rewrite struct {
	http.ResponseWriter
	r *strings.Replacer
}

func (w rewrite) Write(b []byte) (int, error) {
	_, err := w.ResponseWriter.Write([]byte(w.r.Replace(string(b))))
	return len(b), err
}
func (w rewrite) Flush()                      { _ = http.NewResponseController(w.ResponseWriter).Flush() }
func (w rewrite) Unwrap() http.ResponseWriter { return w.ResponseWriter }
