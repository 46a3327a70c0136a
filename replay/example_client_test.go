package replay_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"

	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/replay"
)

// A tape of the fixture client, replayed against a live fixture server:
// every call, its MRTR rounds and the model's answers (from the recording)
// included, gets the recorded result.
func ExampleRunClient() {
	tape, err := replay.LoadTape("testdata/client/tools.tape.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(fixtures.Handler(nil))
	defer srv.Close()
	defer srv.CloseClientConnections()

	// The target's path is empty: each session goes to its recorded path.
	rep, err := replay.RunClient(context.Background(), tape, srv.URL, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range rep.Sessions[0].Calls {
		fmt.Printf("%-32s rounds %d  ok %v\n", c.Title(), c.Rounds, c.OK())
	}
	if !rep.OK() {
		_ = rep.WriteText(os.Stdout, false) // the differences, path by path
	}
	// Output:
	// #1 server/discover               rounds 1  ok true
	// #3 subscriptions/listen          rounds 1  ok true
	// #5 tools/call echo               rounds 1  ok true
	// #7 tools/call add                rounds 1  ok true
	// #9 tools/call sample             rounds 2  ok true
	// #13 tools/call sample_tools      rounds 3  ok true
}
