//go:build !unix

package spool

import (
	"errors"
	"os"
	"time"
)

// Without flock a spool counts as running until it has an End record or
// has not changed for staleAfter.
const staleAfter = 30 * time.Second

func lock(*os.File) (func(), error) { return func() {}, nil }

func held(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && time.Since(fi.ModTime()) < staleAfter
}

func freeSpace(string) (int64, error) { return 0, errors.ErrUnsupported }

func openNoBlock(path string) (*os.File, error) { return os.Open(path) }

func isLoop(error) bool { return false }

// ownedByMe: files here have no owner to compare.
func ownedByMe(os.FileInfo) bool { return true }
