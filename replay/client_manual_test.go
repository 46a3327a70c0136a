package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// forgetAnswers drops the client's answers from a tape's first session:
// legacy answers are c2s responses, 2026-07-28 ones travel in the retries.
func forgetAnswers(tape *replay.Tape) {
	ts := tape.Sessions[0]
	drop := map[uint64]bool{}
	for _, m := range ts.Messages {
		if m.Direction == protocol.ClientToServer && (m.Kind.IsResponse() || m.Links.Previous != 0) {
			drop[m.Seq] = true
		}
	}
	var kept []*capture.Message
	for _, m := range ts.Messages {
		if !drop[m.Seq] && !drop[m.Links.Request] {
			kept = append(kept, m)
		}
	}
	ts.Messages = kept
}

var manualProfile = &replay.Profile{Name: "manual", Sampling: &replay.SamplingProfile{Provider: replay.ProviderManual}}

// person is a Manual hook that answers like a person would, after a while.
type person struct {
	delay time.Duration
	// answer, when set, answers instead of the text reply.
	answer func(ctx context.Context, params json.RawMessage) (json.RawMessage, error)

	mu    sync.Mutex
	asked []string // the prompts, in order
}

func (p *person) ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if method != protocol.MethodSampling {
		return nil, errors.New("a person only samples here, not " + method)
	}
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(params, &req)
	p.mu.Lock()
	p.asked = append(p.asked, string(params))
	p.mu.Unlock()
	select {
	case <-time.After(p.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.answer != nil {
		return p.answer(ctx, params)
	}
	return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"a person typed this"},"model":"human","stopReason":"endTurn"}`), nil
}

// With the manual provider the replay client asks ClientOptions.Manual for
// the sampling answers the recording lacks, on both eras, and what the
// person answers reaches the live server; the person's time does not count
// against CallTimeout.
func TestReplayClientManualSampling(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape := recordFixture(t, era.path)
			forgetAnswers(tape)

			t.Run("answered", func(t *testing.T) {
				p := &person{delay: 700 * time.Millisecond}
				rep := replayAgainst(t, tape, liveServer(t, nil).URL, &replay.ClientOptions{Profile: manualProfile,
					Manual: p.ask, CallTimeout: 500 * time.Millisecond, Sessions: []string{tape.Sessions[0].Session.ID}})
				sample := callNamed(rep, "tools/call sample")
				if sample == nil || sample.Err != "" || len(sample.Answers) != 1 || sample.Answers[0].From != "manual" {
					t.Fatalf("sample: %+v\n%s", sample, reportText(rep))
				}
				if !strings.Contains(string(sample.Live), `"text":"a person typed this"`) {
					t.Errorf("the live result lacks the person's answer: %s", sample.Live)
				}
				p.mu.Lock()
				defer p.mu.Unlock()
				if len(p.asked) == 0 || !strings.Contains(p.asked[0], "Say hello to the tape.") || !strings.Contains(p.asked[0], "You are the mcptape fixture model.") {
					t.Errorf("the person was asked %q", p.asked)
				}
			})

			t.Run("with an error", func(t *testing.T) {
				p := &person{answer: func(context.Context, json.RawMessage) (json.RawMessage, error) {
					return nil, &protocol.ErrorInfo{Code: -1, Message: "User rejected the sampling request"}
				}}
				rep := replayAgainst(t, tape, liveServer(t, nil).URL, &replay.ClientOptions{Profile: manualProfile,
					Manual: p.ask, Sessions: []string{tape.Sessions[0].Session.ID}})
				sample := callNamed(rep, "tools/call sample")
				if sample == nil || len(sample.Answers) != 1 || sample.Answers[0].From != "manual" {
					t.Fatalf("sample: %+v\n%s", sample, reportText(rep))
				}
				if era.name == "legacy" && !strings.Contains(string(sample.Live), "User rejected the sampling request") {
					t.Errorf("the server did not get the person's error: %s", sample.Live)
				}
				// An MRTR input response cannot be an error: the call
				// stops there rather than ask the person again.
				if era.name == "modern" && (sample.Rounds != 1 || !strings.Contains(sample.Err, "a person answered input request \"sample\" (sampling/createMessage) with error -1")) {
					t.Errorf("modern: %d rounds, err %q", sample.Rounds, sample.Err)
				}
			})

			t.Run("nobody in time", func(t *testing.T) {
				var sawEnd error
				p := &person{answer: nil, delay: time.Hour}
				hook := func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
					res, err := p.ask(ctx, method, params)
					sawEnd = ctx.Err()
					return res, err
				}
				rep := replayAgainst(t, tape, liveServer(t, nil).URL, &replay.ClientOptions{Profile: manualProfile,
					Manual: hook, ManualTimeout: 200 * time.Millisecond, Sessions: []string{tape.Sessions[0].Session.ID}})
				sample := callNamed(rep, "tools/call sample")
				if sample == nil || len(sample.Answers) != 1 || sample.Answers[0].From != "none" {
					t.Fatalf("sample: %+v\n%s", sample, reportText(rep))
				}
				if !errors.Is(sawEnd, context.DeadlineExceeded) {
					t.Errorf("the hook's ctx ended with %v, want the manual timeout", sawEnd)
				}
				if era.name == "legacy" && !strings.Contains(string(sample.Live), "nobody answered") {
					t.Errorf("the server was not told that nobody answered: %s", sample.Live)
				}
			})

			t.Run("no hook", func(t *testing.T) {
				// Today's behaviour: the manual provider has nobody to ask.
				rep := replayAgainst(t, tape, liveServer(t, nil).URL, &replay.ClientOptions{Profile: manualProfile,
					Sessions: []string{tape.Sessions[0].Session.ID}})
				sample := callNamed(rep, "tools/call sample")
				if sample == nil || len(sample.Answers) == 0 || sample.Answers[0].From != "none" {
					t.Fatalf("sample: %+v\n%s", sample, reportText(rep))
				}
			})
		})
	}
}
