package dashboard_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// TestCopyAsCurlWorksWhenPasted pastes "Copy as curl" into a shell, as a
// user would, against the real recorder: the call goes through the
// recording proxy to the server and is recorded again. A legacy session's
// command opens a session of its own (initialize) instead of reusing the
// stored pseudonym of the recorded Mcp-Session-Id.
func TestCopyAsCurlWorksWhenPasted(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	r := newRig(t, &dashboard.Options{})
	r.dash.SetProxyURL(r.px.URL)
	c := newAPIClient(t, r.srv.URL)
	for _, path := range []string{fixtures.PathStateful, fixtures.PathStateless} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			r.runClient(t, path, fixtures.ToolEcho)
			s := r.sessionOn(t, path)
			r.settle(t, s.ID)
			echo := r.seqWhere(t, s.ID, func(m *capture.Message) bool {
				return m.Kind == protocol.KindRequest && m.Method == protocol.MethodToolsCall && m.Name == fixtures.ToolEcho
			})
			var d messageDetail
			c.get(fmt.Sprintf("/api/v1/messages/%d", echo), &d)
			if !strings.Contains(d.Curl, r.px.URL) || strings.Contains(d.Curl, r.up.URL) {
				t.Fatalf("the command does not go through the recorder:\n%s", d.Curl)
			}
			if path == fixtures.PathStateful && (!strings.Contains(d.Curl, `"method":"initialize"`) || strings.Contains(d.Curl, "sid-")) {
				t.Errorf("a legacy command must initialize, not reuse the pseudonym:\n%s", d.Curl)
			}
			before := countSessions(t, r)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "sh", "-c", d.Curl).CombinedOutput()
			if err != nil {
				t.Fatalf("the pasted command failed: %v\n%s\n--- the command:\n%s", err, out, d.Curl)
			}
			if !strings.Contains(string(out), `"hello, tape"`) || !strings.Contains(string(out), `"result"`) {
				t.Errorf("the pasted command printed\n%s\nwant the echo tool's result", out)
			}
			r.sync(t)
			// Recorded again, by the recorder the command went through.
			if after := countSessions(t, r); path == fixtures.PathStateful && after != before+1 {
				t.Errorf("%d sessions after the legacy command, want a new one (%d before)", after, before)
			}
			again := 0
			for x, err := range r.store.Sessions(context.Background(), capture.SessionQuery{}) {
				if err != nil {
					t.Fatal(err)
				}
				for m, err := range r.store.Messages(context.Background(), x.ID, capture.MessageQuery{NoRaw: true}) {
					if err == nil && m.Seq > echo && m.Links.Request != echo && m.Method == protocol.MethodToolsCall && m.Name == fixtures.ToolEcho && m.Kind == protocol.KindResult {
						again++
					}
				}
			}
			if again != 1 {
				t.Errorf("%d echo results recorded after the command, want 1", again)
			}
		})
	}
}

// TestCopyAsCurlWithoutRecorder: a dashboard that serves no recorder
// sends the command to the upstream, or says why there is none.
func TestCopyAsCurlWithoutRecorder(t *testing.T) {
	r := newRig(t, nil)
	r.runClient(t, fixtures.PathStateless, fixtures.ToolEcho)
	s := r.sessionOn(t, fixtures.PathStateless)
	r.settle(t, s.ID)
	echo := r.seqWhere(t, s.ID, func(m *capture.Message) bool {
		return m.Method == protocol.MethodToolsCall && m.Kind == protocol.KindRequest
	})
	var d messageDetail
	newAPIClient(t, r.srv.URL).get(fmt.Sprintf("/api/v1/messages/%d", echo), &d)
	// The proxy tells the recorder each session's upstream (every leg
	// does), so the command goes there directly.
	if !strings.Contains(d.Curl, "to the upstream directly") || !strings.Contains(d.Curl, r.up.URL+fixtures.PathStateless) {
		t.Errorf("curl %q, note %q", d.Curl, d.CurlNote)
	}
}

func countSessions(t *testing.T, r *rig) int {
	t.Helper()
	n := 0
	for _, err := range r.store.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}
