//go:build !linux

package bench

import (
	"errors"
	"syscall"
)

// benchSupported is false: `mcptape bench` reads /proc, which only Linux has.
const benchSupported = false

const clockTicks = 100

func childSysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(int, syscall.Signal) error { return errors.ErrUnsupported }

func procCPUTicks(int) int64 { return 0 }

func procStatusKB(int, string) int64 { return 0 }

func resetPeakRSS(int) error { return errors.ErrUnsupported }

func procChildren(int) []int { return nil }

func cpuModel() string { return "unknown" }

func kernelRelease() string { return "unknown" }
