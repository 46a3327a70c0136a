//go:build !unix

package procs

import "time"

// cpuTimeKnown: without the process's CPU time, the Ps stay as they are.
const cpuTimeKnown = false

// CPUTime is 0: the system does not say here.
func CPUTime() time.Duration { return 0 }
