//go:build !(linux || darwin || freebsd)

package badgerstore

import "errors"

// freeBytes is not measured here: the free-space floor is off.
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
