package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
)

// The optional part of the suite: stores that implement capture.Editor.

func runEditor(t *testing.T, open func(t *testing.T) capture.Store, opts RunOptions) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s capture.Store, e capture.Editor)
	}{
		{"Editor/Versions", testEditVersions},
		{"Editor/Refusals", testEditRefusals},
		{"Editor/SurviveRewrite", testEditSurviveRewrite},
		{"Editor/Labels", testLabels},
		{"Editor/DeleteSession", testEditDelete},
		{"Editor/Large", testEditLarge},
		{"Editor/Concurrent", testEditConcurrent},
		{"Editor/Closed", testEditClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			tt.fn(t, s, s.(capture.Editor))
		})
	}
	if opts.Reopen != nil {
		t.Run("Editor/Reopen", func(t *testing.T) {
			t.Parallel()
			testEditReopen(t, open(t), opts.Reopen)
		})
	}
}

func mustEdit(t *testing.T, e capture.Editor, seq uint64, raw, note string) int {
	t.Helper()
	v, err := e.EditMessage(t.Context(), seq, []byte(raw), note)
	if err != nil {
		t.Fatalf("EditMessage(%d): %v", seq, err)
	}
	return v
}

func mustEdits(t *testing.T, e capture.Editor, seq uint64) []capture.Edit {
	t.Helper()
	es, err := e.MessageEdits(t.Context(), seq)
	if err != nil {
		t.Fatalf("MessageEdits(%d): %v", seq, err)
	}
	return es
}

// edited is want as a read returns it after edits to raw.
func edited(want *capture.Message, raw string, n int) *capture.Message {
	c := *want
	c.Raw, c.Size, c.Edited = []byte(raw), len(raw), want.Edited+n
	return &c
}

func editFixture(t *testing.T, s capture.Store) (full, plain *capture.Message) {
	full, plain = fullMessage(1, "s1", 1), plainMessage(2, "s1")
	write(t, s, &capture.Batch{
		Sessions: []*capture.Session{fullSession("s1", at(0))},
		Messages: []*capture.Message{full, plain},
	})
	return full, plain
}

func testEditVersions(t *testing.T, s capture.Store, e capture.Editor) {
	full, plain := editFixture(t, s)
	before := time.Now().Add(-time.Second)
	const v1, v2 = `{"jsonrpc":"2.0","id":1,"result":{"edited":1}}`, ` {"edited": [2, "<&>"]} `
	if v := mustEdit(t, e, 1, v1, "first"); v != 1 {
		t.Errorf("first EditMessage = version %d, want 1", v)
	}
	check := func(when string, want *capture.Message) {
		t.Helper()
		if d := diff(want, mustMessage(t, s, 1)); d != "" {
			t.Errorf("%s: Message(1) mismatch (-want +got):\n%s", when, d)
		}
		got := collect(t, s.Messages(t.Context(), "s1", capture.MessageQuery{}))
		if d := diff([]*capture.Message{want, plain}, got); d != "" {
			t.Errorf("%s: Messages mismatch (-want +got):\n%s", when, d)
		}
		got = collect(t, s.Messages(t.Context(), "s1", capture.MessageQuery{NoRaw: true}))
		if d := diff(noRaw([]*capture.Message{want, plain}), got); d != "" {
			t.Errorf("%s: Messages(NoRaw) mismatch (-want +got):\n%s", when, d)
		}
	}
	check("after one edit", edited(full, v1, 1))
	if v := mustEdit(t, e, 1, v2, ""); v != 2 {
		t.Errorf("second EditMessage = version %d, want 2", v)
	}
	// Raw as given: whitespace kept, nothing escaped.
	check("after two edits", edited(full, v2, 2))

	es := mustEdits(t, e, 1)
	if len(es) != 3 {
		t.Fatalf("MessageEdits = %d versions, want 3", len(es))
	}
	if es[0].Version != 0 || !bytes.Equal(es[0].Raw, full.Raw) || !es[0].Time.Equal(full.Time) || es[0].Note != "" {
		t.Errorf("version 0 = %+v, want the recorded bytes at the message's time", es[0])
	}
	for i, want := range []struct {
		raw, note string
	}{{v1, "first"}, {v2, ""}} {
		got := es[i+1]
		if got.Version != i+1 || string(got.Raw) != want.raw || got.Note != want.note {
			t.Errorf("version %d = {%d %q %q}, want {%d %q %q}", i+1, got.Version, got.Raw, got.Note, i+1, want.raw, want.note)
		}
		if got.Time.Before(before) || got.Time.After(time.Now().Add(time.Second)) {
			t.Errorf("version %d: Time %v is not when the edit was made", i+1, got.Time)
		}
	}
	if es[2].Time.Before(es[1].Time) {
		t.Errorf("version 2 at %v is before version 1 at %v", es[2].Time, es[1].Time)
	}
	// A message never edited has its original only.
	if es := mustEdits(t, e, 2); len(es) != 1 || !bytes.Equal(es[0].Raw, plain.Raw) {
		t.Errorf("MessageEdits(2) of an unedited message = %+v, want only the original", es)
	}
}

func testEditRefusals(t *testing.T, s capture.Store, e capture.Editor) {
	full, _ := editFixture(t, s)
	ctx := t.Context()
	for _, bad := range []string{``, `{"a":`, `{"a":1} x`, "\xff", `[1,]`} {
		if _, err := e.EditMessage(ctx, 1, []byte(bad), ""); !errors.Is(err, capture.ErrInvalidEdit) {
			t.Errorf("EditMessage(%q): err = %v, want ErrInvalidEdit", bad, err)
		}
	}
	if d := diff(full, mustMessage(t, s, 1)); d != "" {
		t.Errorf("after refused edits: Message(1) mismatch (-want +got):\n%s", d)
	}
	if es := mustEdits(t, e, 1); len(es) != 1 {
		t.Errorf("after refused edits: %d versions, want 1", len(es))
	}
	_, err := e.EditMessage(ctx, 99, []byte(`{}`), "")
	wantNotFound(t, "EditMessage(99)", err)
	_, err = e.MessageEdits(ctx, 99)
	wantNotFound(t, "MessageEdits(99)", err)
	wantNotFound(t, "SetLabels(missing)", e.SetLabels(ctx, "missing", []string{"x"}))
	if err := e.SetLabels(ctx, "s1", []string{"ok", ""}); !errors.Is(err, capture.ErrInvalidEdit) {
		t.Errorf("SetLabels with an empty label: err = %v, want ErrInvalidEdit", err)
	}
	if got := mustSession(t, s, "s1").Labels; !slices.Equal(got, fullSession("s1", at(0)).Labels) {
		t.Errorf("after a refused SetLabels: Labels = %q", got)
	}
}

// testEditSurviveRewrite is what the dashboard relies on while recording:
// the recorder rewrites a live session's record (and a message's, when it
// adds a finding) without knowing about edits and labels.
func testEditSurviveRewrite(t *testing.T, s capture.Store, e capture.Editor) {
	editFixture(t, s)
	const v1 = `{"edited":true}`
	mustEdit(t, e, 1, v1, "")
	if err := e.SetLabels(t.Context(), "s1", []string{"bug-7", "fixture"}); err != nil {
		t.Fatal(err)
	}
	rewritten := &capture.Session{ID: "s1", Start: at(0), Messages: 3, Status: capture.StatusClosed}
	m := fullMessage(1, "s1", 1)
	m.Raw, m.Size = []byte(`{"rewritten":true}`), 18
	m.Findings = append(m.Findings, capture.Finding{Kind: capture.FindingUnanswered, Message: "late"})
	write(t, s, &capture.Batch{Sessions: []*capture.Session{rewritten}, Messages: []*capture.Message{m}})

	want := *rewritten
	want.Labels = []string{"bug-7", "fixture"}
	checkSession(t, s, &want)
	if d := diff([]*capture.Session{&want}, collect(t, s.Sessions(t.Context(), capture.SessionQuery{}))); d != "" {
		t.Errorf("Sessions mismatch (-want +got):\n%s", d)
	}
	if d := diff(edited(m, v1, 1), mustMessage(t, s, 1)); d != "" {
		t.Errorf("Message(1) after the recorder rewrote it (-want +got):\n%s", d)
	}
	if es := mustEdits(t, e, 1); len(es) != 2 || !bytes.Equal(es[0].Raw, m.Raw) {
		t.Errorf("MessageEdits after a rewrite: %d versions, version 0 %q; want 2, the rewritten bytes", len(es), es[0].Raw)
	}
}

func testLabels(t *testing.T, s capture.Store, e capture.Editor) {
	ctx := t.Context()
	imported := &capture.Session{ID: "s1", Start: at(0), Labels: []string{"from-tape"}}
	other := &capture.Session{ID: "s2", Start: at(time.Second)}
	write(t, s, &capture.Batch{Sessions: []*capture.Session{imported, other}})
	labels := []string{"ünïcode", "with space", "<b>"}
	if err := e.SetLabels(ctx, "s1", labels); err != nil {
		t.Fatal(err)
	}
	labels[0] = "changed after the call"
	if got := mustSession(t, s, "s1").Labels; !slices.Equal(got, []string{"ünïcode", "with space", "<b>"}) {
		t.Errorf("Labels = %q, want the labels set", got)
	}
	if got := mustSession(t, s, "s2").Labels; len(got) != 0 {
		t.Errorf("s2 Labels = %q, want none", got)
	}
	// Removing them hides the record's own labels too.
	if err := e.SetLabels(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	for _, x := range collect(t, s.Sessions(ctx, capture.SessionQuery{})) {
		if len(x.Labels) != 0 {
			t.Errorf("after SetLabels(nil): %s Labels = %q, want none", x.ID, x.Labels)
		}
	}
	if err := e.SetLabels(ctx, "s2", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	got := collect(t, s.Sessions(ctx, capture.SessionQuery{}))
	if len(got) != 2 || !slices.Equal(got[0].Labels, []string{"x"}) || len(got[1].Labels) != 0 {
		t.Errorf("Sessions after labelling s2: %+v", got)
	}
}

func testEditDelete(t *testing.T, s capture.Store, e capture.Editor) {
	ctx := t.Context()
	editFixture(t, s)
	write(t, s, &capture.Batch{Sessions: []*capture.Session{{ID: "s2"}}, Messages: []*capture.Message{plainMessage(3, "s2")}})
	mustEdit(t, e, 1, `{"a":1}`, "")
	mustEdit(t, e, 3, `{"b":1}`, "")
	if err := e.SetLabels(ctx, "s1", []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	_, err := e.MessageEdits(ctx, 1)
	wantNotFound(t, "MessageEdits of a deleted message", err)
	// The same ids written again start without edits or labels.
	fresh := fullMessage(1, "s1", 1)
	write(t, s, &capture.Batch{Sessions: []*capture.Session{{ID: "s1"}}, Messages: []*capture.Message{fresh}})
	if d := diff(fresh, mustMessage(t, s, 1)); d != "" {
		t.Errorf("Message(1) written again after its session was deleted (-want +got):\n%s", d)
	}
	if got := mustSession(t, s, "s1").Labels; len(got) != 0 {
		t.Errorf("Labels of a session written again after a delete = %q, want none", got)
	}
	// Other sessions keep theirs.
	if g := mustMessage(t, s, 3); g.Edited != 1 || string(g.Raw) != `{"b":1}` {
		t.Errorf("Message(3) of another session: Edited %d Raw %q, want its edit", g.Edited, g.Raw)
	}
}

func testEditLarge(t *testing.T, s capture.Store, e capture.Editor) {
	editFixture(t, s)
	big := `{"text":"` + strings.Repeat("0123456789abcdef", 3<<20/16) + `"}`
	mustEdit(t, e, 1, big, strings.Repeat("n", 1000))
	if g := mustMessage(t, s, 1); string(g.Raw) != big || g.Size != len(big) {
		t.Errorf("a 3 MiB edit: read %d bytes (Size %d), want %d", len(g.Raw), g.Size, len(big))
	}
	es := mustEdits(t, e, 1)
	if len(es) != 2 || string(es[1].Raw) != big || len(es[1].Note) != 1000 {
		t.Errorf("MessageEdits of a 3 MiB edit did not round-trip")
	}
	mustEdit(t, e, 1, `{"small":1}`, "")
	if g := mustMessage(t, s, 1); string(g.Raw) != `{"small":1}` {
		t.Errorf("after a small edit over a large one: Raw %q", g.Raw[:min(len(g.Raw), 40)])
	}
}

func testEditConcurrent(t *testing.T, s capture.Store, e capture.Editor) {
	editFixture(t, s)
	const workers, each = 8, 5
	var mu sync.Mutex
	var versions []int
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				v, err := e.EditMessage(t.Context(), 1, fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i), "")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				versions = append(versions, v)
				mu.Unlock()
				_ = mustMessage(t, s, 1)
			}
		})
	}
	wg.Wait()
	slices.Sort(versions)
	for i, v := range versions {
		if v != i+1 {
			t.Fatalf("concurrent edits got versions %v, want 1..%d each once", versions, workers*each)
		}
	}
	if n := len(mustEdits(t, e, 1)); n != workers*each+1 {
		t.Errorf("MessageEdits = %d versions, want %d", n, workers*each+1)
	}
}

func testEditClosed(t *testing.T, s capture.Store, e capture.Editor) {
	editFixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := e.EditMessage(t.Context(), 1, []byte(`{}`), "")
	if !errors.Is(err, capture.ErrClosed) {
		t.Errorf("EditMessage after Close: %v, want ErrClosed", err)
	}
	if _, err := e.MessageEdits(t.Context(), 1); !errors.Is(err, capture.ErrClosed) {
		t.Errorf("MessageEdits after Close: %v, want ErrClosed", err)
	}
	if err := e.SetLabels(t.Context(), "s1", nil); !errors.Is(err, capture.ErrClosed) {
		t.Errorf("SetLabels after Close: %v, want ErrClosed", err)
	}
}

func testEditReopen(t *testing.T, s capture.Store, reopen func(*testing.T, capture.Store) capture.Store) {
	full, _ := editFixture(t, s)
	e := s.(capture.Editor)
	mustEdit(t, e, 1, `{"v":1}`, "one")
	mustEdit(t, e, 1, `{"v":2}`, "two")
	if err := e.SetLabels(t.Context(), "s1", []string{"kept"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	e = s.(capture.Editor)
	if d := diff(edited(full, `{"v":2}`, 2), mustMessage(t, s, 1)); d != "" {
		t.Errorf("after reopen: Message(1) mismatch (-want +got):\n%s", d)
	}
	if es := mustEdits(t, e, 1); len(es) != 3 || es[2].Note != "two" {
		t.Errorf("after reopen: %d versions, want 3", len(es))
	}
	if got := mustSession(t, s, "s1").Labels; !slices.Equal(got, []string{"kept"}) {
		t.Errorf("after reopen: Labels = %q, want [kept]", got)
	}
	// Deleting after a reopen deletes the edits loaded from disk too.
	if err := s.DeleteSession(t.Context(), "s1"); err != nil {
		t.Fatal(err)
	}
	write(t, s, &capture.Batch{Sessions: []*capture.Session{{ID: "s1"}}, Messages: []*capture.Message{full}})
	if g := mustMessage(t, s, 1); g.Edited != full.Edited {
		t.Errorf("after delete and rewrite: Edited = %d, want %d", g.Edited, full.Edited)
	}
}
