package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// demoStore records the demo (both eras) into a new store and returns its
// directory.
func demoStore(t *testing.T) string {
	t.Helper()
	data := t.TempDir()
	if code, out, errOut := mcptape(t, "demo", "--data", data); code != 0 {
		t.Fatalf("demo exited %d\n%s%s", code, out, errOut)
	}
	return data
}

// storeContents reads every record of a store, sessions oldest first.
type storeContents struct {
	Sessions  []*capture.Session
	Exchanges map[string][]*capture.Exchange
	Messages  map[string][]*capture.Message
	LastSeq   uint64
	LastX     uint64
}

func readStore(t *testing.T, dir string) *storeContents {
	t.Helper()
	ctx := context.Background()
	st, err := openRead(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := &storeContents{Exchanges: map[string][]*capture.Exchange{}, Messages: map[string][]*capture.Message{}}
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		c.Sessions = append([]*capture.Session{s}, c.Sessions...)
		for x, err := range st.Exchanges(ctx, s.ID) {
			if err != nil {
				t.Fatal(err)
			}
			c.Exchanges[s.ID] = append(c.Exchanges[s.ID], x)
		}
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			c.Messages[s.ID] = append(c.Messages[s.ID], m)
		}
	}
	if c.LastSeq, c.LastX, err = st.LastIDs(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func lines(s string) []string { return strings.Fields(strings.TrimSpace(s)) }

// editMessage edits the first tools/call result in the store at dir, as
// the dashboard does, so that the store holds an edited session.
func editMessage(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	st, err := openWrite(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			if m.Method == "tools/call" && m.Kind == protocol.KindResult {
				if _, err := st.EditMessage(ctx, m.Seq, []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"edited"}]}}`), "test"); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	t.Fatal("the demo recorded no tools/call result to edit")
}

// Export then import into an empty store gives back every record exactly;
// importing again is refused unless --rename, which mints new ids.
func TestExportImportRoundTrip(t *testing.T) {
	src := demoStore(t)
	editMessage(t, src)
	orig := readStore(t, src)
	if len(orig.Sessions) != 2 {
		t.Fatalf("the demo recorded %d sessions, want 2", len(orig.Sessions))
	}
	tape := filepath.Join(t.TempDir(), "demo.tape.json")
	code, out, errOut := mcptape(t, "export", "--data", src, "-o", tape)
	if code != 0 {
		t.Fatalf("export exited %d: %s", code, errOut)
	}
	if out != "" || !strings.Contains(errOut, "2 session(s)") {
		t.Errorf("export printed %q on stdout and %q on stderr", out, errOut)
	}

	dst := filepath.Join(t.TempDir(), "store")
	code, out, errOut = mcptape(t, "import", "--data", dst, tape)
	if code != 0 {
		t.Fatalf("import exited %d: %s", code, errOut)
	}
	var want []string
	for _, s := range orig.Sessions {
		want = append(want, s.ID)
	}
	if d := cmp.Diff(want, lines(out)); d != "" {
		t.Errorf("import printed other ids (-want +got):\n%s", d)
	}
	got := readStore(t, dst)
	if d := cmp.Diff(orig, got); d != "" {
		t.Fatalf("the imported store differs from the exported one (-exported +imported):\n%s", d)
	}
	edited := 0
	for _, ms := range got.Messages {
		for _, m := range ms {
			if m.Edited > 0 {
				edited++
				if m.Edited != 1 || !bytes.Contains(m.Raw, []byte(`"text":"edited"`)) {
					t.Errorf("the edited message came back with edited %d and %s", m.Edited, m.Raw)
				}
			}
		}
	}
	if edited != 1 {
		t.Errorf("%d edited messages after the round trip, want 1", edited)
	}
	// Raw bytes really are compared byte for byte above: make sure there
	// are some worth comparing (SSE frames, big results).
	n := 0
	for _, ms := range got.Messages {
		for _, m := range ms {
			n += len(m.Raw)
		}
	}
	if n < 64<<10 {
		t.Errorf("only %d raw bytes round-tripped; the demo's big result alone is 64 KiB", n)
	}

	// Again, without --rename: refused, naming the session and the way out.
	code, out, errOut = mcptape(t, "import", "--data", dst, tape)
	if code != exitError || out != "" || !strings.Contains(errOut, "already holds session "+want[0]) || !strings.Contains(errOut, "--rename") {
		t.Errorf("second import: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = mcptape(t, "import", tape, "--rename", "--data", dst)
	if code != 0 {
		t.Fatalf("import --rename exited %d: %s", code, errOut)
	}
	renamed := lines(out)
	if len(renamed) != 2 || renamed[0] != want[0]+"-2" || renamed[1] != want[1]+"-2" {
		t.Errorf("import --rename printed %q, want the ids with -2", renamed)
	}
	after := readStore(t, dst)
	if len(after.Sessions) != 4 {
		t.Fatalf("%d sessions after the renamed import, want 4", len(after.Sessions))
	}
	for i, id := range renamed {
		a, b := after.Messages[id], orig.Messages[want[i]]
		if len(a) != len(b) {
			t.Fatalf("%s: %d messages, want %d", id, len(a), len(b))
		}
		for j := range a {
			if !bytes.Equal(a[j].Raw, b[j].Raw) || a[j].Seq <= orig.LastSeq {
				t.Fatalf("%s message %d: seq %d (must come after %d), raw equal %v", id, j, a[j].Seq, orig.LastSeq, bytes.Equal(a[j].Raw, b[j].Raw))
			}
		}
	}

	// One session by a prefix of its id, to stdout.
	code, out, errOut = mcptape(t, "export", "--data", src, want[1][:len(want[1])-2], "-o", "-")
	if code != 0 {
		t.Fatalf("export of one session exited %d: %s", code, errOut)
	}
	one, err := replay.ReadTape(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Sessions) != 1 || one.Sessions[0].Session.ID != want[1] {
		t.Errorf("export by prefix wrote %d sessions", len(one.Sessions))
	}
	if code, _, errOut = mcptape(t, "export", "--data", src, "nosuchsession"); code != exitError || !strings.Contains(errOut, `no session "nosuchsession"`) {
		t.Errorf("export of an unknown session: exit %d, %s", code, errOut)
	}
}

// A malformed tape is refused with an error that names the problem, and
// nothing is imported.
func TestImportRefusesBadTapes(t *testing.T) {
	src := demoStore(t)
	tapePath := filepath.Join(t.TempDir(), "demo.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", src, "-o", tapePath, "-q"); code != 0 {
		t.Fatal(errOut)
	}
	good, err := os.ReadFile(tapePath)
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`"links":\{"request":\d+`)
	if !link.Match(good) {
		t.Fatal("the tape has no links to break")
	}
	for _, tc := range []struct {
		name   string
		tape   []byte
		target error
		says   string
	}{
		{"unknown version", bytes.Replace(good, []byte(`"version":1,`), []byte(`"version":7,`), 1), replay.ErrTapeVersion, "version 7"},
		{"wrong format", bytes.Replace(good, []byte(`"format":"mcptape-tape"`), []byte(`"format":"vcr-cassette"`), 1), replay.ErrNotTape, `the format field is "vcr-cassette"`},
		{"truncated", good[:len(good)/2], replay.ErrNotTape, "ends early"},
		{"dangling link", link.ReplaceAll(good, []byte(`"links":{"request":987654`)), replay.ErrTapeInvalid, "links to seq 987654"},
		{"not JSON", []byte("format: mcptape-tape\n"), replay.ErrNotTape, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.tape.json")
			if err := os.WriteFile(path, tc.tape, 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "store")
			var out, errOut bytes.Buffer
			err := runImport(context.Background(), []string{"--data", dst, path}, &out, &errOut)
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), path) {
				t.Errorf("import: %v; want %v naming %q and the file", err, tc.target, tc.says)
			}
			code, stdout, stderr := mcptape(t, "import", "--data", dst, path)
			if code != exitError || stdout != "" || !strings.Contains(stderr, tc.says) {
				t.Errorf("mcptape import: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			if _, err := os.Stat(dst); err == nil {
				t.Errorf("a refused tape created the store %s", dst)
			}
		})
	}
}

// While a recorder holds a store, export reads it through the recorder's
// API, and import says that the recorder must stop first.
func TestExportImportWhileRecording(t *testing.T) {
	src := demoStore(t)
	tape := filepath.Join(t.TempDir(), "demo.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", src, "-o", tape, "-q"); code != 0 {
		t.Fatal(errOut)
	}
	up := httptest.NewServer(fixtures.Handler(nil))
	defer up.Close()
	data := t.TempDir()
	r := startRun(t, "record", "--upstream", up.URL+fixtures.PathStateful, "--listen", "127.0.0.1:0", "--data", data)
	fixtures.Eventually(t, 10*time.Second, func() error {
		if _, err := remotestore.ReadAnnouncement(data); err != nil {
			return fmt.Errorf("record did not start (%v): %s%s", err, r.out.String(), r.errOut.String())
		}
		return nil
	})
	code, stdout, stderr := mcptape(t, "import", "--data", data, tape)
	if code != exitError || stdout != "" || !strings.Contains(stderr, "in use by another mcptape recording (pid ") || !strings.Contains(stderr, "stop it first") {
		t.Errorf("import while recording: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := mcptape(t, "export", "--data", data, "-q"); code != exitError || !strings.Contains(stderr, "no sessions") {
		t.Errorf("export of an empty store while recording: exit %d, %q %q", code, stdout, stderr)
	}
	r.stop(t)
	if code, stdout, stderr := mcptape(t, "import", "--data", data, tape); code != 0 || len(lines(stdout)) != 2 {
		t.Errorf("import after the recorder stopped: exit %d, %q %q", code, stdout, stderr)
	}
}

// A long export says how far it got on stderr, once a second and not
// before the first; a whole store's total comes once its sessions are
// listed.
func TestExportProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var errOut syncBuffer
		cw := &countingWriter{w: io.Discard}
		var total atomic.Int64
		total.Store(-1)
		stop := progress(&errOut, "export", cw, &total)
		_, _ = cw.Write(make([]byte, 20<<10))
		time.Sleep(progressEvery - time.Millisecond)
		synctest.Wait()
		if s := errOut.String(); s != "" {
			t.Errorf("progress before the first %v: %q", progressEvery, s)
		}
		time.Sleep(progressEvery)
		synctest.Wait()
		total.Store(1234)
		time.Sleep(progressEvery)
		synctest.Wait()
		stop()
		want := "mcptape export: 20 kB written (listing the sessions), 1s\n" +
			"mcptape export: 20 kB written (1234 messages in all), 2s\n"
		if s := errOut.String(); s != want {
			t.Errorf("progress after %v: %q, want %q", 3*progressEvery-time.Millisecond, s, want)
		}
	})
}

// `import -` reads the tape from stdin (spooled to a temporary file, then
// read a record at a time like a file), and a bad one is refused naming
// stdin, leaving no temporary file behind.
func TestImportFromStdin(t *testing.T) {
	src := demoStore(t)
	tapePath := filepath.Join(t.TempDir(), "demo.tape.json")
	if code, _, errOut := mcptape(t, "export", "--data", src, "-o", tapePath, "-q"); code != 0 {
		t.Fatal(errOut)
	}
	good, err := os.ReadFile(tapePath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { importStdin = os.Stdin }()
	spooled := func() []string {
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), "mcptape-import-*.tape.json"))
		return m
	}
	before := len(spooled())
	importStdin = bytes.NewReader(good)
	code, out, errOut := mcptape(t, "import", "--data", filepath.Join(t.TempDir(), "store"), "-")
	if code != 0 || len(strings.Fields(out)) != 2 || !strings.Contains(errOut, "2 session(s)") {
		t.Errorf("import - of a good tape: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	importStdin = bytes.NewReader(good[:len(good)/2])
	code, out, errOut = mcptape(t, "import", "--data", filepath.Join(t.TempDir(), "store"), "-")
	if code != exitError || out != "" || !strings.Contains(errOut, "stdin: ") || !strings.Contains(errOut, "ends early") {
		t.Errorf("import - of a truncated tape: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if after := len(spooled()); after != before {
		t.Errorf("import - left %d temporary file(s) behind", after-before)
	}
}
