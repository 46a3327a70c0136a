package badgerstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/protocol"
)

// A snapshot reads what the store reads, whatever the order sessions are
// read in (its cursors serve session after session), and keeps reading
// the store as it was: later writes do not show in it.
func TestSnapshotReadsAsTheStore(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), nil)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	// Sessions whose exchanges and messages interleave (seqs and exchange
	// ids alternate between them), one with no messages, and ids of two
	// lengths, so that key order and time order differ.
	ids := []string{"b-session", "a-session", "c-long-session-id", "d-session", "empty"}
	var batch capture.Batch
	for i, id := range ids {
		batch.Sessions = append(batch.Sessions, &capture.Session{ID: id, Start: t0.Add(time.Duration(len(ids)-i) * time.Minute), Status: capture.StatusClosed})
	}
	seq, xid := uint64(0), uint64(0)
	for round := range 3 {
		for _, id := range ids[:4] {
			xid++
			batch.Exchanges = append(batch.Exchanges, &capture.Exchange{ID: xid, SessionID: id, Method: "POST", Start: t0})
			for range 2 {
				seq++
				raw := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"round":%d}}`, seq, round)
				batch.Messages = append(batch.Messages, &capture.Message{Seq: seq, SessionID: id, ExchangeID: xid, Time: t0,
					Direction: protocol.ClientToServer, Kind: protocol.KindRequest, Method: "ping", Batch: -1, Raw: raw, Size: len(raw)})
			}
		}
	}
	if err := s.Write(ctx, &batch); err != nil {
		t.Fatal(err)
	}
	read := func(r capture.Reader, id string, q capture.MessageQuery) string {
		sess, err := r.Session(ctx, id)
		if err != nil {
			t.Fatalf("Session(%s): %v", id, err)
		}
		out := fmt.Sprintf("%+v\n", *sess)
		for x, err := range r.Exchanges(ctx, id) {
			if err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprintf("x %+v\n", *x)
		}
		for m, err := range r.Messages(ctx, id, q) {
			if err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprintf("m %d %s\n", m.Seq, m.Raw)
		}
		return out
	}
	want := map[string]string{}
	after := map[string]string{} // messages after each session's second
	for _, id := range ids {
		want[id] = read(s, id, capture.MessageQuery{})
		after[id] = read(s, id, capture.MessageQuery{After: secondSeq(t, s, id)})
	}
	sn, release, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// Later records are not in the snapshot.
	if err := s.Write(ctx, &capture.Batch{Messages: []*capture.Message{{Seq: 100, SessionID: "a-session", ExchangeID: 1, Time: t0,
		Kind: protocol.KindFrame, Batch: -1, Raw: []byte("later"), Size: 5}}}); err != nil {
		t.Fatal(err)
	}
	if read(s, "a-session", capture.MessageQuery{}) == want["a-session"] {
		t.Fatal("the store does not show the later message")
	}
	sorted := slices.Sorted(slices.Values(ids))
	backward := slices.Clone(sorted)
	slices.Reverse(backward)
	for _, order := range [][]string{sorted, ids, backward, {"a-session", "a-session", "d-session", "a-session", "empty", "b-session"}} {
		for _, id := range order {
			if d := cmp.Diff(want[id], read(sn, id, capture.MessageQuery{})); d != "" {
				t.Errorf("order %v: session %s reads otherwise from the snapshot (-store +snapshot):\n%s", order, id, d)
			}
			if d := cmp.Diff(after[id], read(sn, id, capture.MessageQuery{After: secondSeq(t, s, id)})); d != "" {
				t.Errorf("order %v: session %s's messages after its second read otherwise from the snapshot (-store +snapshot):\n%s", order, id, d)
			}
		}
	}
	// Iterations nested in one another each read their own session.
	var outer, inner []uint64
	for m, err := range sn.Messages(ctx, "b-session", capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		outer = append(outer, m.Seq)
		for m, err := range sn.Messages(ctx, "a-session", capture.MessageQuery{Limit: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			inner = append(inner, m.Seq)
		}
	}
	if !slices.Equal(outer, []uint64{1, 2, 9, 10, 17, 18}) || len(inner) != 6 || inner[0] != 3 {
		t.Errorf("nested: outer %v, inner %v", outer, inner)
	}
}

// secondSeq is the seq of session id's second message, 0 if it has none.
func secondSeq(t *testing.T, s capture.Reader, id string) uint64 {
	n := 0
	for m, err := range s.Messages(context.Background(), id, capture.MessageQuery{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			return m.Seq
		}
	}
	return 0
}

// A snapshot lists sessions as the store does (newest first, with a query's
// bounds and limit), whether the next record is a step away from the last
// one or far from it (ids whose order is not their sessions' time order),
// and names a record missing from the time index's list as the store does.
func TestSnapshotListsSessionsAsTheStore(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), nil)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var batch capture.Batch
	for i := range 60 {
		// Every third session's id sorts far from its neighbours in time.
		id := fmt.Sprintf("s-%03d", i)
		if i%3 == 0 {
			id = fmt.Sprintf("z-%03d", 59-i)
		}
		batch.Sessions = append(batch.Sessions, &capture.Session{ID: id, Start: t0.Add(time.Duration(i) * time.Minute), Status: capture.StatusClosed})
	}
	if err := s.Write(ctx, &batch); err != nil {
		t.Fatal(err)
	}
	list := func(r capture.Reader, q capture.SessionQuery) (ids []string, errs []string) {
		for x, err := range r.Sessions(ctx, q) {
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			ids = append(ids, x.ID)
		}
		return ids, errs
	}
	compare := func(when string) {
		t.Helper()
		sn, release, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		for _, q := range []capture.SessionQuery{{}, {Limit: 7}, {Since: t0.Add(10 * time.Minute), Until: t0.Add(40 * time.Minute)}} {
			wantIDs, wantErrs := list(s, q)
			gotIDs, gotErrs := list(sn, q)
			if d := cmp.Diff(wantIDs, gotIDs); d != "" {
				t.Errorf("%s, query %+v: the snapshot lists otherwise (-store +snapshot):\n%s", when, q, d)
			}
			if d := cmp.Diff(wantErrs, gotErrs); d != "" {
				t.Errorf("%s, query %+v: the snapshot reports otherwise (-store +snapshot):\n%s", when, q, d)
			}
		}
	}
	compare("whole")
	if ids, _ := list(s, capture.SessionQuery{}); len(ids) != 60 || ids[0] != "s-059" || ids[59] != "z-059" {
		t.Fatalf("the store lists %d sessions, %v ... %v", len(ids), ids[:2], ids[len(ids)-2:])
	}
	for _, id := range []string{"s-031", "z-029"} {
		if err := badgerstore.DropSessionRecord(s, id); err != nil {
			t.Fatal(err)
		}
	}
	compare("two records missing")
	if _, errs := list(s, capture.SessionQuery{}); len(errs) != 1 || !strings.Contains(errs[0], "s-031") || !strings.Contains(errs[0], "record is missing") {
		t.Errorf("the store reports %q, want one error naming the missing records", errs)
	}
}
