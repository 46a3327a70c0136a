package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
)

func Example() {
	ctx := context.Background()
	s := memstore.New()
	defer s.Close()

	start := time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC)
	err := s.Write(ctx, &capture.Batch{
		Sessions: []*capture.Session{{ID: "s1", Start: start}, {ID: "s2", Start: start.Add(time.Minute)}},
		Messages: []*capture.Message{{Seq: 1, SessionID: "s1", Raw: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), Size: 40}},
	})
	if err != nil {
		panic(err)
	}
	for sess, err := range s.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(sess.ID)
	}
	m, _ := s.Message(ctx, 1)
	fmt.Printf("%s\n", m.Raw)
	// Output:
	// s2
	// s1
	// {"jsonrpc":"2.0","id":1,"method":"ping"}
}
