//go:build unix && !linux

package procs

import (
	"syscall"
	"time"
)

// cpuTimeKnown: the process's CPU time can be read.
const cpuTimeKnown = true

// CPUTime is the CPU time the process used so far, user and system, or 0
// when the system does not say.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
