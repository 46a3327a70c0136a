//go:build !linux

package badgerstore

import "time"

// unmapper does nothing here (see unmap_linux.go).
type unmapper struct{}

func startUnmapper(string, time.Duration) *unmapper { return nil }

var unmapEvery, unmapRecordingEvery time.Duration

func (*unmapper) stop() {}
