package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/protocol"
	"github.com/mcptape/mcptape/replay"
)

// crashTape records a raw stateless JSON server whose "count" tool
// answers, whose "crash" tool fails with a plain-text HTTP 500 (no
// JSON-RPC message), and whose "vanish" tool drops the connection without
// a response: the recording holds that request and no answer to it.
func crashTape(t *testing.T) *replay.Tape {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m := protocol.Decode(b)
		p, _ := protocol.ParseParams(m.Params)
		switch p.Name {
		case "crash":
			http.Error(w, "internal server error", http.StatusInternalServerError)
			return
		case "vanish":
			panic(http.ErrAbortHandler)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[{"type":"text","text":"counted"}]}}`, m.ID)
	}))
	up.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(up.Close)
	return recordTape(t, up.URL, func(px string) {
		for i, tool := range []string{"count", "crash", "vanish"} {
			post(t, px+"/mcp", modernCall(i+1, tool, `{}`), modernHeaders)
		}
	})
}

// A request the recording holds but never got an answer to (the server
// dropped the connection) is not a miss: the client gets CodeNoAnswer,
// saying the recording holds the request and what the recorded server did
// instead; it is not among the misses, and a strict replay reports it as
// a failure (a lenient one does not). A plain-text HTTP 500 is an answer:
// it is replayed as recorded. A real miss still gets CodeNoMatch.
func TestUnansweredRequestIsNotAMiss(t *testing.T) {
	tape := crashTape(t)
	session := tape.Sessions[0].Session.ID
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			s, hs := serve(t, tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: strict})
			if _, body, err := post(t, hs.URL+"/mcp", modernCall(1, "count", `{}`), modernHeaders); err != nil || !strings.Contains(string(body), `"counted"`) {
				t.Fatalf("count: %v %s", err, body)
			}
			status, body, err := post(t, hs.URL+"/mcp", modernCall(7, "crash", `{}`), modernHeaders)
			if err != nil || status != http.StatusInternalServerError || string(body) != "internal server error\n" {
				t.Errorf("crash: HTTP %d %q, %v; want the recorded 500 and its text", status, body, err)
			}
			status, body, err = post(t, hs.URL+"/mcp", modernCall(9, "vanish", `{}`), modernHeaders)
			if err != nil {
				t.Fatal(err)
			}
			var resp struct {
				ID    json.RawMessage
				Error struct {
					Code    int
					Message string
					Data    struct {
						Session string
						Seq     uint64
						Status  int
					}
				}
			}
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatalf("vanish: HTTP %d, %v: %s", status, err, body)
			}
			if status != http.StatusOK || string(resp.ID) != "9" || resp.Error.Code != replay.CodeNoAnswer {
				t.Errorf("vanish: HTTP %d, id %s, code %d, want 200, id 9, code %d: %s", status, resp.ID, resp.Error.Code, replay.CodeNoAnswer, body)
			}
			if replay.CodeNoAnswer == replay.CodeNoMatch {
				t.Errorf("CodeNoAnswer is CodeNoMatch (%d)", replay.CodeNoMatch)
			}
			for _, want := range []string{"the recording holds this tools/call vanish request", "in recorded session " + session, "but no answer to it"} {
				if !strings.Contains(resp.Error.Message, want) {
					t.Errorf("the client's error %q lacks %q", resp.Error.Message, want)
				}
			}
			if resp.Error.Data.Session != session || resp.Error.Data.Seq == 0 {
				t.Errorf("the error's data: %+v", resp.Error.Data)
			}

			// A real miss is still a miss.
			if _, body, err = post(t, hs.URL+"/mcp", modernCall(8, "absent", `{}`), modernHeaders); err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, body); !strings.HasPrefix(got, fmt.Sprintf("error %d: ", replay.CodeNoMatch)) {
				t.Errorf("a miss got %q", got)
			}

			r := s.Report()
			if len(r.Misses) != 1 || r.Misses[0].Name != "absent" {
				t.Errorf("misses %v, want only the absent call", r.Misses)
			}
			var unanswered []string
			for _, f := range r.Failures {
				if strings.Contains(f, "crash") || strings.Contains(f, "vanish") {
					unanswered = append(unanswered, f)
				}
			}
			switch {
			case strict && (len(unanswered) != 1 || !strings.Contains(unanswered[0], "vanish request") || !strings.Contains(unanswered[0], "but no answer to it")):
				t.Errorf("a strict replay's failures %q do not report the unanswered request once", r.Failures)
			case !strict && len(unanswered) != 0:
				t.Errorf("a lenient replay reports the unanswered request: %q", r.Failures)
			}
		})
	}
}

// Over stdio, the same recording gives the same answer, where before the
// client got no answer at all.
func TestStdioUnansweredRequest(t *testing.T) {
	tape := crashTape(t)
	s, err := replay.NewServerHandler(tape, &replay.ServerOptions{Timing: replay.TimingFast, Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	in := strings.NewReader(modernCall(1, "count", `{}`) + "\n" + modernCall(2, "crash", `{}`) + "\n")
	// Over stdio there is no HTTP status to give: the plain-text 500 is
	// no answer a stdio client can get.
	if err := s.ServeStdio(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{`"id":1,"result"`, fmt.Sprintf(`"id":2,"error":{"code":%d,"message":"mcptape replay: the recording holds this tools/call crash request`, replay.CodeNoAnswer)} {
		if !strings.Contains(got, want) {
			t.Errorf("the client's lines lack %s:\n%s", want, got)
		}
	}
	if r := s.Report(); len(r.Misses) != 0 || len(r.Failures) != 1 || !strings.Contains(r.Failures[0], "but no answer to it") {
		t.Errorf("strict report: misses %v, failures %q", r.Misses, r.Failures)
	}
}
