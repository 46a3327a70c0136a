package replay_test

import (
	"strings"
	"testing"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/replay"
)

// The replay client matches the live server's requests (server→client
// requests, MRTR input requests) to recorded ones as the replay server
// matches client requests: a sampling request whose prompt changed gets the
// testing profile's answer, not the recorded answer to another prompt, and
// a strict replay reports it.
func TestReplayClientChangedServerRequestGoesToProfile(t *testing.T) {
	profile, err := replay.LoadProfile("testdata/profiles/default.json")
	if err != nil {
		t.Fatal(err)
	}
	// Same length, so Content-Length stays right.
	changed := func() *rewriting {
		return &rewriting{h: fixtures.Handler(nil), out: strings.NewReplacer("Say hello to the tape.", "Say HELLO to the tape.")}
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape := recordFixture(t, era.path)
			only := func(rep *replay.ClientReport) *replay.CallResult {
				t.Helper()
				c := callNamed(rep, "tools/call sample")
				if c == nil || c.Err != "" {
					t.Fatalf("sample: %+v\n%s", c, reportText(rep))
				}
				return c
			}
			sample := only(replayAgainst(t, tape, liveServer(t, changed()).URL, &replay.ClientOptions{Profile: profile}))
			if len(sample.Answers) != 1 || sample.Answers[0].From != "profile" {
				t.Errorf("a changed sampling request was answered from %+v, want the profile", sample.Answers)
			}
			if !strings.Contains(string(sample.Live), "mock answer to: Say HELLO to the tape.") {
				t.Errorf("the live result is not the profile's answer to the live prompt: %s", sample.Live)
			}
			for _, d := range sample.Diffs {
				if strings.HasPrefix(d.Path, "answers") {
					t.Errorf("a lenient replay reported the answer's source: %v", d)
				}
			}

			sample = only(replayAgainst(t, tape, liveServer(t, changed()).URL, &replay.ClientOptions{Profile: profile, Strict: true}))
			found := false
			for _, d := range sample.Diffs {
				if d.Path == "answers[0]" && strings.Contains(d.Recorded, "the recorded answer") && strings.Contains(d.Live, "the testing profile") &&
					strings.Contains(d.Live, "sampling/createMessage") {
					found = true
				}
			}
			if !found {
				t.Errorf("a strict replay does not report the unmatched sampling request: %v", sample.Diffs)
			}

			// Against the unchanged server every answer is the recorded one.
			rep := replayAgainst(t, tape, liveServer(t, nil).URL, &replay.ClientOptions{Profile: profile, Strict: true})
			if !rep.OK() {
				t.Errorf("a strict replay against the recorded server:\n%s", reportText(rep))
			}
			for _, s := range rep.Sessions {
				for _, c := range s.Calls {
					for _, a := range c.Answers {
						if a.From != "recording" {
							t.Errorf("%s: %s answered from %s against the recorded server", c.Title(), a.Method, a.From)
						}
					}
				}
			}
		})
	}
}

// hintChanged is the fixture server whose sample tool asks for another
// model: its sampling request's model hint is "claude-" where the
// recording's is "fixture" (same length), and its prompt is unchanged.
func hintChanged() *rewriting {
	return &rewriting{h: fixtures.Handler(nil), out: strings.NewReplacer(`{"name":"fixture"}`, `{"name":"claude-"}`)}
}

// sampleCall is the replay's tools/call sample, which must have run.
func sampleCall(t *testing.T, rep *replay.ClientReport) *replay.CallResult {
	t.Helper()
	c := callNamed(rep, "tools/call sample")
	if c == nil || c.Err != "" {
		t.Fatalf("sample: %+v\n%s", c, reportText(rep))
	}
	return c
}

// strictReportsUnmatched reports whether a strict replay's differences
// name the unmatched sampling request and who answered it.
func strictReportsUnmatched(c *replay.CallResult, how string) bool {
	for _, d := range c.Diffs {
		if d.Path == "answers[0]" && strings.Contains(d.Recorded, "the recorded answer") &&
			strings.Contains(d.Live, "no recorded request matches the live sampling/createMessage") && strings.Contains(d.Live, how) {
			return true
		}
	}
	return false
}

// A sampling request whose model hints changed (the prompt did not) is
// another request: the recorded answer, meant for the recorded hints, is
// not given; the testing profile answers it — by its override for the live
// hint — and a strict replay reports it.
func TestReplayClientChangedModelHintsGoesToProfile(t *testing.T) {
	profile, err := replay.LoadProfile("testdata/profiles/default.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape := recordFixture(t, era.path)
			sample := sampleCall(t, replayAgainst(t, tape, liveServer(t, hintChanged()).URL, &replay.ClientOptions{Profile: profile}))
			if len(sample.Answers) != 1 || sample.Answers[0].From != "profile" {
				t.Errorf("a sampling request with changed model hints was answered from %+v, want the profile", sample.Answers)
			}
			// The profile's claude-* override, for the live hint.
			if !strings.Contains(string(sample.Live), "Claude (mock) says: Say hello to the tape.") {
				t.Errorf("the live result is not the profile's answer for the live hint: %s", sample.Live)
			}
			if strictReportsUnmatched(sample, "") {
				t.Errorf("a lenient replay reported the answer's source: %v", sample.Diffs)
			}

			sample = sampleCall(t, replayAgainst(t, tape, liveServer(t, hintChanged()).URL, &replay.ClientOptions{Profile: profile, Strict: true}))
			if !strictReportsUnmatched(sample, "answered by the testing profile") {
				t.Errorf("a strict replay does not report the sampling request with changed model hints: %v", sample.Diffs)
			}
		})
	}
}

// With the manual sampling provider, a sampling request whose model hints
// changed goes to the person (ClientOptions.Manual), who is asked with the
// live hints; the person's answer reaches the server, and a strict replay
// reports the request.
func TestReplayClientChangedModelHintsGoesToPerson(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape := recordFixture(t, era.path)
			for _, strict := range []bool{false, true} {
				p := &person{}
				sample := sampleCall(t, replayAgainst(t, tape, liveServer(t, hintChanged()).URL, &replay.ClientOptions{Profile: manualProfile,
					Manual: p.ask, Strict: strict, Sessions: []string{tape.Sessions[0].Session.ID}}))
				if len(sample.Answers) != 1 || sample.Answers[0].From != "manual" {
					t.Errorf("strict=%v: answered from %+v, want a person", strict, sample.Answers)
				}
				if !strings.Contains(string(sample.Live), "a person typed this") {
					t.Errorf("strict=%v: the live result lacks the person's answer: %s", strict, sample.Live)
				}
				p.mu.Lock()
				asked := p.asked
				p.mu.Unlock()
				if len(asked) != 1 || !strings.Contains(asked[0], `"claude-"`) || !strings.Contains(asked[0], "Say hello to the tape.") {
					t.Errorf("strict=%v: the person was asked %q, want the live request once", strict, asked)
				}
				if got := strictReportsUnmatched(sample, "answered by a person"); got != strict {
					t.Errorf("strict=%v: the report names the unmatched request: %v; diffs %v", strict, got, sample.Diffs)
				}
			}
		})
	}
}
