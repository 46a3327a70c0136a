package replay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/replay"
)

// exampleT stands in for the *testing.T of a test in these examples: it
// prints what the test would report, and runs the helpers' cleanups when
// the example ends, as a test's end would.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Helper()                   {}
func (t *exampleT) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Logf(string, ...any)       {}
func (t *exampleT) Errorf(f string, a ...any) { fmt.Printf("FAIL: "+f+"\n", a...) }
func (t *exampleT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (t *exampleT) Fatal(a ...any)            { panic(fmt.Sprint(a...)) }
func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// A client under test against the recorded server: the fixture client
// (go-sdk) gets the recorded results, MRTR sampling rounds included. The
// helper is strict: a request the tape cannot answer, or an answer that
// differs from the recording, fails the test when it ends.
func ExampleNewServer() {
	t := &exampleT{} // in a test: func TestX(t *testing.T)
	defer t.end()

	ts := replay.NewServer(t, "testdata/client/tools.tape.json")

	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	rep, err := fixtures.RunClient(context.Background(), ts.Endpoint(), &fixtures.ClientOptions{HTTPClient: hc, Only: []string{"echo", "add", "sample"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps[:3] {
		fmt.Printf("%s: %s\n", s.Name, s.Text)
	}
	r := ts.Report()
	fmt.Printf("misses %d, failures %d\n", len(r.Misses), len(r.Failures))
	// Output:
	// echo: hello, tape
	// add: 2 + 3 = 5
	// sample: sampled: Say hello to the tape.
	// misses 0, failures 0
}

// A server under test against the recorded client: each recorded call is
// sent to it, the model's answers come from the recording, and every
// response that differs from the recorded one fails the test, path by
// path.
func ExampleReplayClient() {
	t := &exampleT{} // in a test: func TestX(t *testing.T)
	defer t.end()
	srv := httptest.NewServer(fixtures.Handler(nil)) // the server under test
	defer srv.Close()
	defer srv.CloseClientConnections()

	rep := replay.ReplayClient(t, "testdata/client/tools.tape.json", srv.URL, nil)
	fmt.Printf("%d calls, ok %v\n", len(rep.Sessions[0].Calls), rep.OK())
	// Output:
	// 6 calls, ok true
}

// The same recorded server over stdio, for a client that launches its
// servers as commands: the fixture client (go-sdk) speaks to the replay's
// stdin and stdout, and gets the recorded results. (`mcptape replay server
// --stdio --tape FILE` is the same as a command.)
func ExampleNewStdioServer() {
	t := &exampleT{} // in a test: func TestX(t *testing.T)
	defer t.end()

	ss := replay.NewStdioServer(t, "testdata/client/tools.tape.json")

	transport := &mcp.IOTransport{Reader: ss.Conn, Writer: ss.Conn}
	rep, err := fixtures.RunClient(context.Background(), "stdio", &fixtures.ClientOptions{Transport: transport, Only: []string{"echo", "add", "sample"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps[:3] {
		fmt.Printf("%s: %s\n", s.Name, s.Text)
	}
	r := ss.Report()
	fmt.Printf("misses %d, failures %d\n", len(r.Misses), len(r.Failures))
	// Output:
	// echo: hello, tape
	// add: 2 + 3 = 5
	// sample: sampled: Say hello to the tape.
	// misses 0, failures 0
}
