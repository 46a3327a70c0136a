package main

import (
	"context"
	"io"
)

// runReplayClient is `mcptape replay client`.
func runReplayClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usagef("the replay client is not built yet")
}
