package main

import (
	"os"
	"syscall"
)

// peakRSS is the peak resident memory of a process that has exited, in
// bytes.
func peakRSS(ps *os.ProcessState) (int64, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, false
	}
	return ru.Maxrss << 10, true // KiB on Linux
}
