package capture

import (
	"os"

	"golang.org/x/sys/unix"
)

// reserve allocates the disk blocks of n bytes of f from off, keeping its
// size: on ext4, writing into blocks so allocated costs about half the CPU
// of writing past a file's end, where each page is allocated as it is
// dirtied. It is best effort: a write after a failed reserve reports its
// own error.
func reserve(f *os.File, off, n int64) {
	_ = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
}
