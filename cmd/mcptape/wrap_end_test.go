package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// sessionOf returns the one session recorded under route in data, with its
// messages.
func routeSession(t *testing.T, data, route string) (*capture.Session, []*capture.Message) {
	t.Helper()
	ctx := context.Background()
	st, err := openRead(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		if s.Route != route {
			continue
		}
		var ms []*capture.Message
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		return s, ms
	}
	t.Fatalf("no session of %q recorded in %s", route, data)
	return nil, nil
}

// waitExit waits up to limit for cmd, killing it past that.
func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the wrap did not end within %s", limit)
		return nil
	}
}

// The client goes away (it closes its end of the wrap's stdout and its
// stdin) and the server writes once more: the wrap does not die of SIGPIPE.
// It keeps reading and recording the server's output, ends the server
// (stdin closed, then SIGTERM), and closes the session with how it ended.
func TestWrapClientGoneServerWritesOnce(t *testing.T) {
	data := t.TempDir()
	server := `read req; echo '{"jsonrpc":"2.0","id":1,"result":{}}'; sleep 0.5; ` +
		`echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"after the client left"}}'; ` +
		`echo 'last words' >&2; sleep 30`
	cmd, in, out, errBuf := startWrap(t, "wrap", "--data", data, "--name", "orphan", "--", "sh", "-c", server)
	if _, err := in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	// The client goes: both its pipes close, the server has not finished.
	out.Close()
	in.Close()
	err := waitExit(t, cmd, 20*time.Second)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGPIPE {
		t.Fatalf("the wrap died of SIGPIPE when its client had gone; stderr:\n%s", errBuf.String())
	}
	t.Logf("wrap ended: %v", err)
	s, ms := routeSession(t, data, "orphan")
	if s.Status != capture.StatusClosed || s.Command == nil {
		t.Fatalf("session status %s, command %+v; want it closed, with how the server ended", s.Status, s.Command)
	}
	if exit := s.Command.Exit; !strings.Contains(exit, "killed by signal terminated") || !strings.Contains(exit, "client had gone") {
		t.Errorf("the session's exit: %q; want the SIGTERM and the reason (the client had gone)", exit)
	}
	var late, stderr bool
	for _, m := range ms {
		late = late || m.Method == "notifications/message" && strings.Contains(string(m.Raw), "after the client left")
		stderr = stderr || m.Kind == protocol.KindStderr && string(m.Raw) == "last words"
	}
	if !late || !stderr {
		t.Errorf("the server's last output is not in the record: its notification %v, its stderr line %v", late, stderr)
	}
}

// A server that dies of a signal that dumps core (a crash: SIGSEGV, Node's
// "heap out of memory" SIGABRT, SIGBUS, SIGQUIT): the wrap exits with 128
// plus the signal, as a shell reports it, prints no crash dump of its own,
// and records the signal.
func TestWrapServerCrashes(t *testing.T) {
	data := t.TempDir()
	for _, c := range []struct {
		name string
		sig  syscall.Signal
		text string
	}{
		{"SEGV", syscall.SIGSEGV, "segmentation fault"},
		{"ABRT", syscall.SIGABRT, "aborted"},
		{"BUS", syscall.SIGBUS, "bus error"},
		{"QUIT", syscall.SIGQUIT, "quit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := mcptapeCmd(t, "wrap", "--data", data, "--name", "crash-"+c.name, "--", "sh", "-c", "kill -"+c.name+" $$")
			var errBuf strings.Builder
			cmd.Stderr = &errBuf
			_ = cmd.Run()
			if got := cmd.ProcessState.ExitCode(); got != 128+int(c.sig) {
				t.Errorf("wrap of a server killed by SIG%s ended %v, want exit status %d", c.name, cmd.ProcessState, 128+int(c.sig))
			}
			if e := errBuf.String(); strings.Contains(e, "goroutine ") || strings.Contains(e, "PC=") {
				t.Errorf("the wrap printed a crash dump of its own:\n%s", e)
			}
			s, _ := routeSession(t, data, "crash-"+c.name)
			if s.Command == nil || !strings.Contains(s.Command.Exit, "killed by signal "+c.text) || s.Status != capture.StatusClosed {
				t.Errorf("the session: status %s, command %+v; want it closed, killed by signal %s", s.Status, s.Command, c.text)
			}
		})
	}
}

// A server whose command does not exist: the wrap exits 127 as a shell
// would, and a session records why it did not start, so the failing
// server shows up in ls and the dashboard.
func TestWrapServerThatCannotStart(t *testing.T) {
	data := t.TempDir()
	cmd := mcptapeCmd(t, "wrap", "--data", data, "--name", "missing", "--", filepath.Join(t.TempDir(), "no-such-server"), "--port", "1")
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	_ = cmd.Run()
	if got := cmd.ProcessState.ExitCode(); got != 127 {
		t.Errorf("wrap of a command that does not exist exited %d, want 127; stderr:\n%s", got, errBuf.String())
	}
	if !strings.Contains(errBuf.String(), "no-such-server") {
		t.Errorf("stderr does not name the command: %s", errBuf.String())
	}
	s, _ := routeSession(t, data, "missing")
	if s.Command == nil || !strings.HasPrefix(s.Command.Exit, "not started: ") || !strings.Contains(s.Command.Exit, "no-such-server") || s.Status != capture.StatusClosed {
		t.Errorf("the session of a server that could not start: status %s, command %+v", s.Status, s.Command)
	}
}

// Without HOME (a client started by a service manager, or `env -i`), the
// default data directory comes from the account database: it is never
// relative to the working directory, which is the client's.
func TestDefaultDataDirWithoutHome(t *testing.T) {
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		t.Skipf("the account database has no home for this user: %v", err)
	}
	t.Setenv("HOME", "")
	os.Unsetenv("HOME")
	t.Setenv(envData, "")
	t.Setenv("XDG_DATA_HOME", "")
	got := defaultDataDir()
	if !filepath.IsAbs(got) || !strings.HasPrefix(got, u.HomeDir+string(filepath.Separator)) {
		t.Errorf("the default data directory without HOME is %q; want one under %s, the account's home", got, u.HomeDir)
	}
	// A relative XDG_DATA_HOME is ignored, as its specification says.
	t.Setenv("XDG_DATA_HOME", "relative/dir")
	if got := defaultDataDir(); !filepath.IsAbs(got) {
		t.Errorf("with XDG_DATA_HOME relative, the default data directory is %q", got)
	}
}
