package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// brokenTape writes a copy of testdata/client/tools.tape.json in which
// the first tools/call's result is a tool error and the second
// tools/call's answer is missing, and returns its path with those two
// calls' result seq and request seq.
func brokenTape(t *testing.T) (path string, failed, unanswered uint64) {
	t.Helper()
	tape, err := replay.LoadTape("testdata/client/tools.tape.json")
	if err != nil {
		t.Fatal(err)
	}
	ts := tape.Sessions[0]
	calls := 0
	var drop uint64
	for _, m := range ts.Messages {
		if m.Kind != protocol.KindResult || m.Method != protocol.MethodToolsCall || m.Direction != protocol.ServerToClient {
			continue
		}
		calls++
		switch calls {
		case 1:
			m.Raw = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"boom"}],"isError":true}}`, m.ID)
			m.Size, m.SSE = len(m.Raw), nil
			failed = m.Seq
		case 2:
			drop, unanswered = m.Seq, m.Links.Request
		}
	}
	if failed == 0 || drop == 0 {
		t.Fatal("the tape has fewer than two tools/call results")
	}
	ts.Messages = slices.DeleteFunc(ts.Messages, func(m *capture.Message) bool { return m.Seq == drop })
	path = filepath.Join(t.TempDir(), "broken.tape.json")
	var b bytes.Buffer
	if err := replay.WriteTape(&b, tape); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, failed, unanswered
}

// TestCheckTape: a tape with a tool error and an unanswered call fails the
// check with one problem each, located at the line of the message's
// record in the tape; AssertHealthy reports each as a test error.
func TestCheckTape(t *testing.T) {
	path, failed, unanswered := brokenTape(t)
	rep, err := replay.Check(context.Background(), nil, replay.TapeRecording(path))
	if err != nil {
		t.Fatal(err)
	}
	fs := rep.Failures()
	if rep.OK() || len(fs) != 2 {
		t.Fatalf("%d failures, want 2: %+v", len(fs), fs)
	}
	lines := strings.Split(mustRead(t, path), "\n")
	for _, c := range []struct {
		p    *replay.Problem
		rule string
		seq  uint64
		text string
	}{{fs[0], replay.RuleError, failed, `returned a tool error (isError): "boom"`}, {fs[1], replay.RuleUnanswered, unanswered, "got no answer"}} {
		if c.p.Rule != c.rule || c.p.Seq != c.seq || !strings.Contains(c.p.Text, c.text) {
			t.Errorf("problem %+v; want rule %s at #%d saying %q", c.p, c.rule, c.seq, c.text)
		}
		if c.p.Line < 1 || c.p.Line > len(lines) || !strings.Contains(lines[c.p.Line-1], fmt.Sprintf(`{"seq":%d,`, c.seq)) {
			t.Errorf("problem at #%d is located at line %d, which is not its record", c.seq, c.p.Line)
		}
	}
	var calls, failing int
	for _, c := range rep.Sessions[0].Calls {
		calls++
		if c.Failed() {
			failing++
		}
	}
	if calls != 6 || failing != 2 {
		t.Errorf("%d calls, %d failing; want 6 and 2", calls, failing)
	}

	rt := &recordingT{}
	replay.AssertHealthy(rt, path, nil)
	if len(rt.errors) != 2 || !strings.Contains(rt.errors[0], path+":") || !strings.Contains(rt.errors[0], "boom") {
		t.Errorf("AssertHealthy reported %q", rt.errors)
	}
	rt = &recordingT{}
	replay.AssertHealthy(rt, path, &replay.CheckOptions{FailOn: []string{replay.RuleLost}})
	if len(rt.errors) != 0 {
		t.Errorf("AssertHealthy failing on lost messages only: %q", rt.errors)
	}
}

// TestAssertSameRecording: a tape agrees with itself; against the broken
// copy each changed answer is a test error naming its path.
func TestAssertSameRecording(t *testing.T) {
	path, _, _ := brokenTape(t)
	rt := &recordingT{}
	replay.AssertSameRecording(rt, "testdata/client/tools.tape.json", "testdata/client/tools.tape.json", nil)
	if len(rt.errors) != 0 {
		t.Errorf("a tape differs from itself: %q", rt.errors)
	}
	rt = &recordingT{}
	rep := replay.AssertSameRecording(rt, "testdata/client/tools.tape.json", path, nil)
	got := strings.Join(rt.errors, "\n")
	for _, want := range []string{`result.isError: (absent) in testdata/client/tools.tape.json, true in ` + path, `result.content[0].text`, `answer: (absent)`} {
		if !strings.Contains(got, want) {
			t.Errorf("AssertSameRecording's errors lack %q:\n%s", want, got)
		}
	}
	if len(rep.Answers) != 2 {
		t.Errorf("%d answers changed, want 2: %+v", len(rep.Answers), rep.Answers)
	}
}

// recordingT is a testing.TB that keeps what a helper reports.
type recordingT struct {
	testing.TB
	errors []string
}

func (t *recordingT) Helper()                   {}
func (t *recordingT) Errorf(f string, a ...any) { t.errors = append(t.errors, fmt.Sprintf(f, a...)) }
func (t *recordingT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A test gates on a recording being healthy: no JSON-RPC errors or tool
// errors, no unanswered calls, no lost messages, no invalid frames,
// schema violations or tool-definition drift.
func ExampleAssertHealthy() {
	t := &exampleT{} // in a test: func TestX(t *testing.T)
	defer t.end()

	rep := replay.AssertHealthy(t, "testdata/client/tools.tape.json", nil)
	fmt.Println(rep.OK(), len(rep.Sessions[0].Calls), "calls")
	// Output:
	// true 6 calls
}

// A test compares the run it recorded with the tape kept in the
// repository: tools, prompts and resources, and every answer.
func ExampleAssertSameRecording() {
	t := &exampleT{}
	defer t.end()

	rep := replay.AssertSameRecording(t, "testdata/client/tools.tape.json", "testdata/client/tools.tape.json", nil)
	fmt.Println(rep.Differ(), rep.Compared, "calls compared")
	// Output:
	// false 9 calls compared
}
