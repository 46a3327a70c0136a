package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/fixtures"
)

// The same 2026-07-28 client program run twice in a row (a test suite run
// twice, say) is two sessions: its request ids start again, which one
// session never allows; and a Sync right after the run, with no pause, sees
// each session's record whole (era, client, counts), as `export` through a
// running recorder does.
func TestModernRunsTwiceAreTwoSessionsSeenAtOnce(t *testing.T) {
	r := newFixtureRig(t)
	for range 2 {
		r.runClient(t, "/mcp-stateless", &fixtures.ClientOptions{Only: []string{fixtures.ToolEcho}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var got []*capture.Session
	for _, s := range r.sessions(t) {
		if s.Path == "/mcp-stateless" {
			got = append(got, s)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d sessions on /mcp-stateless after two runs, want 2", len(got))
	}
	for _, s := range got {
		ms := r.messages(t, s.ID)
		if s.Era.String() != "modern" || s.Client.Name != fixtures.ClientName || s.Messages != len(ms) || s.Calls == 0 {
			t.Errorf("session %s right after the run: era %s client %q, %d messages (%d stored), %d calls",
				s.ID, s.Era, s.Client.Name, s.Messages, len(ms), s.Calls)
		}
		for _, m := range ms {
			for _, f := range m.Findings {
				if f.Kind == capture.FindingDuplicateID {
					t.Errorf("session %s: message %d has a duplicate-id finding: %s", s.ID, m.Seq, f.Message)
				}
			}
		}
	}
}
