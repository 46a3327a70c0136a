//go:build !linux

package badgerstore

import "os"

const dropSupported = false

func dropCached(*os.File) {}
