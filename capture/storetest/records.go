package storetest

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Round trips and upserts of each record type.

func testSessionRoundTrip(t *testing.T, s capture.Store) {
	full := fullSession("s-full", t0.In(east))
	// A session with only an ID and zero times must survive too.
	bare := &capture.Session{ID: "s-bare"}
	write(t, s, &capture.Batch{Sessions: []*capture.Session{full, bare}})

	checkSession(t, s, full)
	checkSession(t, s, bare)
	got := collect(t, s.Sessions(t.Context(), capture.SessionQuery{}))
	if d := diff([]*capture.Session{full, bare}, got); d != "" {
		t.Errorf("Sessions mismatch (-want +got):\n%s", d)
	}
	// Capabilities are raw: not compacted, not HTML-escaped.
	if g := mustSession(t, s, full.ID); !bytes.Equal(g.ServerCapabilities, full.ServerCapabilities) {
		t.Errorf("ServerCapabilities = %s, want %s", g.ServerCapabilities, full.ServerCapabilities)
	}
}

func testSessionUpsert(t *testing.T, s capture.Store) {
	a := fullSession("s-a", at(0))
	b := &capture.Session{ID: "s-b", Start: at(time.Minute)}
	write(t, s, &capture.Batch{Sessions: []*capture.Session{a, b}})

	// A later write replaces the whole record, fields cleared included,
	// and moving Start moves the session in the listing.
	a2 := &capture.Session{ID: "s-a", Era: protocol.EraModern, Start: at(2 * time.Minute), Status: capture.StatusClosed, Messages: 1}
	write(t, s, &capture.Batch{Sessions: []*capture.Session{a2}})
	checkSession(t, s, a2)
	if got := sessionIDs(collect(t, s.Sessions(t.Context(), capture.SessionQuery{}))); !slices.Equal(got, []string{"s-a", "s-b"}) {
		t.Errorf("after moving s-a later: Sessions = %q, want [s-a s-b]", got)
	}

	// Two writes of one ID in one batch: the last wins, listed once.
	a3 := &capture.Session{ID: "s-a", Start: at(-time.Minute), Labels: []string{"x"}}
	a4 := &capture.Session{ID: "s-a", Start: at(-2 * time.Minute), Labels: []string{"y"}}
	write(t, s, &capture.Batch{Sessions: []*capture.Session{a3, a4}})
	checkSession(t, s, a4)
	got := collect(t, s.Sessions(t.Context(), capture.SessionQuery{}))
	if d := diff([]*capture.Session{b, a4}, got); d != "" {
		t.Errorf("after two writes in one batch: Sessions mismatch (-want +got):\n%s", d)
	}
	// Start at the same instant in another zone is the same Start.
	a5 := &capture.Session{ID: "s-a", Start: a4.Start.In(east), Calls: 5}
	write(t, s, &capture.Batch{Sessions: []*capture.Session{a5}})
	if got := collect(t, s.Sessions(t.Context(), capture.SessionQuery{})); len(got) != 2 || got[1].Calls != 5 {
		t.Errorf("after rewriting s-a in another zone: Sessions = %q, want [s-b s-a] with s-a.Calls 5", sessionIDs(got))
	}
}

func testSessionsOrder(t *testing.T, s capture.Store) {
	// Written in scrambled order, over several batches; ties on Start are
	// broken by ID, larger first.
	write(t, s, &capture.Batch{Sessions: []*capture.Session{
		{ID: "s2", Start: at(time.Second)},
		{ID: "s0"}, // zero Start: oldest of all
		{ID: "s4", Start: at(2 * time.Second)},
	}})
	write(t, s, &capture.Batch{Sessions: []*capture.Session{
		{ID: "s1", Start: at(0)},
		{ID: "s3", Start: at(time.Second).In(east)},
		{ID: "s5", Start: at(-100 * 365 * 24 * time.Hour)}, // before 1970
		{ID: "s6", Start: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
	}})
	got := sessionIDs(collect(t, s.Sessions(t.Context(), capture.SessionQuery{})))
	want := []string{"s6", "s4", "s3", "s2", "s1", "s5", "s0"}
	if !slices.Equal(got, want) {
		t.Errorf("Sessions = %q, want %q", got, want)
	}
}

func testSessionsQuery(t *testing.T, s capture.Store) {
	write(t, s, &capture.Batch{Sessions: []*capture.Session{
		{ID: "a", Start: at(0)},
		{ID: "b", Start: at(time.Second)},
		{ID: "c", Start: at(time.Second)},
		{ID: "d", Start: at(2 * time.Second)},
		{ID: "e", Start: at(3 * time.Second)},
	}})
	tests := []struct {
		name string
		q    capture.SessionQuery
		want []string
	}{
		{"all", capture.SessionQuery{}, []string{"e", "d", "c", "b", "a"}},
		{"limit", capture.SessionQuery{Limit: 2}, []string{"e", "d"}},
		{"limit over count", capture.SessionQuery{Limit: 10}, []string{"e", "d", "c", "b", "a"}},
		{"since inclusive", capture.SessionQuery{Since: at(time.Second)}, []string{"e", "d", "c", "b"}},
		{"until exclusive", capture.SessionQuery{Until: at(2 * time.Second)}, []string{"c", "b", "a"}},
		{"since and until", capture.SessionQuery{Since: at(time.Second), Until: at(3 * time.Second)}, []string{"d", "c", "b"}},
		{"between instants", capture.SessionQuery{Since: at(time.Second + 1), Until: at(2*time.Second - 1)}, nil},
		{"since equals until", capture.SessionQuery{Since: at(time.Second), Until: at(time.Second)}, nil},
		{"since after all", capture.SessionQuery{Since: at(time.Hour)}, nil},
		{"until before all", capture.SessionQuery{Until: at(-time.Hour)}, nil},
		{"window and limit", capture.SessionQuery{Since: at(0), Until: at(3 * time.Second), Limit: 2}, []string{"d", "c"}},
		{"bounds in another zone", capture.SessionQuery{Since: at(time.Second).In(east), Until: at(2 * time.Second).In(east)}, []string{"c", "b"}},
	}
	for _, tt := range tests {
		got := sessionIDs(collect(t, s.Sessions(t.Context(), tt.q)))
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: Sessions(%+v) = %q, want %q", tt.name, tt.q, got, tt.want)
		}
	}
}

func testExchangeRoundTrip(t *testing.T, s capture.Store) {
	full := fullExchange(7, "s1", t0.In(east))
	bare := &capture.Exchange{ID: 8, SessionID: "s1"} // no response: zero times, no headers
	write(t, s, &capture.Batch{
		Sessions:  []*capture.Session{{ID: "s1", Start: t0}},
		Exchanges: []*capture.Exchange{full, bare},
	})
	for _, want := range []*capture.Exchange{full, bare} {
		if d := diff(want, mustExchange(t, s, want.ID)); d != "" {
			t.Errorf("Exchange(%d) mismatch (-want +got):\n%s", want.ID, d)
		}
	}
	got := collect(t, s.Exchanges(t.Context(), "s1"))
	if d := diff([]*capture.Exchange{full, bare}, got); d != "" {
		t.Errorf("Exchanges mismatch (-want +got):\n%s", d)
	}
	if g := mustExchange(t, s, 8); !g.FirstByte.IsZero() || !g.End.IsZero() {
		t.Errorf("unset FirstByte, End = %v, %v; want zero times", g.FirstByte, g.End)
	}
}

func testExchangeUpsert(t *testing.T, s capture.Store) {
	x := fullExchange(1, "s1", at(0))
	write(t, s, &capture.Batch{Exchanges: []*capture.Exchange{x}})

	// The response came: the record is replaced whole.
	x2 := &capture.Exchange{ID: 1, SessionID: "s1", Method: "GET", Status: 202, Start: at(0)}
	write(t, s, &capture.Batch{Exchanges: []*capture.Exchange{x2}})
	if d := diff(x2, mustExchange(t, s, 1)); d != "" {
		t.Errorf("after upsert: Exchange(1) mismatch (-want +got):\n%s", d)
	}

	// Moved to another session: it leaves the first one's list.
	x3 := &capture.Exchange{ID: 1, SessionID: "s2", Status: 500}
	write(t, s, &capture.Batch{Exchanges: []*capture.Exchange{x3}})
	if got := exchangeIDs(collect(t, s.Exchanges(t.Context(), "s1"))); len(got) != 0 {
		t.Errorf("after moving exchange 1 to s2: Exchanges(s1) = %v, want none", got)
	}
	if d := diff([]*capture.Exchange{x3}, collect(t, s.Exchanges(t.Context(), "s2"))); d != "" {
		t.Errorf("after move: Exchanges(s2) mismatch (-want +got):\n%s", d)
	}

	// Several writes of one ID in one batch: the last wins.
	x4 := &capture.Exchange{ID: 1, SessionID: "s1", Status: 201}
	x5 := &capture.Exchange{ID: 1, SessionID: "s3", Status: 202}
	write(t, s, &capture.Batch{Exchanges: []*capture.Exchange{x4, x5}})
	for _, sid := range []string{"s1", "s2"} {
		if got := exchangeIDs(collect(t, s.Exchanges(t.Context(), sid))); len(got) != 0 {
			t.Errorf("after two writes in one batch: Exchanges(%s) = %v, want none", sid, got)
		}
	}
	if d := diff([]*capture.Exchange{x5}, collect(t, s.Exchanges(t.Context(), "s3"))); d != "" {
		t.Errorf("after two writes in one batch: Exchanges(s3) mismatch (-want +got):\n%s", d)
	}

	// The same for an ID never stored before, behind a higher one.
	x6 := &capture.Exchange{ID: 9, SessionID: "s4", Status: 201}
	x7 := &capture.Exchange{ID: 12, SessionID: "s4", Status: 200}
	x8 := &capture.Exchange{ID: 9, SessionID: "s5", Status: 202}
	write(t, s, &capture.Batch{Exchanges: []*capture.Exchange{x6, x7, x8}})
	if d := diff([]*capture.Exchange{x7}, collect(t, s.Exchanges(t.Context(), "s4"))); d != "" {
		t.Errorf("after two writes of a new ID in one batch: Exchanges(s4) mismatch (-want +got):\n%s", d)
	}
	if d := diff([]*capture.Exchange{x8}, collect(t, s.Exchanges(t.Context(), "s5"))); d != "" {
		t.Errorf("after two writes of a new ID in one batch: Exchanges(s5) mismatch (-want +got):\n%s", d)
	}
}

func testExchangesOrder(t *testing.T, s capture.Store) {
	for _, ids := range [][]uint64{{5, 300, 2}, {1 << 40, 1}, {256, 4}} {
		var b capture.Batch
		for _, id := range ids {
			b.Exchanges = append(b.Exchanges, &capture.Exchange{ID: id, SessionID: "s"})
		}
		b.Exchanges = append(b.Exchanges, &capture.Exchange{ID: ids[0] + 1000, SessionID: "other"})
		write(t, s, &b)
	}
	got := exchangeIDs(collect(t, s.Exchanges(t.Context(), "s")))
	want := []uint64{1, 2, 4, 5, 256, 300, 1 << 40}
	if !slices.Equal(got, want) {
		t.Errorf("Exchanges = %v, want %v", got, want)
	}
}

func testMessageRoundTrip(t *testing.T, s capture.Store) {
	// Raw JSON ids stay exactly as sent: 1, "1" and 1.0 are three ids.
	ids := []string{`1`, `"1"`, `1.0`, `null`, ``, `-0`, `1e3`, `"\u00e9"`, `"é"`, `12345678901234567890123`}
	var want []*capture.Message
	for i, id := range ids {
		m := fullMessage(uint64(i+1), "s1", 9)
		m.ID = json.RawMessage(id)
		if id == `` {
			m.ID = nil
		}
		want = append(want, m)
	}
	// Frames that are not JSON, raw bytes that are not UTF-8, and every
	// shape of SSE info.
	odd := []*capture.Message{
		{Seq: 20, SessionID: "s1", Direction: protocol.ServerToClient, Kind: protocol.KindFrame, Batch: -1,
			Raw: []byte(": keep-alive\r\nretry: 1000\r\n\r\n"), Size: 28, SSE: &capture.SSEInfo{}},
		{Seq: 21, SessionID: "s1", Direction: protocol.ClientToServer, Kind: protocol.KindInvalid, Batch: -1,
			Raw: []byte{0, 0xff, 0xfe, '{', 0x80, '\n'}, Size: 6,
			Findings: []capture.Finding{{Kind: capture.FindingInvalidFrame, Message: "not JSON"}}},
		{Seq: 22, SessionID: "s1", Kind: protocol.KindResult, Batch: 0, ID: json.RawMessage(`7`),
			Raw: []byte(`{"jsonrpc":"2.0","id":7,"result":{}}`), Size: 36,
			SSE:   &capture.SSEInfo{ID: "1", Prefix: []byte("data: ")},
			Links: capture.Links{Request: 3}},
		{Seq: 23, SessionID: "s1", Kind: protocol.KindError, Batch: -1, Size: 0},             // no raw at all
		{Seq: 24, SessionID: "s1", Kind: protocol.KindResult, Batch: -1, Raw: nil, Size: 99}, // Size kept as given
	}
	want = append(want, odd...)
	write(t, s, &capture.Batch{Messages: want})

	for _, w := range want {
		if d := diff(w, mustMessage(t, s, w.Seq)); d != "" {
			t.Errorf("Message(%d) mismatch (-want +got):\n%s", w.Seq, d)
		}
	}
	// cmp treats nil and empty alike; ids must not.
	if g := mustMessage(t, s, 4); string(g.ID) != "null" {
		t.Errorf("Message(4).ID = %q, want null", g.ID)
	}
	if g := mustMessage(t, s, 5); len(g.ID) != 0 {
		t.Errorf("Message(5).ID = %q, want none", g.ID)
	}
	got := collect(t, s.Messages(t.Context(), "s1", capture.MessageQuery{}))
	if d := diff(want, got); d != "" {
		t.Errorf("Messages mismatch (-want +got):\n%s", d)
	}
	got = collect(t, s.Messages(t.Context(), "s1", capture.MessageQuery{NoRaw: true}))
	if d := diff(noRaw(want), got); d != "" {
		t.Errorf("Messages(NoRaw) mismatch (-want +got):\n%s", d)
	}
	for _, m := range got {
		if m.Raw != nil {
			t.Errorf("Messages(NoRaw): message %d has Raw %q, want nil", m.Seq, m.Raw)
		}
	}
}

func testMessageReplace(t *testing.T, s capture.Store) {
	write(t, s, &capture.Batch{Messages: []*capture.Message{plainMessage(1, "s1"), plainMessage(2, "s1")}})

	m := fullMessage(1, "s1", 3)
	m.Raw, m.Size = []byte(`{"replaced":true}`), 17
	write(t, s, &capture.Batch{Messages: []*capture.Message{m}})
	if d := diff(m, mustMessage(t, s, 1)); d != "" {
		t.Errorf("after replace: Message(1) mismatch (-want +got):\n%s", d)
	}

	// Moved to another session: it leaves the first one's list.
	m2 := plainMessage(1, "s2")
	write(t, s, &capture.Batch{Messages: []*capture.Message{m2}})
	if got := seqs(collect(t, s.Messages(t.Context(), "s1", capture.MessageQuery{}))); !slices.Equal(got, []uint64{2}) {
		t.Errorf("after moving message 1 to s2: Messages(s1) = %v, want [2]", got)
	}
	if d := diff([]*capture.Message{m2}, collect(t, s.Messages(t.Context(), "s2", capture.MessageQuery{}))); d != "" {
		t.Errorf("after move: Messages(s2) mismatch (-want +got):\n%s", d)
	}

	// Several writes of one Seq in one batch: the last wins.
	m3, m4 := plainMessage(2, "s3"), plainMessage(2, "s4")
	m4.Raw, m4.Size = []byte("last"), 4
	write(t, s, &capture.Batch{Messages: []*capture.Message{m3, m4}})
	for _, sid := range []string{"s1", "s3"} {
		if got := seqs(collect(t, s.Messages(t.Context(), sid, capture.MessageQuery{}))); len(got) != 0 {
			t.Errorf("after two writes in one batch: Messages(%s) = %v, want none", sid, got)
		}
	}
	if d := diff(m4, mustMessage(t, s, 2)); d != "" {
		t.Errorf("after two writes in one batch: Message(2) mismatch (-want +got):\n%s", d)
	}
}

func testMessagesOrder(t *testing.T, s capture.Store) {
	for _, batch := range [][]uint64{{5, 1, 300}, {3, 1 << 40}, {2, 256, 4}} {
		var b capture.Batch
		for _, seq := range batch {
			b.Messages = append(b.Messages, plainMessage(seq, "s"), plainMessage(seq+1<<50, "other"))
		}
		write(t, s, &b)
	}
	got := seqs(collect(t, s.Messages(t.Context(), "s", capture.MessageQuery{})))
	want := []uint64{1, 2, 3, 4, 5, 256, 300, 1 << 40}
	if !slices.Equal(got, want) {
		t.Errorf("Messages = %v, want %v", got, want)
	}
}

func testMessagesQuery(t *testing.T, s capture.Store) {
	var all []*capture.Message
	for seq := uint64(10); seq <= 100; seq += 10 {
		all = append(all, plainMessage(seq, "s"))
	}
	write(t, s, &capture.Batch{Messages: all})
	tests := []struct {
		name string
		q    capture.MessageQuery
		want []uint64
	}{
		{"all", capture.MessageQuery{}, []uint64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}},
		{"after exclusive", capture.MessageQuery{After: 30}, []uint64{40, 50, 60, 70, 80, 90, 100}},
		{"after between", capture.MessageQuery{After: 35}, []uint64{40, 50, 60, 70, 80, 90, 100}},
		{"after last", capture.MessageQuery{After: 100}, nil},
		{"after max", capture.MessageQuery{After: 1<<64 - 1}, nil},
		{"limit", capture.MessageQuery{Limit: 3}, []uint64{10, 20, 30}},
		{"after and limit", capture.MessageQuery{After: 50, Limit: 2}, []uint64{60, 70}},
		{"limit over count", capture.MessageQuery{After: 80, Limit: 5}, []uint64{90, 100}},
		{"no raw", capture.MessageQuery{After: 80, NoRaw: true}, []uint64{90, 100}},
	}
	for _, tt := range tests {
		got := collect(t, s.Messages(t.Context(), "s", tt.q))
		if g := seqs(got); !slices.Equal(g, tt.want) {
			t.Errorf("%s: Messages(%+v) = %v, want %v", tt.name, tt.q, g, tt.want)
		}
		for _, m := range got {
			switch {
			case tt.q.NoRaw && m.Raw != nil:
				t.Errorf("%s: message %d has Raw, want nil", tt.name, m.Seq)
			case !tt.q.NoRaw && len(m.Raw) != m.Size:
				t.Errorf("%s: message %d has %d raw bytes, want %d", tt.name, m.Seq, len(m.Raw), m.Size)
			case m.Size == 0:
				t.Errorf("%s: message %d has Size 0", tt.name, m.Seq)
			}
		}
	}
}

func testLargeRaw(t *testing.T, s capture.Store) {
	raw := make([]byte, 10<<20)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range raw { // deterministic, incompressible
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		raw[i] = byte(x)
	}
	m := plainMessage(1, "s")
	m.Raw, m.Size = raw, len(raw)
	write(t, s, &capture.Batch{Messages: []*capture.Message{m, plainMessage(2, "s")}})

	if g := mustMessage(t, s, 1); !bytes.Equal(g.Raw, raw) {
		t.Errorf("Message(1).Raw: %d bytes, differs from the %d written", len(g.Raw), len(raw))
	}
	got := collect(t, s.Messages(t.Context(), "s", capture.MessageQuery{}))
	if len(got) != 2 || !bytes.Equal(got[0].Raw, raw) {
		t.Errorf("Messages: large Raw did not round-trip")
	}
	got = collect(t, s.Messages(t.Context(), "s", capture.MessageQuery{NoRaw: true}))
	if len(got) != 2 || got[0].Raw != nil || got[0].Size != len(raw) {
		t.Errorf("Messages(NoRaw): want Raw nil and Size %d", len(raw))
	}
}

// testSessionIDPrefixes checks that a session's records are found by exact
// ID, not by prefix: a backend keying records by "<id>/..." must not mix up
// "a" and "a/b".
func testSessionIDPrefixes(t *testing.T, s capture.Store) {
	ids := []string{"a", "a/", "a/b", "ab", "a\x00", "b", ""}
	var b capture.Batch
	for i, id := range ids {
		b.Sessions = append(b.Sessions, &capture.Session{ID: id, Start: at(time.Duration(i) * time.Second)})
		b.Exchanges = append(b.Exchanges, &capture.Exchange{ID: uint64(i + 1), SessionID: id})
		b.Messages = append(b.Messages, plainMessage(uint64(i+1), id), plainMessage(uint64(i+101), id))
	}
	write(t, s, &b)
	check := func(when string, ids []string) {
		t.Helper()
		for _, id := range ids {
			var i uint64
			for j, x := range b.Sessions {
				if x.ID == id {
					i = uint64(j)
				}
			}
			if got := exchangeIDs(collect(t, s.Exchanges(t.Context(), id))); !slices.Equal(got, []uint64{i + 1}) {
				t.Errorf("%s: Exchanges(%q) = %v, want [%d]", when, id, got, i+1)
			}
			if got := seqs(collect(t, s.Messages(t.Context(), id, capture.MessageQuery{}))); !slices.Equal(got, []uint64{i + 1, i + 101}) {
				t.Errorf("%s: Messages(%q) = %v, want [%d %d]", when, id, got, i+1, i+101)
			}
			if g := mustSession(t, s, id); g.ID != id {
				t.Errorf("%s: Session(%q).ID = %q", when, id, g.ID)
			}
		}
	}
	check("before delete", ids)
	for _, id := range []string{"a", ""} {
		if err := s.DeleteSession(t.Context(), id); err != nil {
			t.Fatalf("DeleteSession(%q): %v", id, err)
		}
	}
	check("after deleting a and the empty id", []string{"a/", "a/b", "ab", "a\x00", "b"})
	got := sessionIDs(collect(t, s.Sessions(t.Context(), capture.SessionQuery{})))
	if want := []string{"b", "a\x00", "ab", "a/b", "a/"}; !slices.Equal(got, want) {
		t.Errorf("Sessions = %q, want %q", got, want)
	}
}

func testEmptyBatch(t *testing.T, s capture.Store) {
	write(t, s, &capture.Batch{})
	if got := collect(t, s.Sessions(t.Context(), capture.SessionQuery{})); len(got) != 0 {
		t.Errorf("Sessions after an empty batch = %q, want none", sessionIDs(got))
	}
	if seq, x := lastIDs(t, s); seq != 0 || x != 0 {
		t.Errorf("LastIDs of an empty store = %d, %d, want 0, 0", seq, x)
	}
}
