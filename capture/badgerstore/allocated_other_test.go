//go:build !unix

package badgerstore_test

import "os"

func allocated(os.FileInfo) (int64, bool) { return 0, false }
