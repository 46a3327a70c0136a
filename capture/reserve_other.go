//go:build !linux

package capture

import "os"

// reserve does nothing where fallocate is not offered.
func reserve(*os.File, int64, int64) {}
