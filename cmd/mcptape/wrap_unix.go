//go:build unix

package main

import (
	"os"
	"syscall"
)

// raise sends sig to this process, so that it dies of it as the server did.
func raise(sig syscall.Signal) { _ = syscall.Kill(os.Getpid(), sig) }

// crashSignals are the signals whose default action dumps core.
var crashSignals = []syscall.Signal{syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGBUS,
	syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGSYS, syscall.SIGXCPU, syscall.SIGXFSZ}
