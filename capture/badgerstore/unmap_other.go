//go:build !linux

package badgerstore

// unmapper does nothing here (see unmap_linux.go).
type unmapper struct{}

func startUnmapper(string, bool) *unmapper { return nil }

func (*unmapper) stop() {}
