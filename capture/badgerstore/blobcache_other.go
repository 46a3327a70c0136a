//go:build !linux

package badgerstore

import (
	"errors"
	"os"
)

const (
	dropSupported = false
	packSupported = false
)

func dropCached(*os.File, int64, int64) {}

func punch(*os.File, int64, int64) (bool, error) { return true, errors.ErrUnsupported }

const directFlag = 0

func clearDirect(*os.File) error { return errors.ErrUnsupported }

func pwritev(*os.File, [][]byte, int64) error { return errors.ErrUnsupported }
