//go:build !linux

package main

import "os"

// peakRSS is not measured here (Maxrss is in KiB on Linux only).
func peakRSS(*os.ProcessState) (int64, bool) { return 0, false }
