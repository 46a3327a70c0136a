package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// RunOptions configures [RunWithOptions]. The zero value runs the tests
// every backend must pass.
type RunOptions struct {
	// Reopen, when set, returns a new store over the data of old, which the
	// suite has already closed. Persistent backends set it so that the suite
	// checks that data survives Close and that LastIDs continues across a
	// reopen. The store it returns must be closed when t ends, as with open.
	// Nil skips those tests.
	Reopen func(t *testing.T, old capture.Store) capture.Store
}

// Run runs the conformance suite against the stores open returns. open must
// return a new, empty store each time, be safe to call from parallel
// subtests, and close the store when t ends (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) capture.Store) {
	RunWithOptions(t, open, RunOptions{})
}

// RunWithOptions is [Run] with options, for backends that persist data.
func RunWithOptions(t *testing.T, open func(t *testing.T) capture.Store, opts RunOptions) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s capture.Store)
	}{
		{"Session/RoundTrip", testSessionRoundTrip},
		{"Session/Upsert", testSessionUpsert},
		{"Sessions/Order", testSessionsOrder},
		{"Sessions/Query", testSessionsQuery},
		{"Exchange/RoundTrip", testExchangeRoundTrip},
		{"Exchange/Upsert", testExchangeUpsert},
		{"Exchanges/Order", testExchangesOrder},
		{"Message/RoundTrip", testMessageRoundTrip},
		{"Message/Replace", testMessageReplace},
		{"Messages/Order", testMessagesOrder},
		{"Messages/Query", testMessagesQuery},
		{"Messages/LargeRaw", testLargeRaw},
		{"SessionIDPrefixes", testSessionIDPrefixes},
		{"EmptyBatch", testEmptyBatch},
		{"NotFound", testNotFound},
		{"DeleteSession", testDeleteSession},
		{"LastIDs", testLastIDs},
		{"Closed", testClosed},
		{"Context", testContext},
		{"Concurrent", testConcurrent},
		{"EarlyBreak", testEarlyBreak},
		{"Snapshot", testSnapshot},
		{"NoAliasing", testNoAliasing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
	if opts.Reopen != nil {
		t.Run("Reopen", func(t *testing.T) {
			t.Parallel()
			testReopen(t, open(t), opts.Reopen)
		})
	}
	if _, ok := open(t).(capture.Editor); ok {
		runEditor(t, open, opts)
	}
	if _, ok := open(t).(capture.SessionCounter); ok {
		t.Run("CountSessions", func(t *testing.T) {
			t.Parallel()
			testCountSessions(t, open(t), opts.Reopen)
		})
	}
}

// Fixtures. Every field is set to something other than its zero value, so
// a backend that drops a field fails the round trip.

var (
	t0   = time.Date(2026, 7, 28, 9, 30, 0, 123456000, time.UTC)
	east = time.FixedZone("UTC+2", 2*60*60)
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func fullSession(id string, start time.Time) *capture.Session {
	return &capture.Session{
		ID:                 id,
		Era:                protocol.EraLegacy,
		Version:            "2025-11-25",
		Client:             protocol.Implementation{Name: "claude-ai", Version: "0.1.0", Title: "Claude"},
		Server:             protocol.Implementation{Name: "everything", Version: "2.0.0", Title: "Everything"},
		ClientCapabilities: json.RawMessage(`{"sampling": {},"roots":{"listChanged":true}}`),
		ServerCapabilities: json.RawMessage(`{"tools":{"listChanged":true},"logging":{}, "x":"<&>"}`),
		Upstream:           "http://127.0.0.1:3001",
		Path:               "/mcp",
		Key:                "k_3q2ab7",
		Opening:            "initialize",
		Start:              start,
		End:                start.Add(90 * time.Second).In(east),
		Exchanges:          12,
		Messages:           40,
		Calls:              9,
		Errors:             2,
		Findings:           3,
		Status:             capture.StatusIncomplete,
		Lost:               4,
		LossReason:         "store: disk full",
		Labels:             []string{"bug-123", "ünïcode", ""},
		Leg:                capture.LegStdio,
		Route:              "everything",
		Command: &capture.Command{
			Args: []string{"node", "dist/index.js", "--key=[redacted]"},
			Env:  []string{"NODE_ENV=production", "API_KEY=[redacted]"},
			Dir:  "/srv/mcp", PID: 4242, Exit: "exited with code 3",
		},
	}
}

func fullExchange(id uint64, sessionID string, start time.Time) *capture.Exchange {
	return &capture.Exchange{
		ID:        id,
		SessionID: sessionID,
		Method:    http.MethodPost,
		URL:       "/mcp?x=1&y=%20",
		Status:    http.StatusOK,
		RequestHeader: http.Header{
			"Content-Type":         {"application/json"},
			"Accept":               {"application/json", "text/event-stream"},
			"Mcp-Session-Id":       {capture.Redacted},
			"Mcp-Protocol-Version": {"2025-11-25"},
			"X-Empty":              {""},
		},
		ResponseHeader: http.Header{
			"Content-Type": {"text/event-stream"},
			"Set-Cookie":   {capture.Redacted, capture.Redacted},
		},
		Start:           start,
		FirstByte:       start.Add(3 * time.Millisecond),
		End:             start.Add(2 * time.Second),
		Forwarded:       start.Add(time.Millisecond),
		UpstreamHeaders: start.Add(2 * time.Millisecond),
		RequestBody:     capture.BodyJSON,
		ResponseBody:    capture.BodySSE,
		RequestBytes:    123,
		ResponseBytes:   1 << 40,
		Events:          7,
		Aborted:         true,
		Truncated:       true,
		Error:           "upstream: connection reset by peer",
		Synthesized:     true,
		Rewritten:       `WWW-Authenticate resource_metadata: "http://127.0.0.1:3001/.well-known/oauth-protected-resource/mcp" → "http://127.0.0.1:7411/.well-known/oauth-protected-resource/mcp"`,
		FindingList: []capture.Finding{
			{Kind: capture.FindingHeaderMismatch, Message: "Mcp-Method says tools/list, body says tools/call"},
			{Kind: capture.FindingVersion, Message: ""},
		},
	}
}

func fullMessage(seq uint64, sessionID string, exchangeID uint64) *capture.Message {
	raw := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}`, seq)
	return &capture.Message{
		Seq:        seq,
		SessionID:  sessionID,
		ExchangeID: exchangeID,
		Direction:  protocol.ServerToClient,
		Time:       at(time.Duration(seq) * time.Microsecond).In(east),
		Kind:       protocol.KindRequest,
		Method:     "sampling/createMessage",
		ID:         json.RawMessage(fmt.Sprint(seq)),
		Name:       "echo",
		Batch:      2,
		Raw:        raw,
		Size:       len(raw),
		SSE: &capture.SSEInfo{
			ID:     "ev-42",
			Type:   "message",
			Prefix: []byte("id: ev-42\nevent: message\ndata: "),
			Suffix: []byte("\n\n"),
			Whole:  []byte("id: ev-42\ndata: [\ndata: ]\n\n"),
		},
		Findings: []capture.Finding{
			{Kind: capture.FindingBatch, Message: "batch on 2025-06-18"},
			{Kind: capture.FindingDuplicateID, Message: "id reused"},
		},
		Links:  capture.Links{Request: seq + 1, Parent: seq + 2, Previous: 1<<64 - 1, Task: seq + 3},
		Edited: 2, // edited before it came here (an imported tape)
	}
}

// plainMessage is a small message with only the fields the store indexes.
func plainMessage(seq uint64, sessionID string) *capture.Message {
	raw := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"n":%d}}`, seq)
	return &capture.Message{
		Seq:       seq,
		SessionID: sessionID,
		Direction: protocol.ClientToServer,
		Time:      at(time.Duration(seq) * time.Millisecond),
		Kind:      protocol.KindNotification,
		Method:    "notifications/progress",
		Batch:     -1,
		Raw:       raw,
		Size:      len(raw),
	}
}

// Helpers.

var diffOpts = cmp.Options{cmpopts.EquateEmpty()}

func diff(want, got any) string { return cmp.Diff(want, got, diffOpts) }

func write(t *testing.T, s capture.Store, b *capture.Batch) {
	t.Helper()
	if err := s.Write(t.Context(), b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func collect[T any](t *testing.T, seq iter.Seq2[T, error]) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatalf("iteration: %v", err)
		}
		out = append(out, v)
	}
	return out
}

func sessionIDs(ss []*capture.Session) []string {
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	return ids
}

func exchangeIDs(xs []*capture.Exchange) []uint64 {
	var ids []uint64
	for _, x := range xs {
		ids = append(ids, x.ID)
	}
	return ids
}

func seqs(ms []*capture.Message) []uint64 {
	var out []uint64
	for _, m := range ms {
		out = append(out, m.Seq)
	}
	return out
}

func noRaw(ms []*capture.Message) []*capture.Message {
	out := make([]*capture.Message, len(ms))
	for i, m := range ms {
		c := *m
		c.Raw = nil
		out[i] = &c
	}
	return out
}

func mustSession(t *testing.T, s capture.Store, id string) *capture.Session {
	t.Helper()
	x, err := s.Session(t.Context(), id)
	if err != nil {
		t.Fatalf("Session(%q): %v", id, err)
	}
	return x
}

func mustExchange(t *testing.T, s capture.Store, id uint64) *capture.Exchange {
	t.Helper()
	x, err := s.Exchange(t.Context(), id)
	if err != nil {
		t.Fatalf("Exchange(%d): %v", id, err)
	}
	return x
}

func mustMessage(t *testing.T, s capture.Store, seq uint64) *capture.Message {
	t.Helper()
	m, err := s.Message(t.Context(), seq)
	if err != nil {
		t.Fatalf("Message(%d): %v", seq, err)
	}
	return m
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, capture.ErrNotFound) {
		t.Errorf("%s: err = %v, want ErrNotFound", what, err)
	}
}

func lastIDs(t *testing.T, s capture.Store) (uint64, uint64) {
	t.Helper()
	seq, x, err := s.LastIDs(t.Context())
	if err != nil {
		t.Fatalf("LastIDs: %v", err)
	}
	return seq, x
}

// checkSession checks that a session reads back as want, alone and in the
// listing.
func checkSession(t *testing.T, s capture.Store, want *capture.Session) {
	t.Helper()
	if d := diff(want, mustSession(t, s, want.ID)); d != "" {
		t.Errorf("Session(%q) mismatch (-want +got):\n%s", want.ID, d)
	}
}

// Messages reads every message in r, session by session (newest first),
// each in order, failing t on a read error.
func Messages(t testing.TB, r capture.Reader) []*capture.Message {
	t.Helper()
	ctx := context.Background()
	var out []*capture.Message
	for s, err := range r.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range r.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}
