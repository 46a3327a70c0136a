package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/protocol"
)

// hostile are the attacks on a terminal a recorded string can carry: an
// OSC that retitles the window (and its BEL), a CSI that clears the screen,
// a cursor move that overwrites an earlier line, a carriage return, an OSC 8
// hyperlink, the one-rune C1 CSI, and bidirectional overrides and isolates
// that make a line read backwards.
var hostile = []string{
	"\x1b]0;pwned\x07", "\x1b[2J", "\x1b[1A\r", "\x1b]8;;http://evil.example/\x1b\\", "\u009b31m", "\u0085",
	"\u202egnp.exe", "\u2066x\u2069", "\u200f", "\u2028",
}

// hostileStore writes two sessions whose every printed field carries the
// attacks: ids, client and server names and versions, the protocol
// version, the path, methods, tool names, JSON-RPC ids, SSE ids and
// findings. Their ids share the prefix "s", for the ambiguous-prefix error.
func hostileStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := strings.Join(hostile, "")
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := &capture.Batch{}
	seq := uint64(0)
	for i := range 2 {
		id := fmt.Sprintf("s%d-%s", i, h)
		b.Sessions = append(b.Sessions, &capture.Session{
			ID: id, Era: protocol.EraLegacy, Version: "2025-11-25" + h, Opening: "initialize",
			Client: protocol.Implementation{Name: "client" + h, Version: "1.0" + h},
			Server: protocol.Implementation{Name: "server" + h, Version: "2.0" + h},
			Path:   "/mcp" + h, Start: start.Add(time.Duration(i) * time.Minute), End: start.Add(time.Duration(i)*time.Minute + time.Second),
			Messages: 3, Calls: 1, Exchanges: 1, Findings: 1, Status: capture.StatusClosed,
		})
		b.Exchanges = append(b.Exchanges, &capture.Exchange{ID: uint64(i + 1), SessionID: id, Method: "POST", URL: "/mcp" + h, Status: 200,
			Start: start, End: start.Add(time.Second), ResponseBody: capture.BodySSE})
		at := start.Add(time.Duration(i) * time.Minute)
		// A valid JSON id (a recorded id always is): C0 controls escaped,
		// C1 and bidi runes as they are, which JSON allows.
		rawID := []byte(`"id\u001b[2J` + "\u009b31m\u202e" + `"`)
		seq++
		req := seq
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: id, ExchangeID: uint64(i + 1),
			Direction: protocol.ClientToServer, Time: at, Kind: protocol.KindRequest, Method: "tools/call" + h, Name: "tool" + h,
			ID: rawID, Batch: -1, Raw: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`),
			Findings: []capture.Finding{{Kind: capture.FindingMalformed, Message: "finding" + h}}})
		seq++
		frame := []byte("id: " + h + "\n\n")
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: id, ExchangeID: uint64(i + 1),
			Direction: protocol.ServerToClient, Time: at.Add(time.Millisecond), Kind: protocol.KindFrame, Batch: -1,
			Raw: frame, SSE: &capture.SSEInfo{ID: h}})
		seq++
		b.Messages = append(b.Messages, &capture.Message{Seq: seq, SessionID: id, ExchangeID: uint64(i + 1),
			Direction: protocol.ServerToClient, Time: at.Add(2 * time.Millisecond), Kind: protocol.KindResult, Method: "tools/call" + h,
			Name: "tool" + h, ID: rawID, Batch: -1, Links: capture.Links{Request: req},
			Raw: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + "\\u001b[2J\\u009b" + `"}]}}`)})
	}
	for _, m := range b.Messages {
		m.Size = len(m.Raw)
	}
	if err := st.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// terminalProblem returns the first thing in out that could drive a
// terminal, or "".
func terminalProblem(out string) string {
	for i, r := range out {
		if r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD") {
			return fmt.Sprintf("invalid UTF-8 at byte %d", i)
		}
		if r != '\n' && r != '\t' && capture.UnsafeTerminalRune(r) {
			lo := max(0, i-20)
			return fmt.Sprintf("%U at byte %d, in %q", r, i, out[lo:min(len(out), i+20)])
		}
	}
	return ""
}

// TestTerminalInjection: every command that prints recorded strings —
// ls, show (table, JSON, tree, tree JSON), import, export's summary, and
// error messages quoting recorded ids — prints them with the control
// characters, C1 controls and bidi overrides replaced, and still shows
// the rest of the text.
func TestTerminalInjection(t *testing.T) {
	dir := hostileStore(t)
	tape := filepath.Join(t.TempDir(), "hostile.tape.json")
	other := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		want []string // what must still show, filtered
	}{
		{"ls", []string{"ls", "--data", dir}, 0, []string{"s0-?]0;pwned??[2J", "client?]0;pwned", "2025-11-25?]0;pwned", "?gnp.exe"}},
		{"ls --json", []string{"ls", "--data", dir, "--json"}, 0, []string{`\u009b31m`, `\u202egnp.exe`}},
		{"show", []string{"show", "--data", dir, "s0"}, 0, []string{"tools/call?]0;pwned", "finding?]0;pwned", "priming id ?]0;pwned", `"id\u001b[2J?31m?"`}},
		{"show --json", []string{"show", "--data", dir, "s1", "--json"}, 0, []string{`\u202e`, `tools/call\u001b]0;pwned`, `"id\u001b[2J\u009b31m\u202e"`}},
		{"show --tree", []string{"show", "--data", dir, "s0", "--tree"}, 0, []string{"tools/call?]0;pwned", "tool?]0;pwned"}},
		{"show --tree --json", []string{"show", "--data", dir, "s0", "--tree", "--json"}, 0, []string{`\u2066x\u2069`}},
		{"ambiguous prefix", []string{"show", "--data", dir, "s"}, 1, []string{"matches 2 sessions", "s0-?]0;pwned", "s1-?]0;pwned"}},
		{"export", []string{"export", "--data", dir, "-o", tape}, 0, []string{"2 session(s)"}},
		{"import", []string{"import", "--data", other, tape}, 0, []string{"s0-?]0;pwned", "s1-?]0;pwned"}},
		{"import --rename", []string{"import", "--data", other, "--rename", tape}, 0, []string{"was renamed s0-?]0;pwned"}},
		{"import refused", []string{"import", "--data", other, tape}, 1, []string{"s0-?]0;pwned"}},
	}
	for _, c := range cases {
		code, out, errOut := mcptape(t, c.args...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", c.name, code, c.code, out, errOut)
			continue
		}
		for what, text := range map[string]string{"stdout": out, "stderr": errOut} {
			if p := terminalProblem(text); p != "" {
				t.Errorf("%s: %s carries %s", c.name, what, p)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(out+errOut, w) {
				t.Errorf("%s: the output lacks %q:\n%s%s", c.name, w, out, errOut)
			}
		}
	}
}

// TestTerminalWriter: a report written through terminalWriter in pieces,
// with runes cut between writes, comes out filtered and otherwise whole.
func TestTerminalWriter(t *testing.T) {
	in := "ok\tline\n" + strings.Join(hostile, "|") + "\né✓ done\n"
	var out bytes.Buffer
	tw := &terminalWriter{w: &out}
	for i := 0; i < len(in); i += 3 {
		if _, err := tw.Write([]byte(in[i:min(len(in), i+3)])); err != nil {
			t.Fatal(err)
		}
	}
	if p := terminalProblem(out.String()); p != "" {
		t.Fatalf("the writer let through %s", p)
	}
	if want := capture.TerminalLines(strings.ReplaceAll(in, "\t", " ")); strings.ReplaceAll(out.String(), "\t", " ") != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
