//go:build !unix

package main

import "syscall"

// raise does nothing where a process cannot signal itself: the wrap exits
// with 128 plus the signal's number instead.
func raise(syscall.Signal) {}

// crashSignals: no process dies of a signal here.
var crashSignals []syscall.Signal
