package procs

import (
	"syscall"
	"time"
	"unsafe"
)

// cpuTimeKnown: the process's CPU time can be read.
const cpuTimeKnown = true

// CPUTime is the CPU time the process used so far, user and system, or 0
// when the system does not say. A raw system call (getrusage never
// blocks): through syscall.Getrusage, each reading would wake the Go
// runtime's monitor thread, which then polls for a millisecond.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if _, _, e := syscall.RawSyscall(syscall.SYS_GETRUSAGE, syscall.RUSAGE_SELF, uintptr(unsafe.Pointer(&ru)), 0); e != 0 {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
