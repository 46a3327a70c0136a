package badgerstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
)

func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "mcptape-example")
	defer os.RemoveAll(dir)

	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	err = s.Write(ctx, &capture.Batch{
		Sessions: []*capture.Session{{ID: "s1"}},
		Messages: []*capture.Message{{Seq: 1, SessionID: "s1", Raw: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)}},
	})
	if err != nil {
		panic(err)
	}

	// A second Open of the directory, here or in another process, fails.
	_, err = badgerstore.Open(dir, nil)
	fmt.Println(errors.Is(err, badgerstore.ErrLocked))

	// Data survives Close, and a reopened store continues the IDs.
	s.Close()
	s, err = badgerstore.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	seq, _, _ := s.LastIDs(ctx)
	fmt.Println(seq)
	// Output:
	// true
	// 1
}
