package spool_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/spool"
	"github.com/mcptape/mcptape/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// wrapSide records n tool calls of a stdio server into a spool in dir, as
// `mcptape wrap` does, and returns the spool's path.
func wrapSide(t *testing.T, dir, name string, n int, end bool) string {
	t.Helper()
	return wrapSideWith(t, dir, name, n, end, nil)
}

// wrapSideWith is wrapSide with the spool's options.
func wrapSideWith(t *testing.T, dir, name string, n int, end bool, opts *spool.Options) string {
	t.Helper()
	w, err := spool.Create(dir, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := capture.NewRecorder(context.Background(), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := rec.OpenStream(&capture.StreamInfo{Name: name, Command: capture.Command{Args: []string{"server", name}}})
	s.Line(protocol.ClientToServer, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
	s.Line(protocol.ServerToClient, []byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"`+name+`","version":"1"}}}`))
	for i := 1; i <= n; i++ {
		s.Line(protocol.ClientToServer, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"i":%d}}}`, i, i))
		s.Line(protocol.ServerToClient, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}`, i))
		if i%10 == 0 {
			if err := rec.Sync(context.Background()); err != nil { // several records
				t.Fatal(err)
			}
		}
	}
	s.Close("exited with code 0")
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if end {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return w.Path()
}

// owner opens the store in dir with a recorder and an ingester.
type owner struct {
	store *badgerstore.Store
	rec   *capture.Recorder
	ing   *spool.Ingester
}

func openOwner(t *testing.T, dir string) *owner {
	t.Helper()
	return openOwnerWith(t, dir, nil)
}

// openOwnerWith is openOwner with the ingester's options.
func openOwnerWith(t *testing.T, dir string, opts *spool.IngestOptions) *owner {
	t.Helper()
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := capture.NewRecorder(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &owner{store: st, rec: rec, ing: spool.NewIngester(dir, rec, st, opts)}
}

func (o *owner) close(t *testing.T) {
	t.Helper()
	if err := o.rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := o.store.Close(); err != nil {
		t.Fatal(err)
	}
}

// messagesOf returns a session's messages by the store.
func messagesOf(t *testing.T, st capture.Reader, session string) []*capture.Message {
	t.Helper()
	var out []*capture.Message
	for m, err := range st.Messages(context.Background(), session, capture.MessageQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func onlySessions(t *testing.T, st capture.Reader) []*capture.Session {
	t.Helper()
	var out []*capture.Session
	for s, err := range st.Sessions(context.Background(), capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// Several wraps spool with no owner running; the next owner ingests them
// all, renumbered into its sequence with their links intact, and deletes
// the spools.
func TestIngestAfterTheFact(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 {
		wrapSide(t, dir, fmt.Sprintf("srv%d", i), 25, true)
	}
	o := openOwner(t, dir)
	defer o.close(t)
	n, err := o.ing.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 3*(2+50) {
		t.Errorf("ingested %d messages, want %d", n, 3*52)
	}
	sessions := onlySessions(t, o.store)
	if len(sessions) != 3 {
		t.Fatalf("%d sessions, want 3", len(sessions))
	}
	seen := map[uint64]bool{}
	for _, s := range sessions {
		ms := messagesOf(t, o.store, s.ID)
		if len(ms) != 52 || s.Messages != 52 || s.Leg != capture.LegStdio || s.Status != capture.StatusClosed {
			t.Errorf("session %s (%s): %d messages stored, record says %d, leg %s, status %s", s.ID, s.Route, len(ms), s.Messages, s.Leg, s.Status)
		}
		bySeq := map[uint64]*capture.Message{}
		for _, m := range ms {
			if seen[m.Seq] {
				t.Errorf("seq %d stored twice", m.Seq)
			}
			seen[m.Seq] = true
			bySeq[m.Seq] = m
		}
		for _, m := range ms {
			if m.Kind == protocol.KindResult {
				req := bySeq[m.Links.Request]
				if req == nil || req.Kind != protocol.KindRequest || string(req.ID) != string(m.ID) {
					t.Errorf("session %s: result %s links to %d, not its request", s.ID, m.Raw, m.Links.Request)
				}
			}
		}
	}
	if files, _ := spool.Files(dir); len(files) != 0 {
		t.Errorf("spools left after ingesting: %q", files)
	}
}

// A wrap that exports its own spans says so in its spool: the owner's
// ingester names that wrap's session, once, before it is ingested, and
// never another wrap's; both are stored whole.
func TestIngestTellsTracedSessions(t *testing.T) {
	dir := t.TempDir()
	wrapSideWith(t, dir, "traced", 25, true, &spool.Options{Traced: true})
	wrapSide(t, dir, "plain", 25, true)
	var o *owner
	var told []string
	traced := func(id string) {
		told = append(told, id)
		if n := len(messagesOf(t, o.store, id)); n != 0 {
			t.Errorf("session %s told after %d of its messages were stored", id, n)
		}
	}
	o = openOwnerWith(t, dir, &spool.IngestOptions{Traced: traced})
	defer o.close(t)
	st := o.store
	if _, err := o.ing.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	sessions := onlySessions(t, st)
	if len(sessions) != 2 {
		t.Fatalf("%d sessions, want 2", len(sessions))
	}
	var want []string
	for _, s := range sessions {
		if n := len(messagesOf(t, st, s.ID)); n != 52 {
			t.Errorf("session %s (%s): %d messages stored, want 52", s.ID, s.Route, n)
		}
		if s.Route == "traced" {
			want = append(want, s.ID)
		}
	}
	if len(want) != 1 || !slices.Equal(told, want) {
		t.Errorf("told %q, want the traced wrap's session alone, once: %q", told, want)
	}
}

// An owner that stops half way, and the next one, store every message
// once: the second learns from the store what the first ingested.
func TestIngestResumesWithoutDuplicates(t *testing.T) {
	dir := t.TempDir()
	path := wrapSide(t, dir, "srv", 40, false) // the wrap is "still running": no End record
	// Hold the spool as a running wrap would, so nobody deletes it.
	var recs []*spool.Record
	for r, err := range spool.Read(path, 0) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) < 3 {
		t.Fatalf("the spool has %d records, want several", len(recs))
	}
	// The first owner ingests only the first records.
	o := openOwner(t, dir)
	remap := capture.NewRemap()
	for _, r := range recs[:len(recs)/2] {
		if err := o.rec.Ingest(context.Background(), r.Batch, remap); err != nil {
			t.Fatal(err)
		}
	}
	o.close(t)
	o = openOwner(t, dir)
	defer o.close(t)
	if _, err := o.ing.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := onlySessions(t, o.store)
	if len(s) != 1 {
		t.Fatalf("%d sessions, want 1", len(s))
	}
	ms := messagesOf(t, o.store, s[0].ID)
	if len(ms) != 82 {
		t.Errorf("%d messages stored after the second owner, want 82 (each once)", len(ms))
	}
}

// A spool cut short mid-record (its wrap was killed while writing) yields
// every whole record and nothing of the cut one.
func TestCutSpoolYieldsWholeRecords(t *testing.T) {
	dir := t.TempDir()
	path := wrapSide(t, dir, "srv", 30, false)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	whole := 0
	for _, err := range spool.Read(path, 0) {
		if err != nil {
			t.Fatal(err)
		}
		whole++
	}
	if err := os.Truncate(path, fi.Size()-5); err != nil {
		t.Fatal(err)
	}
	cut := 0
	for _, err := range spool.Read(path, 0) {
		if err != nil {
			t.Fatal(err)
		}
		cut++
	}
	if cut != whole-1 {
		t.Errorf("%d records readable after cutting the last one, %d before", cut, whole)
	}
	// And garbage in the middle ends the readable part there.
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, "bad"+spool.Ext), b, 0o600); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range spool.Read(filepath.Join(dir, "bad"+spool.Ext), 0) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n >= cut {
		t.Errorf("a flipped byte mid-file still yields %d records of %d", n, cut)
	}
}

// A spool being created is never taken for a dead wrap's.
func TestNewSpoolIsLocked(t *testing.T) {
	w, err := spool.Create(t.TempDir(), "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !spool.Running(w.Path()) {
		t.Error("a spool whose writer is open is not Running")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if spool.Running(w.Path()) {
		t.Error("a closed spool is still Running")
	}
}

// What a wrap records reaches the owner's metrics as HTTP traffic does: each
// answered call's duration under its method, tool and the stdio leg, and
// the tool errors.
func TestIngestFeedsMetrics(t *testing.T) {
	dir := t.TempDir()
	w, err := spool.Create(dir, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	wrec, err := capture.NewRecorder(context.Background(), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := wrec.OpenStream(&capture.StreamInfo{Name: "m", Command: capture.Command{Args: []string{"m"}}})
	for i := 1; i <= 5; i++ {
		s.Line(protocol.ClientToServer, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"weather"}}`, i))
		isErr := i == 5
		s.Line(protocol.ServerToClient, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[],"isError":%v}}`, i, isErr))
	}
	s.Close("")
	if err := wrec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	rec, err := capture.NewRecorder(context.Background(), st, &capture.RecorderOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	if _, err := spool.NewIngester(dir, rec, st, nil).Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var calls uint64
	var toolErrors float64
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "mcptape_capture_call_duration_seconds":
				if labels["leg"] == "stdio" && labels["tool"] == "weather" && labels["method"] == "tools/call" {
					calls += m.GetHistogram().GetSampleCount()
				}
			case "mcptape_capture_tool_errors_total":
				if labels["tool"] == "weather" {
					toolErrors += m.GetCounter().GetValue()
				}
			}
		}
	}
	if calls != 5 || toolErrors != 1 {
		t.Errorf("metrics after ingesting 5 stdio calls, one an isError: %d call durations, %v tool errors", calls, toolErrors)
	}
}

// failingWriter refuses every write while full is set, as a store does
// when its disk is nearly full.
type failingWriter struct {
	capture.Writer
	full atomic.Bool
}

func (w *failingWriter) Write(ctx context.Context, b *capture.Batch) error {
	if w.full.Load() {
		return fmt.Errorf("recording paused: %w", capture.ErrStoreFull)
	}
	return w.Writer.Write(ctx, b)
}

// While the store refuses writes (a full disk), the spools wait: nothing
// of them is counted lost, and once there is room they are stored, once.
func TestIngestWaitsWhileTheStoreIsFull(t *testing.T) {
	dir := t.TempDir()
	wrapSide(t, dir, "srv", 20, true)
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fw := &failingWriter{Writer: st}
	fw.full.Store(true)
	rec, err := capture.NewRecorder(context.Background(), fw, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	ing := spool.NewIngester(dir, rec, st, nil)
	for range 3 {
		if _, err := ing.Once(context.Background()); err == nil {
			t.Fatal("ingesting into a full store reported no error")
		}
	}
	if s := rec.Stats(); s.Lost != 0 || s.Stored != 0 {
		t.Errorf("while full: %d lost, %d stored; want none of either", s.Lost, s.Stored)
	}
	if files, _ := spool.Files(dir); len(files) != 1 {
		t.Fatalf("the spool did not wait: %q", files)
	}
	fw.full.Store(false)
	if _, err := ing.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	ss := onlySessions(t, st)
	if len(ss) != 1 {
		t.Fatalf("%d sessions, want 1", len(ss))
	}
	if ms := messagesOf(t, st, ss[0].ID); len(ms) != 42 {
		t.Errorf("%d messages stored once there was room, want 42", len(ms))
	}
	if s := rec.Stats(); s.Lost != 0 || s.Stored != 42 || s.Messages != 42 {
		t.Errorf("after: %+v; want 42 messages, 42 stored, none lost", s)
	}
	if files, _ := spool.Files(dir); len(files) != 0 {
		t.Errorf("spool left: %q", files)
	}
}
