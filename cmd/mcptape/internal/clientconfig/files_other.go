//go:build !unix

package clientconfig

import (
	"io/fs"
	"os"
)

func keepOwner(*os.File, fs.FileInfo) {}

func syncDir(string) {}
