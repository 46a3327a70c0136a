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
