//go:build !linux

package replay

import (
	"context"
	"io"
	"time"
)

// waitRead cannot tell, off Linux, whether a pipe's reader read it.
func waitRead(context.Context, io.Writer, time.Duration) bool { return false }
