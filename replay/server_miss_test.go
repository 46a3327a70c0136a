package replay_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/replay"
)

// A miss is a *MissError wrapping ErrNoMatch: the session the client was
// given, the closest recorded request with the fields that differ, and the
// other recorded sessions that hold a match. The client's JSON-RPC error
// says the same.
func TestMissErrorNamesSessions(t *testing.T) {
	// Session a: tools/call echo. Session b: tools/call echo and
	// prompts/list.
	tape, _ := recordRuns(t, fixtures.PathStateful, &fixtures.ClientOptions{Only: []string{"echo"}},
		&fixtures.ClientOptions{Only: []string{"echo", "list_prompts"}})
	if len(tape.Sessions) != 2 {
		t.Fatalf("recorded %d sessions, want 2", len(tape.Sessions))
	}
	a, b := tape.Sessions[0].Session.ID, tape.Sessions[1].Session.ID
	s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	// The live client is given session a, then asks for what only b
	// recorded, and calls echo with other arguments.
	u := hs.URL + fixtures.PathStateful
	h := openLegacy(t, tape, u)
	_, body, err := post(t, u, `{"jsonrpc":"2.0","id":7,"method":"prompts/list","params":{}}`, h)
	if err != nil {
		t.Fatal(err)
	}
	got := resultText(t, body)
	for _, want := range []string{"error -32010", "no recorded prompts/list matches", "recorded session " + a + " (the one this client was given)",
		"has no prompts/list request at all (it has: server/discover, initialize, tools/call)", "recorded session " + b + " holds a match"} {
		if !strings.Contains(got, want) {
			t.Errorf("the client's error %q lacks %q", got, want)
		}
	}
	if _, body, err = post(t, u, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"other"}}}`, h); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	if len(r.Misses) != 2 {
		t.Fatalf("report misses %q, want 2", r.Misses)
	}
	m := r.Misses[0]
	if !errors.Is(m, replay.ErrNoMatch) {
		t.Errorf("a miss does not wrap ErrNoMatch: %v", m)
	}
	var me *replay.MissError
	if !errors.As(error(m), &me) || me.Method != "prompts/list" || me.Session != a || me.Closest != nil ||
		!slices.Equal(me.Methods, []string{"server/discover", "initialize", "tools/call"}) || !slices.Equal(me.MatchedIn, []string{b}) {
		t.Errorf("miss 1: %+v", m)
	}
	m = r.Misses[1]
	if m.Method != "tools/call" || m.Name != "echo" || m.Session != a || m.Closest == nil || m.Closest.Name != "echo" || m.Closest.Seq == 0 ||
		!slices.Equal(m.Closest.Diff, []string{`params.arguments.text: live "other", recorded "hello, tape"`}) || len(m.MatchedIn) != 0 {
		t.Errorf("miss 2: %+v (closest %+v)", m, m.Closest)
	}
	if !strings.Contains(resultText(t, body), `it differs in params.arguments.text: live "other", recorded "hello, tape"`) {
		t.Errorf("the client's error for miss 2: %s", body)
	}
	if len(r.Failures) != 2 || r.Failures[0] != r.Misses[0].Error() {
		t.Errorf("strict failures %q, want the two misses", r.Failures)
	}
}

// A request no recorded session fits is a miss with no session.
func TestMissWithoutSession(t *testing.T) {
	tape, _ := record(t, fixtures.PathStateful, &fixtures.ClientOptions{Only: []string{"echo"}})
	s, hs := serve(t, tape, nil)
	// A legacy request with no initialize and no session: the recorded
	// legacy session began with initialize, so it cannot answer.
	_, body, err := post(t, hs.URL+fixtures.PathStateful, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, body); !strings.Contains(got, "the tape holds no session for this request") {
		t.Errorf("the client's error: %q", got)
	}
	r := s.Report()
	if len(r.Misses) != 1 || r.Misses[0].Session != "" || !errors.Is(r.Misses[0], replay.ErrNoMatch) {
		t.Errorf("misses %+v", r.Misses)
	}
}
