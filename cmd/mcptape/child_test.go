package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// childEnv carries the command line (JSON) of an mcptape run as a child
// process of a test: the test binary re-executes itself with only
// TestChildProcess selected, and that runs the command. Fault tests need
// a real process: one a test can kill, one whose crash (a SIGBUS) is not
// the test's own.
const childEnv = "MCPTAPE_TEST_CHILD_ARGS"

// TestChildProcess is not a test of its own: it is how startChild's
// processes run.
func TestChildProcess(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("runs only as a child process of another test")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", childEnv, err)
		os.Exit(exitUsage)
	}
	os.Exit(runProcess(args))
}

// proc is an mcptape command running as a child process.
type proc struct {
	cmd         *exec.Cmd
	out, errOut *syncBuffer
	exited      chan struct{} // closed when it has exited; cmd.ProcessState is then set
}

// startChild starts `mcptape args...` as a child process; the test's end
// kills it if it still runs.
func startChild(t *testing.T, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(args)
	c := &proc{out: &syncBuffer{}, errOut: &syncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(exe, "-test.run=^TestChildProcess$")
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.errOut
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
	return c
}

// wait returns the rest of the first output line that holds prefix,
// waiting up to 20 seconds; the test fails if the child exits first.
func (c *proc) wait(t *testing.T, prefix string) string {
	t.Helper()
	var v string
	if c.out.await(20*time.Second, c.exited, func(out string) bool { v = outputValue(out, prefix); return v != "" }) {
		return v
	}
	select {
	case <-c.exited:
		t.Fatalf("the child exited (%v) before printing %q:\n%s%s", c.cmd.ProcessState, prefix, c.out.String(), c.errOut.String())
	default:
	}
	t.Fatalf("the child printed no %q:\n%s%s", prefix, c.out.String(), c.errOut.String())
	return ""
}

// alive fails the test if the child has exited.
func (c *proc) alive(t *testing.T, when string) {
	t.Helper()
	select {
	case <-c.exited:
		t.Fatalf("mcptape died %s: %v\nstdout:\n%s\nstderr:\n%s", when, c.cmd.ProcessState, c.out.String(), c.errOut.String())
	default:
	}
}

// interrupt sends SIGINT (Ctrl-C) and returns the exit code.
func (c *proc) interrupt(t *testing.T) int {
	t.Helper()
	c.alive(t, "before it was stopped")
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("mcptape did not stop within 30s of SIGINT:\n%s%s", c.out.String(), c.errOut.String())
	}
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("mcptape was killed by %v:\n%s%s", ws.Signal(), c.out.String(), c.errOut.String())
	}
	return c.cmd.ProcessState.ExitCode()
}

// kill sends SIGKILL and waits for the child to go.
func (c *proc) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited
}
