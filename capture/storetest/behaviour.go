package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// Errors, lifecycle, concurrency and isolation.

func testNotFound(t *testing.T, s capture.Store) {
	ctx := t.Context()
	write(t, s, &capture.Batch{
		Sessions:  []*capture.Session{{ID: "s1"}},
		Exchanges: []*capture.Exchange{{ID: 1, SessionID: "s1"}},
		Messages:  []*capture.Message{plainMessage(1, "s1")},
	})
	_, err := s.Session(ctx, "s2")
	wantNotFound(t, "Session(s2)", err)
	_, err = s.Session(ctx, "s")
	wantNotFound(t, "Session(s), a prefix of s1", err)
	_, err = s.Exchange(ctx, 2)
	wantNotFound(t, "Exchange(2)", err)
	_, err = s.Exchange(ctx, 0)
	wantNotFound(t, "Exchange(0)", err)
	_, err = s.Message(ctx, 2)
	wantNotFound(t, "Message(2)", err)
	_, err = s.Message(ctx, 0)
	wantNotFound(t, "Message(0)", err)
	wantNotFound(t, "DeleteSession(s2)", s.DeleteSession(ctx, "s2"))

	// Unknown sessions have no records; that is not an error.
	if got := collect(t, s.Exchanges(ctx, "s2")); len(got) != 0 {
		t.Errorf("Exchanges(s2) = %v, want none", exchangeIDs(got))
	}
	if got := collect(t, s.Messages(ctx, "s2", capture.MessageQuery{})); len(got) != 0 {
		t.Errorf("Messages(s2) = %v, want none", seqs(got))
	}
	// Deleting a missing session changed nothing.
	mustSession(t, s, "s1")
	mustExchange(t, s, 1)
	mustMessage(t, s, 1)
}

func testDeleteSession(t *testing.T, s capture.Store) {
	ctx := t.Context()
	var b capture.Batch
	for i, sid := range []string{"keep", "drop"} {
		b.Sessions = append(b.Sessions, fullSession(sid, at(time.Duration(i)*time.Hour)))
		for j := range 5 {
			id := uint64(i*10 + j + 1)
			b.Exchanges = append(b.Exchanges, fullExchange(id, sid, at(0)))
			b.Messages = append(b.Messages, fullMessage(id, sid, id), plainMessage(id+100, sid))
		}
	}
	write(t, s, &b)

	if err := s.DeleteSession(ctx, "drop"); err != nil {
		t.Fatalf("DeleteSession(drop): %v", err)
	}
	_, err := s.Session(ctx, "drop")
	wantNotFound(t, "Session(drop) after delete", err)
	for j := range 5 {
		id := uint64(10 + j + 1)
		_, err := s.Exchange(ctx, id)
		wantNotFound(t, fmt.Sprintf("Exchange(%d) of a deleted session", id), err)
		_, err = s.Message(ctx, id)
		wantNotFound(t, fmt.Sprintf("Message(%d) of a deleted session", id), err)
		_, err = s.Message(ctx, id+100)
		wantNotFound(t, fmt.Sprintf("Message(%d) of a deleted session", id+100), err)
	}
	if got := collect(t, s.Exchanges(ctx, "drop")); len(got) != 0 {
		t.Errorf("Exchanges(drop) after delete = %v, want none", exchangeIDs(got))
	}
	if got := collect(t, s.Messages(ctx, "drop", capture.MessageQuery{})); len(got) != 0 {
		t.Errorf("Messages(drop) after delete = %v, want none", seqs(got))
	}
	if got := sessionIDs(collect(t, s.Sessions(ctx, capture.SessionQuery{}))); !slices.Equal(got, []string{"keep"}) {
		t.Errorf("Sessions after delete = %q, want [keep]", got)
	}

	// The other session is whole.
	checkSession(t, s, b.Sessions[0])
	if d := diff(b.Exchanges[:5], collect(t, s.Exchanges(ctx, "keep"))); d != "" {
		t.Errorf("Exchanges(keep) mismatch (-want +got):\n%s", d)
	}
	var keepMsgs []*capture.Message
	for _, m := range b.Messages {
		if m.SessionID == "keep" {
			keepMsgs = append(keepMsgs, m)
		}
	}
	slices.SortFunc(keepMsgs, func(a, b *capture.Message) int { return int(a.Seq) - int(b.Seq) })
	if d := diff(keepMsgs, collect(t, s.Messages(ctx, "keep", capture.MessageQuery{}))); d != "" {
		t.Errorf("Messages(keep) mismatch (-want +got):\n%s", d)
	}

	wantNotFound(t, "DeleteSession(drop) twice", s.DeleteSession(ctx, "drop"))

	// The ID can be used again, and starts empty.
	again := &capture.Session{ID: "drop", Start: at(time.Minute)}
	write(t, s, &capture.Batch{Sessions: []*capture.Session{again}, Messages: []*capture.Message{plainMessage(500, "drop")}})
	checkSession(t, s, again)
	if got := seqs(collect(t, s.Messages(ctx, "drop", capture.MessageQuery{}))); !slices.Equal(got, []uint64{500}) {
		t.Errorf("Messages(drop) after rewrite = %v, want [500]", got)
	}
	if got := collect(t, s.Exchanges(ctx, "drop")); len(got) != 0 {
		t.Errorf("Exchanges(drop) after rewrite = %v, want none", exchangeIDs(got))
	}
}

func testLastIDs(t *testing.T, s capture.Store) {
	if seq, x := lastIDs(t, s); seq != 0 || x != 0 {
		t.Fatalf("LastIDs of an empty store = %d, %d, want 0, 0", seq, x)
	}
	write(t, s, &capture.Batch{
		Sessions:  []*capture.Session{{ID: "s1"}, {ID: "s2"}},
		Exchanges: []*capture.Exchange{{ID: 9, SessionID: "s2"}, {ID: 2, SessionID: "s1"}},
		Messages:  []*capture.Message{plainMessage(3, "s1"), plainMessage(10, "s2"), plainMessage(7, "s1")},
	})
	if seq, x := lastIDs(t, s); seq != 10 || x != 9 {
		t.Errorf("LastIDs = %d, %d, want 10, 9", seq, x)
	}
	// Lower IDs written later do not lower them; only messages count for
	// seq and only exchanges for the exchange ID.
	write(t, s, &capture.Batch{
		Exchanges: []*capture.Exchange{{ID: 4, SessionID: "s1", Status: 200}},
		Messages:  []*capture.Message{plainMessage(5, "s1")},
	})
	if seq, x := lastIDs(t, s); seq != 10 || x != 9 {
		t.Errorf("after writing lower IDs: LastIDs = %d, %d, want 10, 9", seq, x)
	}
	// Deleting the session holding the highest IDs does not hand them out
	// again.
	if err := s.DeleteSession(t.Context(), "s2"); err != nil {
		t.Fatal(err)
	}
	if seq, x := lastIDs(t, s); seq != 10 || x != 9 {
		t.Errorf("after deleting s2: LastIDs = %d, %d, want 10, 9 (high-water marks)", seq, x)
	}
	write(t, s, &capture.Batch{Messages: []*capture.Message{plainMessage(1<<63+1, "s1")}})
	if seq, _ := lastIDs(t, s); seq != 1<<63+1 {
		t.Errorf("LastIDs seq = %d, want %d", seq, uint64(1<<63+1))
	}
}

func testClosed(t *testing.T, s capture.Store) {
	ctx := t.Context()
	write(t, s, &capture.Batch{
		Sessions:  []*capture.Session{{ID: "s1"}},
		Exchanges: []*capture.Exchange{{ID: 1, SessionID: "s1"}},
		Messages:  []*capture.Message{plainMessage(1, "s1")},
	})
	// An iterator made before Close but run after it fails too.
	early := s.Messages(ctx, "s1", capture.MessageQuery{})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	wantClosed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, capture.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", what, err)
		}
	}
	wantClosed("Write", s.Write(ctx, &capture.Batch{Sessions: []*capture.Session{{ID: "s2"}}}))
	wantClosed("Write of an empty batch", s.Write(ctx, &capture.Batch{}))
	_, err := s.Session(ctx, "s1")
	wantClosed("Session", err)
	_, err = s.Exchange(ctx, 1)
	wantClosed("Exchange", err)
	_, err = s.Message(ctx, 1)
	wantClosed("Message", err)
	wantClosed("DeleteSession", s.DeleteSession(ctx, "s1"))
	_, _, err = s.LastIDs(ctx)
	wantClosed("LastIDs", err)

	iterClosed := func(what string, n int, err error) {
		t.Helper()
		if n != 1 {
			t.Errorf("%s after Close yielded %d times, want once", what, n)
		}
		wantClosed(what, err)
	}
	var n int
	for _, err = range s.Sessions(ctx, capture.SessionQuery{}) {
		n++
	}
	iterClosed("Sessions", n, err)
	n = 0
	for _, err = range s.Exchanges(ctx, "s1") {
		n++
	}
	iterClosed("Exchanges", n, err)
	n = 0
	for _, err = range s.Messages(ctx, "s1", capture.MessageQuery{}) {
		n++
	}
	iterClosed("Messages", n, err)
	n = 0
	for _, err = range early {
		n++
	}
	iterClosed("Messages made before Close", n, err)
}

func testContext(t *testing.T, s capture.Store) {
	var b capture.Batch
	for i := range 20 {
		b.Sessions = append(b.Sessions, &capture.Session{ID: fmt.Sprintf("s%02d", i), Start: at(time.Duration(i) * time.Second)})
		b.Exchanges = append(b.Exchanges, &capture.Exchange{ID: uint64(i + 1), SessionID: "s00"})
		b.Messages = append(b.Messages, plainMessage(uint64(i+1), "s00"))
	}
	write(t, s, &b)

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	wantCanceled := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: err = %v, want context.Canceled", what, err)
		}
	}
	wantCanceled("Write", s.Write(cancelled, &capture.Batch{Sessions: []*capture.Session{{ID: "new"}}, Messages: []*capture.Message{plainMessage(99, "new")}}))
	if _, err := s.Session(t.Context(), "new"); !errors.Is(err, capture.ErrNotFound) {
		t.Errorf("a Write with a cancelled context stored its session (err = %v)", err)
	}
	if _, err := s.Message(t.Context(), 99); !errors.Is(err, capture.ErrNotFound) {
		t.Errorf("a Write with a cancelled context stored its message (err = %v)", err)
	}
	_, err := s.Session(cancelled, "s00")
	wantCanceled("Session", err)
	_, err = s.Exchange(cancelled, 1)
	wantCanceled("Exchange", err)
	_, err = s.Message(cancelled, 1)
	wantCanceled("Message", err)
	_, _, err = s.LastIDs(cancelled)
	wantCanceled("LastIDs", err)
	wantCanceled("DeleteSession", s.DeleteSession(cancelled, "s00"))
	mustSession(t, s, "s00")

	// Already cancelled: the first yield is the error.
	for _, err := range s.Sessions(cancelled, capture.SessionQuery{}) {
		wantCanceled("Sessions", err)
		break
	}
	for _, err := range s.Exchanges(cancelled, "s00") {
		wantCanceled("Exchanges", err)
		break
	}
	for _, err := range s.Messages(cancelled, "s00", capture.MessageQuery{}) {
		wantCanceled("Messages", err)
		break
	}

	// Cancelled while iterating: one error, then the iteration stops.
	midway := func(what string, run func(ctx context.Context, yield func(error) bool)) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var ok, errs int
		var last error
		run(ctx, func(err error) bool {
			if err != nil {
				errs++
				last = err
				return true // keep asking: the iterator must stop on its own
			}
			ok++
			if ok == 3 {
				cancel()
			}
			return true
		})
		if ok != 3 || errs != 1 {
			t.Errorf("%s cancelled after 3 records: got %d records and %d errors, want 3 and 1", what, ok, errs)
		}
		wantCanceled(what+" cancelled midway", last)
	}
	midway("Sessions", func(ctx context.Context, yield func(error) bool) {
		for _, err := range s.Sessions(ctx, capture.SessionQuery{}) {
			if !yield(err) {
				return
			}
		}
	})
	midway("Exchanges", func(ctx context.Context, yield func(error) bool) {
		for _, err := range s.Exchanges(ctx, "s00") {
			if !yield(err) {
				return
			}
		}
	})
	midway("Messages", func(ctx context.Context, yield func(error) bool) {
		for _, err := range s.Messages(ctx, "s00", capture.MessageQuery{}) {
			if !yield(err) {
				return
			}
		}
	})
	midway("Messages(NoRaw)", func(ctx context.Context, yield func(error) bool) {
		for _, err := range s.Messages(ctx, "s00", capture.MessageQuery{NoRaw: true}) {
			if !yield(err) {
				return
			}
		}
	})
}

func testConcurrent(t *testing.T, s capture.Store) {
	const (
		writers = 4
		batches = 25
		perB    = 20
	)
	ctx := t.Context()
	var wg sync.WaitGroup
	errc := make(chan error, writers+2)
	for w := range writers {
		wg.Go(func() {
			sid := fmt.Sprintf("w%d", w)
			for b := range batches {
				batch := &capture.Batch{
					Sessions:  []*capture.Session{{ID: sid, Start: at(time.Duration(w) * time.Second), Messages: (b + 1) * perB}},
					Exchanges: []*capture.Exchange{{ID: uint64(w*batches + b + 1), SessionID: sid}},
				}
				for i := range perB {
					batch.Messages = append(batch.Messages, plainMessage(uint64(w*100000+b*perB+i+1), sid))
				}
				if err := s.Write(ctx, batch); err != nil {
					errc <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				for _, err := range s.Sessions(ctx, capture.SessionQuery{}) {
					if err != nil {
						errc <- fmt.Errorf("reader %d: Sessions: %w", r, err)
						return
					}
				}
				sid := fmt.Sprintf("w%d", n%writers)
				var prev uint64
				for m, err := range s.Messages(ctx, sid, capture.MessageQuery{NoRaw: r == 0}) {
					if err != nil {
						errc <- fmt.Errorf("reader %d: Messages: %w", r, err)
						return
					}
					if m.Seq <= prev {
						errc <- fmt.Errorf("reader %d: Messages(%s) yielded %d after %d", r, sid, m.Seq, prev)
						return
					}
					prev = m.Seq
				}
				if prev != 0 {
					if _, err := s.Message(ctx, prev); err != nil {
						errc <- fmt.Errorf("reader %d: Message(%d) just listed: %w", r, prev, err)
						return
					}
				}
				if _, _, err := s.LastIDs(ctx); err != nil {
					errc <- fmt.Errorf("reader %d: LastIDs: %w", r, err)
					return
				}
				for _, err := range s.Exchanges(ctx, sid) {
					if err != nil {
						errc <- fmt.Errorf("reader %d: Exchanges: %w", r, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for w := range writers {
		sid := fmt.Sprintf("w%d", w)
		got := collect(t, s.Messages(ctx, sid, capture.MessageQuery{}))
		if len(got) != batches*perB {
			t.Errorf("Messages(%s): %d messages, want %d", sid, len(got), batches*perB)
			continue
		}
		for i, m := range got {
			if want := plainMessage(uint64(w*100000+i+1), sid); diff(want, m) != "" {
				t.Errorf("Messages(%s)[%d] mismatch (-want +got):\n%s", sid, i, diff(want, m))
				break
			}
		}
		if n := len(collect(t, s.Exchanges(ctx, sid))); n != batches {
			t.Errorf("Exchanges(%s): %d, want %d", sid, n, batches)
		}
		if g := mustSession(t, s, sid); g.Messages != batches*perB {
			t.Errorf("Session(%s).Messages = %d, want the last write's %d", sid, g.Messages, batches*perB)
		}
	}
	if seq, x := lastIDs(t, s); seq != (writers-1)*100000+batches*perB || x != writers*batches {
		t.Errorf("LastIDs = %d, %d, want %d, %d", seq, x, (writers-1)*100000+batches*perB, writers*batches)
	}
}

func testEarlyBreak(t *testing.T, s capture.Store) {
	ctx := t.Context()
	var b capture.Batch
	for i := range 50 {
		b.Sessions = append(b.Sessions, &capture.Session{ID: fmt.Sprintf("s%02d", i), Start: at(time.Duration(i) * time.Second)})
		b.Exchanges = append(b.Exchanges, &capture.Exchange{ID: uint64(i + 1), SessionID: "s00"})
		b.Messages = append(b.Messages, plainMessage(uint64(i+1), "s00"))
	}
	write(t, s, &b)
	// Break out of many iterations: nothing may leak that blocks writes,
	// reads or Close.
	for range 20 {
		for x, err := range s.Sessions(ctx, capture.SessionQuery{}) {
			if err != nil || x.ID != "s49" {
				t.Fatalf("Sessions first = %v, %v", x, err)
			}
			break
		}
		for _, err := range s.Exchanges(ctx, "s00") {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		for _, err := range s.Messages(ctx, "s00", capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		for _, err := range s.Messages(ctx, "s00", capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	write(t, s, &capture.Batch{Messages: []*capture.Message{plainMessage(1000, "s00")}})
	if err := s.DeleteSession(ctx, "s01"); err != nil {
		t.Fatal(err)
	}
	if n := len(collect(t, s.Messages(ctx, "s00", capture.MessageQuery{}))); n != 51 {
		t.Errorf("Messages after early breaks: %d, want 51", n)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close blocked after iterations ended early")
	}
}

// testSnapshot checks that an iteration sees the store as it was when it
// began, even though its own loop body writes and deletes.
func testSnapshot(t *testing.T, s capture.Store) {
	ctx := t.Context()
	var b capture.Batch
	for i := range 10 {
		b.Sessions = append(b.Sessions, &capture.Session{ID: fmt.Sprintf("s%d", i), Start: at(time.Duration(i) * time.Second)})
		b.Exchanges = append(b.Exchanges, &capture.Exchange{ID: uint64(i + 1), SessionID: "s0"})
		b.Messages = append(b.Messages, plainMessage(uint64(i+1), "s0"))
	}
	write(t, s, &b)

	var got []uint64
	for m, err := range s.Messages(ctx, "s0", capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Seq)
		if m.Seq == 1 {
			replaced := plainMessage(5, "s0")
			replaced.Raw = []byte("changed")
			write(t, s, &capture.Batch{Messages: []*capture.Message{plainMessage(100, "s0"), plainMessage(3, "s9"), replaced}})
		}
		if m.Seq == 5 && string(m.Raw) == "changed" {
			t.Errorf("Messages yielded message 5 as written after the iteration began")
		}
	}
	if want := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("Messages while writing = %v, want the snapshot %v", got, want)
	}

	var ids []string
	for x, err := range s.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x.ID)
		if x.ID == "s9" {
			write(t, s, &capture.Batch{Sessions: []*capture.Session{{ID: "s10", Start: at(-time.Hour)}}})
			if err := s.DeleteSession(ctx, "s5"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []string{"s9", "s8", "s7", "s6", "s5", "s4", "s3", "s2", "s1", "s0"}; !slices.Equal(ids, want) {
		t.Errorf("Sessions while writing = %q, want the snapshot %q", ids, want)
	}

	var xids []uint64
	for x, err := range s.Exchanges(ctx, "s0") {
		if err != nil {
			t.Fatal(err)
		}
		xids = append(xids, x.ID)
		if x.ID == 1 {
			write(t, s, &capture.Batch{Exchanges: []*capture.Exchange{{ID: 50, SessionID: "s0"}}})
		}
	}
	if want := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(xids, want) {
		t.Errorf("Exchanges while writing = %v, want the snapshot %v", xids, want)
	}
}

func testNoAliasing(t *testing.T, s capture.Store) {
	ctx := t.Context()
	sess := fullSession("s1", at(0))
	x := fullExchange(1, "s1", at(0))
	m := fullMessage(1, "s1", 1)
	write(t, s, &capture.Batch{Sessions: []*capture.Session{sess}, Exchanges: []*capture.Exchange{x}, Messages: []*capture.Message{m}})
	wantS, wantX, wantM := fullSession("s1", at(0)), fullExchange(1, "s1", at(0)), fullMessage(1, "s1", 1)

	// Change what was written...
	sess.Labels[0] = "changed"
	sess.ClientCapabilities[0] = '['
	sess.ID = "other"
	x.RequestHeader["Content-Type"][0] = "changed"
	x.ResponseHeader.Set("X-New", "1")
	x.FindingList[0].Message = "changed"
	m.Raw[0] = '['
	m.ID[0] = '9'
	m.SSE.Prefix[0] = 'X'
	m.SSE.ID = "changed"
	m.Findings[0].Message = "changed"
	m.Seq = 2

	// ...and what was read.
	for _, mutate := range []bool{false, true} {
		gs, gx, gm := mustSession(t, s, "s1"), mustExchange(t, s, 1), mustMessage(t, s, 1)
		if d := diff(wantS, gs); d != "" {
			t.Errorf("Session changed by a caller (-want +got):\n%s", d)
		}
		if d := diff(wantX, gx); d != "" {
			t.Errorf("Exchange changed by a caller (-want +got):\n%s", d)
		}
		if d := diff(wantM, gm); d != "" {
			t.Errorf("Message changed by a caller (-want +got):\n%s", d)
		}
		listed := collect(t, s.Messages(ctx, "s1", capture.MessageQuery{}))
		if d := diff([]*capture.Message{wantM}, listed); d != "" {
			t.Errorf("Messages changed by a caller (-want +got):\n%s", d)
		}
		if mutate {
			break
		}
		gs.Labels[1] = "changed"
		gs.ServerCapabilities[0] = '['
		gx.RequestHeader["Accept"][1] = "changed"
		gx.FindingList[1].Kind = "changed"
		gm.Raw[1] = 'x'
		gm.SSE.Suffix[0] = 'x'
		gm.ID[0] = '7'
		gm.Findings[1].Kind = "changed"
		listed[0].Raw[2] = 'x'
		listed[0].SSE.Whole[0] = 'x'
		for sx := range s.Sessions(ctx, capture.SessionQuery{}) {
			sx.Labels[0] = "changed"
		}
		for xx := range s.Exchanges(ctx, "s1") {
			xx.RequestHeader.Del("Accept")
		}
	}
}

func testReopen(t *testing.T, s capture.Store, reopen func(*testing.T, capture.Store) capture.Store) {
	ctx := t.Context()
	var b capture.Batch
	for i, sid := range []string{"s1", "s2", "s3"} {
		b.Sessions = append(b.Sessions, fullSession(sid, at(time.Duration(i)*time.Minute)))
		for j := range 3 {
			id := uint64(i*3 + j + 1)
			b.Exchanges = append(b.Exchanges, fullExchange(id, sid, at(0)))
			b.Messages = append(b.Messages, fullMessage(id, sid, id))
		}
	}
	write(t, s, &b)
	check := func(s capture.Store, sessions []*capture.Session) {
		t.Helper()
		got := collect(t, s.Sessions(ctx, capture.SessionQuery{}))
		want := slices.Clone(sessions)
		slices.Reverse(want)
		if d := diff(want, got); d != "" {
			t.Errorf("Sessions mismatch (-want +got):\n%s", d)
		}
		for _, sess := range sessions {
			var wantX []*capture.Exchange
			var wantM []*capture.Message
			for _, x := range b.Exchanges {
				if x.SessionID == sess.ID {
					wantX = append(wantX, x)
				}
			}
			for _, m := range b.Messages {
				if m.SessionID == sess.ID {
					wantM = append(wantM, m)
				}
			}
			if d := diff(wantX, collect(t, s.Exchanges(ctx, sess.ID))); d != "" {
				t.Errorf("Exchanges(%s) mismatch (-want +got):\n%s", sess.ID, d)
			}
			if d := diff(wantM, collect(t, s.Messages(ctx, sess.ID, capture.MessageQuery{}))); d != "" {
				t.Errorf("Messages(%s) mismatch (-want +got):\n%s", sess.ID, d)
			}
			for _, m := range wantM {
				if d := diff(m, mustMessage(t, s, m.Seq)); d != "" {
					t.Errorf("Message(%d) mismatch (-want +got):\n%s", m.Seq, d)
				}
			}
		}
	}

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = reopen(t, s)
	check(s, b.Sessions)
	if seq, x := lastIDs(t, s); seq != 9 || x != 9 {
		t.Errorf("after reopen: LastIDs = %d, %d, want 9, 9", seq, x)
	}

	// Delete the session holding the highest IDs, write more, reopen:
	// the delete stuck, the new records are there, and the high-water
	// marks held.
	if err := s.DeleteSession(ctx, "s3"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	b.Exchanges = slices.DeleteFunc(b.Exchanges, func(x *capture.Exchange) bool { return x.SessionID == "s3" })
	b.Messages = slices.DeleteFunc(b.Messages, func(m *capture.Message) bool { return m.SessionID == "s3" })
	more := fullMessage(10, "s1", 1)
	b.Messages = slices.Insert(b.Messages, 3, more)
	write(t, s, &capture.Batch{Messages: []*capture.Message{more}})
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s = reopen(t, s)
	check(s, b.Sessions[:2])
	_, err := s.Session(ctx, "s3")
	wantNotFound(t, "Session(s3) deleted before reopen", err)
	_, err = s.Message(ctx, 9)
	wantNotFound(t, "Message(9) deleted before reopen", err)
	if seq, x := lastIDs(t, s); seq != 10 || x != 9 {
		t.Errorf("after delete and reopen: LastIDs = %d, %d, want 10, 9", seq, x)
	}
}
