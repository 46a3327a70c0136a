//go:build !linux

package badgerstore

import "os"

func startWriteback(*os.File) bool { return false }

func dropCached(*os.File) {}
