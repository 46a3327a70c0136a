//go:build !unix

package badgerstore

import "io/fs"

// diskUsage is a file's apparent size where the allocated size is not at
// hand (sparse preallocated files count in full).
func diskUsage(fi fs.FileInfo) int64 { return fi.Size() }
