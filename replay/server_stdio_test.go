package replay_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/replay"
)

// writeTapeFile writes tape to a file in the test's temporary directory.
func writeTapeFile(t *testing.T, tape *replay.Tape) string {
	t.Helper()
	var b bytes.Buffer
	if err := replay.WriteTape(&b, tape); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "recorded.tape.json")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A tape recorded over Streamable HTTP, served over stdio: the go-sdk
// fixture client, connected to the replay's stdin and stdout, sees what it
// saw against the real server over HTTP — every step's answer, the
// sampling, elicitation and roots requests it answered, the notifications
// of the GET stream — and the strict replay finds nothing.
func TestStdioServerServesAnHTTPTape(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			tape, recorded := record(t, era.path, nil)
			ts := replay.NewStdioServer(t, writeTapeFile(t, tape))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			replayed, err := fixtures.RunClient(ctx, "stdio", &fixtures.ClientOptions{Transport: &mcp.IOTransport{Reader: ts.Conn, Writer: ts.Conn}})
			if err != nil {
				t.Fatal(err)
			}
			recorded.URL, replayed.URL = "", ""
			if d := cmp.Diff(recorded, replayed); d != "" {
				t.Errorf("the client saw something else over stdio (-recorded over HTTP +replayed over stdio):\n%s", d)
			}
			if r := ts.Report(); !r.OK() || r.Served < 20 {
				t.Errorf("strict replay over stdio: served %d, failures %q", r.Served, r.Failures)
			}
		})
	}
}

// The stdio replay's errors are lines too: a line that is not JSON gets a
// parse error, a request no recorded one matches a -32010 error naming its
// session, and an injected HTTP status a CodeFault error; the connection
// goes on.
func TestStdioServerErrors(t *testing.T) {
	tape := counterTape(t)
	serve := func(faults []replay.Annotation, lines ...string) []string {
		t.Helper()
		s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingFast, Faults: faults})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := s.ServeStdio(context.Background(), strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
			t.Fatal(err)
		}
		var got []string
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		return got
	}
	check := func(got, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
		}
		for i, w := range want {
			if !strings.Contains(got[i], w) {
				t.Errorf("line %d: %s\nwant it to hold %s", i+1, got[i], w)
			}
		}
	}
	check(serve(nil, `this is not JSON`, modernCall(1, "count", `{}`), modernCall(2, "count", `{"n":1}`)),
		[]string{`"id":null,"error":{"code":-32700`, `"id":1,"result"`,
			`"id":2,"error":{"code":-32010,"message":"mcptape replay: no recorded tools/call count matches this request in recorded session ` + tape.Sessions[0].Session.ID})
	check(serve([]replay.Annotation{{Match: replay.Match{Method: "tools/call", Name: "count"}, Status: 503}}, modernCall(3, "count", `{}`)),
		[]string{`"id":3,"error":{"code":-32000,"message":"mcptape replay: injected fault: HTTP status 503`})
}
