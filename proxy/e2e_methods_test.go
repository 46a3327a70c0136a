package proxy_test

import (
	"bytes"
	"testing"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
)

// TestEndToEndEveryTool checks, on both eras, that every fixture tool's
// call is recorded with its answer of the right kind, and that the
// resources, prompts, subscriptions and change notifications the client
// saw are all in the store.
func TestEndToEndEveryTool(t *testing.T) {
	for _, path := range []string{fixtures.PathStateful, fixtures.PathStateless} {
		t.Run(path, func(t *testing.T) {
			r := newFixtureRig(t)
			rep := r.runClient(t, path, nil)
			r.sync(t)
			s := r.sessionAt(t, path)
			ms := r.messages(t, s.ID)
			checkOrderAndPairs(t, ms)
			byTool, bySeq := callsByTool(ms)
			for _, tool := range []string{fixtures.ToolAdd, fixtures.ToolSlow, fixtures.ToolBig, fixtures.ToolFail, fixtures.ToolError, fixtures.ToolNotifyChanges} {
				vs := byTool[tool]
				if len(vs) != 1 || vs[0].resp == nil {
					t.Errorf("tool %s: %d calls recorded, want 1 with its answer", tool, len(vs))
					continue
				}
				resp := vs[0].resp
				switch tool {
				case fixtures.ToolError:
					if resp.Kind != protocol.KindError {
						t.Errorf("tool error: answer kind %v, want a JSON-RPC error", resp.Kind)
					}
				case fixtures.ToolFail:
					if resp.Kind != protocol.KindResult || !bytes.Contains(resp.Raw, []byte(`"isError":true`)) {
						t.Errorf("tool fail: answer %v %.200s, want a result with isError", resp.Kind, resp.Raw)
					}
				case fixtures.ToolAdd:
					if resp.Kind != protocol.KindResult || !bytes.Contains(vs[0].req.Raw, []byte(`"arguments"`)) {
						t.Errorf("tool add: %v %.200s", resp.Kind, resp.Raw)
					}
				default:
					if resp.Kind != protocol.KindResult {
						t.Errorf("tool %s: answer kind %v", tool, resp.Kind)
					}
				}
			}
			count := map[string]int{}
			for _, m := range ms {
				if m.Kind == protocol.KindRequest || m.Kind == protocol.KindNotification {
					count[m.Method]++
				}
				if m.Method == protocol.MethodProgress {
					if req := bySeq[m.Links.Request]; req == nil || req.Name != fixtures.ToolSlow {
						t.Errorf("progress %d is not linked to the slow call", m.Seq)
					}
				}
			}
			for _, method := range []string{"tools/list", "resources/list", "resources/read", "prompts/list", "prompts/get"} {
				if count[method] == 0 {
					t.Errorf("no %s recorded; recorded %v", method, count)
				}
			}
			for method, seen := range map[string]int{
				protocol.MethodProgress:              rep.Seen.Progress,
				"notifications/tools/list_changed":   rep.Seen.ToolListChanged,
				"notifications/resources/updated":    rep.Seen.ResourceUpdated,
				"notifications/elicitation/complete": rep.Seen.ElicitationCompletes,
			} {
				if count[method] != seen {
					t.Errorf("%d %s recorded, the client saw %d", count[method], method, seen)
				}
			}
			if rep.Seen.ResourceUpdated == 0 || rep.Seen.ToolListChanged == 0 {
				t.Errorf("the client saw no change notifications (%+v): the check above proves nothing", rep.Seen)
			}
			if path == fixtures.PathStateful && count["resources/subscribe"] == 0 {
				t.Errorf("no resources/subscribe recorded on 2025-11-25")
			}
			if path == fixtures.PathStateless && count[protocol.MethodSubscriptionsListen] == 0 {
				t.Errorf("no subscriptions/listen recorded on 2026-07-28")
			}
		})
	}
}
