package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/spool"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/fixtures/interop"
	"github.com/mcptape/mcptape/protocol"
)

// asMcptapeEnv makes this test binary run as mcptape itself (TestMcptapeChild),
// so that a client can launch `mcptape wrap` as the real child process it
// is in a client's config.
const asMcptapeEnv = childEnvName

// TestMcptapeChild is mcptape's main when this test binary runs as a child
// with asMcptapeEnv set: the arguments after -- are mcptape's.
func TestMcptapeChild(t *testing.T) {
	if os.Getenv(asMcptapeEnv) != "1" {
		t.Skip("runs only as a child process: mcptape itself")
	}
	os.Exit(runProcess(flag.Args()))
}

// mcptapeArgv is the command line that runs mcptape with args as a child.
func mcptapeArgv(t testing.TB, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe, "-test.run=^TestMcptapeChild$", "--"}, args...)
}

// mcptapeCmd is mcptapeArgv as an *exec.Cmd, with the environment that
// makes it mcptape.
func mcptapeCmd(t testing.TB, args ...string) *exec.Cmd {
	argv := mcptapeArgv(t, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), asMcptapeEnv+"=1")
	return cmd
}

func needPeers(t *testing.T) {
	t.Helper()
	if err := interop.Available(); err != nil {
		if os.Getenv("MCPTAPE_REQUIRE_PEERS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// storeOf reads every session of the store in dir with its messages, the
// way `ls` and `show` do (spools still waiting included).
func storeOf(t *testing.T, dir string) map[*capture.Session][]*capture.Message {
	t.Helper()
	ctx := context.Background()
	st, err := openRead(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[*capture.Session][]*capture.Message{}
	for s, err := range st.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			t.Fatal(err)
		}
		for m, err := range st.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				t.Fatal(err)
			}
			out[s] = append(out[s], m)
		}
	}
	return out
}

// checkEverythingRecorded checks that one stdio session holds what the
// TypeScript client's run did: tools/list, a tool call, a sampling and an
// elicitation round trip nested under their calls, progress and a
// resource subscription with its update.
func checkEverythingRecorded(t *testing.T, sessions map[*capture.Session][]*capture.Message, route string) {
	t.Helper()
	var sess *capture.Session
	var ms []*capture.Message
	for s, m := range sessions {
		if s.Route == route {
			sess, ms = s, m
		}
	}
	if sess == nil {
		t.Fatalf("no session of %q among %d", route, len(sessions))
	}
	if sess.Leg != capture.LegStdio || sess.Era != protocol.EraLegacy || sess.Client.Name != "mcptape-interop-client" || sess.Command == nil {
		t.Errorf("session: leg %s era %s client %q command %v", sess.Leg, sess.Era, sess.Client.Name, sess.Command)
	}
	calls := map[string]*capture.Message{}
	bySeq := map[uint64]*capture.Message{}
	counts := map[string]int{}
	for _, m := range ms {
		bySeq[m.Seq] = m
		key := m.Direction.String() + " " + m.Kind.String() + " " + m.Method
		counts[key]++
		if m.Kind == protocol.KindRequest && m.Method == protocol.MethodToolsCall {
			calls[m.Name] = m
		}
	}
	for _, want := range []string{
		"c2s request tools/list", "s2c result tools/list", "c2s request tools/call", "s2c result tools/call",
		"s2c request sampling/createMessage", "c2s result sampling/createMessage",
		"s2c request elicitation/create", "c2s result elicitation/create",
		"s2c notification notifications/progress", "c2s request resources/subscribe", "s2c notification notifications/resources/updated",
	} {
		if counts[want] == 0 {
			t.Errorf("nothing recorded for %s; recorded: %v", want, counts)
		}
	}
	for _, m := range ms {
		switch {
		case m.Kind == protocol.KindRequest && m.Method == protocol.MethodSampling:
			if p := bySeq[m.Links.Parent]; p == nil || p.Name != "trigger-sampling-request" {
				t.Errorf("sampling request %d is not under its call: parent %d", m.Seq, m.Links.Parent)
			}
		case m.Kind == protocol.KindRequest && m.Method == protocol.MethodElicitation:
			if p := bySeq[m.Links.Parent]; p == nil || !strings.HasPrefix(p.Name, "trigger-") {
				t.Errorf("elicitation request %d is not under its call: parent %d", m.Seq, m.Links.Parent)
			}
		case m.Kind == protocol.KindNotification && m.Method == protocol.MethodProgress:
			if p := bySeq[m.Links.Request]; p == nil || p.Name != "trigger-long-running-operation" {
				t.Errorf("progress %d is not linked to its call: %d", m.Seq, m.Links.Request)
			}
		case m.Kind.IsResponse() && m.Links.Request == 0:
			t.Errorf("response %d (%s) is linked to no request", m.Seq, m.Raw)
		}
	}
}

// The official TypeScript SDK's stdio client, through `mcptape wrap`
// around server-everything in stdio mode: every step passes, and the whole
// conversation is recorded as one stdio session, linked.
func TestWrapTypeScriptStdioClient(t *testing.T) {
	needPeers(t)
	data := t.TempDir()
	ev, err := interop.EverythingCommand()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := interop.RunClient(ctx, "", &interop.ClientOptions{
		Transport: interop.TransportStdio,
		Command:   mcptapeArgv(t, append([]string{"wrap", "--data", data, "--name", "everything", "--"}, ev...)...),
		Env:       []string{asMcptapeEnv + "=1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps {
		if !s.OK {
			t.Errorf("step %s failed through wrap: %s", s.Name, s.Detail)
		}
	}
	checkEverythingRecorded(t, storeOf(t, data), "everything")
}

// mcp-remote, the stdio bridge Claude Desktop users run to reach remote
// servers, wrapped by `mcptape wrap` and pointed at server-everything over
// Streamable HTTP: the same steps pass and are recorded.
func TestWrapMCPRemote(t *testing.T) {
	needPeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := interop.StartEverything(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	remote, err := interop.MCPRemoteCommand(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	rep, err := interop.RunClient(ctx, "", &interop.ClientOptions{
		Transport: interop.TransportStdio,
		Command:   mcptapeArgv(t, append([]string{"wrap", "--data", data, "--name", "remote", "--"}, remote...)...),
		// mcp-remote keeps its state under HOME.
		Env: []string{asMcptapeEnv + "=1", "HOME=" + t.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps {
		if !s.OK {
			t.Errorf("step %s failed through wrap and mcp-remote: %s", s.Name, s.Detail)
		}
	}
	checkEverythingRecorded(t, storeOf(t, data), "remote")
}

// lineClient drives a stdio server over raw newline-delimited JSON-RPC and
// counts every line it sends and receives.
type lineClient struct {
	in        io.WriteCloser
	out       *bufio.Reader
	sent, got int
}

func (c *lineClient) call(t *testing.T, id int, method, params string) string {
	t.Helper()
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params); err != nil {
		t.Fatal(err)
	}
	c.sent++
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the answer to %s: %v", method, err)
		}
		c.got++
		if strings.Contains(line, fmt.Sprintf(`"id":%d,`, id)) || strings.Contains(line, fmt.Sprintf(`"id":%d}`, id)) {
			return line
		}
	}
}

func (c *lineClient) notify(t *testing.T, method string) {
	t.Helper()
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","method":%q}`+"\n", method); err != nil {
		t.Fatal(err)
	}
	c.sent++
}

// startWrap starts `mcptape args...` (a wrap) with pipes to its stdin and
// stdout and its stderr kept. A wrap still running after wrapLimit is
// killed, which ends the test's reads of its stdout and its wait for it
// (a wrap that stops answering fails the test instead of hanging it); the
// test's end kills it if it still runs.
func startWrap(t *testing.T, args ...string) (cmd *exec.Cmd, in io.WriteCloser, out io.ReadCloser, stderr *syncBuffer) {
	t.Helper()
	cmd = mcptapeCmd(t, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog(t, cmd, "the wrap ("+strings.Join(args, " ")+")", stderr)
	return cmd, in, out, stderr
}

// wrapLimit is how long a process a test watches with watchdog may run.
const wrapLimit = 2 * time.Minute

// watchdog kills cmd, started, if it still runs after wrapLimit, which
// ends the test's reads of its pipes and its wait for it with a failure
// that says so (a process that stops answering fails the test instead of
// hanging it); the test's end kills it if it still runs. stderr, when not
// nil, is what the process wrote there.
func watchdog(t *testing.T, cmd *exec.Cmd, what string, stderr *syncBuffer) {
	timer := time.AfterFunc(wrapLimit, func() { _ = cmd.Process.Kill() })
	t.Cleanup(func() {
		if !timer.Stop() {
			var errOut string
			if stderr != nil {
				errOut = stderr.String()
			}
			t.Errorf("%s still ran after %v and was killed; stderr:\n%s", what, wrapLimit, errOut)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// runWrapped runs the fixture server through `mcptape wrap --data data`
// (with more of wrap's flags, if given) and makes calls echo calls,
// returning how many lines went each way.
func runWrapped(t *testing.T, data, name string, calls int, flags ...string) (sent, got int) {
	t.Helper()
	args := append(append([]string{"wrap", "--data", data, "--name", name}, flags...), "--")
	cmd, in, outPipe, stderr := startWrap(t, append(args, mcptapeArgv(t, "fixture", "server", "--stdio")...)...)
	c := &lineClient{in: in, out: bufio.NewReader(outPipe)}
	c.call(t, 1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"line-client","version":"1"}}`)
	c.notify(t, "notifications/initialized")
	for i := range calls {
		c.call(t, 2+i, "tools/call", fmt.Sprintf(`{"name":"echo","arguments":{"text":"%s-%d"}}`, name, i))
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("wrap of %s: %v; stderr:\n%s", name, err, stderr.String())
	}
	return c.sent, c.got
}

// countStdio counts the JSON-RPC messages of each stdio session, by route.
func countStdio(sessions map[*capture.Session][]*capture.Message) map[string]int {
	n := map[string]int{}
	for s, ms := range sessions {
		if s.Leg != capture.LegStdio {
			continue
		}
		for _, m := range ms {
			if m.Kind.IsRPC() {
				n[s.Route]++
			}
		}
	}
	return n
}

// Five wraps started at once with one --data, as a client starts its
// servers: with a dashboard owning the store, every message of all five
// reaches it while they run; with nothing owning it, every message waits
// in the spools, `ls` sees them, and the next owner stores them all — none
// lost, none twice, counted on both sides.
func TestFiveWrapsOneStore(t *testing.T) {
	const wraps, calls = 5, 40
	for _, owner := range []bool{true, false} {
		t.Run(fmt.Sprintf("owner=%v", owner), func(t *testing.T) {
			data := t.TempDir()
			var stop func() int
			if owner {
				_, _, stop = startCmd(t, "mcptape: dashboard of", "dashboard", "--data", data, "--listen", "127.0.0.1:0")
			}
			want := map[string]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range wraps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := fmt.Sprintf("srv%d", i)
					sent, got := runWrapped(t, data, name, calls)
					mu.Lock()
					want[name] = sent + got
					mu.Unlock()
				}()
			}
			wg.Wait()
			if owner {
				// The dashboard owns the store: it ingests as they run.
				start := time.Now()
				fixtures.Eventually(t, 5*time.Second, func() error {
					if got := countStdio(storeOf(t, data)); fmt.Sprint(got) != fmt.Sprint(want) {
						return fmt.Errorf("the dashboard's store holds %v, want %v", got, want)
					}
					return nil
				})
				t.Logf("the dashboard's store held every message %s after the last wrap ended", time.Since(start).Round(time.Millisecond))
				if code := stop(); code != 0 {
					t.Errorf("dashboard exited %d", code)
				}
			} else {
				// Nobody owns it: ls sees the spools without ingesting them.
				if got := countStdio(storeOf(t, data)); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("read from the spools: %v, want %v", got, want)
				}
				if files, _ := spool.Files(data); len(files) != wraps {
					t.Errorf("%d spools waiting, want %d", len(files), wraps)
				}
				// The next owner ingests them.
				_, _, stop := startCmd(t, "mcptape: dashboard of", "dashboard", "--data", data, "--listen", "127.0.0.1:0")
				fixtures.Eventually(t, 5*time.Second, func() error {
					if files, _ := spool.Files(data); len(files) != 0 {
						return fmt.Errorf("the dashboard did not ingest the spools: %d left", len(files))
					}
					return nil
				})
				stop()
			}
			if files, _ := spool.Files(data); len(files) != 0 {
				t.Errorf("spools left after the owner ingested: %q", files)
			}
			got := countStdio(storeOf(t, data))
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("messages stored per server: %v; exchanged on the wire: %v", got, want)
			}
		})
	}
}

// A stdout line that is not JSON-RPC is forwarded and named in a finding;
// the wrap exits with its server's code; SIGTERM to the wrap ends the
// server and the recording is flushed.
func TestWrapFaults(t *testing.T) {
	data := t.TempDir()
	t.Run("log line on stdout", func(t *testing.T) {
		cmd := mcptapeCmd(t, "wrap", "--data", data, "--name", "chatty", "--", "sh", "-c", `echo "Server listening on port 3000"; cat`)
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(out), "Server listening on port 3000\n") {
			t.Errorf("the line did not reach the client unchanged: %q", out)
		}
		var found bool
		for s, ms := range storeOf(t, data) {
			for _, m := range ms {
				for _, f := range m.Findings {
					if s.Route == "chatty" && f.Kind == capture.FindingInvalidFrame && strings.Contains(f.Message, "Server listening on port 3000") {
						found = true
					}
				}
			}
		}
		if !found {
			t.Error("no finding names the stdout line that is not JSON-RPC")
		}
	})
	t.Run("exit code", func(t *testing.T) {
		cmd := mcptapeCmd(t, "wrap", "--data", data, "--", "sh", "-c", "exit 3")
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("wrap of a server that exits 3: %v, want exit status 3", err)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		cmd := mcptapeCmd(t, "wrap", "--data", data, "--name", "sleeper", "--", "sh", "-c",
			`trap 'echo "terminated" >&2; exit 0' TERM; echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"up"}}'; while :; do sleep 0.05; done`)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("wrap after SIGTERM: %v, want the server's clean exit", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("wrap did not end within 10s of SIGTERM")
		}
		t.Logf("wrap ended %s after SIGTERM", time.Since(start).Round(time.Millisecond))
		var sess *capture.Session
		var ms []*capture.Message
		for s, m := range storeOf(t, data) {
			if s.Route == "sleeper" {
				sess, ms = s, m
			}
		}
		if sess == nil || sess.Command == nil || sess.Command.Exit != "exited with code 0" || sess.Status != capture.StatusClosed {
			t.Fatalf("the session after SIGTERM: %+v", sess)
		}
		var logLine, stderrLine bool
		for _, m := range ms {
			logLine = logLine || m.Method == "notifications/message"
			stderrLine = stderrLine || m.Kind == protocol.KindStderr && string(m.Raw) == "terminated"
		}
		if !logLine || !stderrLine {
			t.Errorf("flushed record lacks the server's message (%v) or its last stderr line (%v)", logLine, stderrLine)
		}
	})
	t.Run("SIGINT and SIGHUP reach the server, its stderr reaches the client", func(t *testing.T) {
		cmd := mcptapeCmd(t, "wrap", "--data", data, "--", "sh", "-c",
			`trap 'echo got-int >&2' INT; trap 'echo got-hup >&2; exit 5' HUP; echo ready; while :; do sleep 0.05; done`)
		var errBuf syncBuffer
		cmd.Stderr = &errBuf
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		// The trap runs once the loop's sleep ends; then the second signal.
		if !errBuf.await(10*time.Second, nil, func(e string) bool { return strings.Contains(e, "got-int") }) {
			t.Errorf("the client's stderr: %q; want the server's got-int line after SIGINT", errBuf.String())
		}
		_ = cmd.Process.Signal(syscall.SIGHUP)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
				t.Errorf("wrap after SIGINT and SIGHUP: %v, want the server's exit status 5", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("wrap did not end within 10s of SIGHUP")
		}
		if e := errBuf.String(); !strings.Contains(e, "got-int") || !strings.Contains(e, "got-hup") {
			t.Errorf("the client's stderr: %q; want the server's got-int and got-hup lines", e)
		}
	})
	t.Run("dies of the server's signal", func(t *testing.T) {
		err := mcptapeCmd(t, "wrap", "--data", data, "--", "sh", "-c", `kill -TERM $$`).Run()
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("wrap of a server killed by SIGTERM: %v", err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("wrap of a server killed by SIGTERM ended with %v, want to die of SIGTERM as the server did", err)
		}
	})
	t.Run("environment and working directory as given", func(t *testing.T) {
		dir := t.TempDir()
		cmd := mcptapeCmd(t, "wrap", "--data", data, "--", "sh", "-c", `printf '%s|%s\n' "$PWD" "$WRAPPED_SETTING"`)
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "WRAPPED_SETTING=kept as given")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if want := dir + "|kept as given\n"; string(out) != want {
			t.Errorf("the server saw %q, want %q", out, want)
		}
	})
	t.Run("a store it cannot write", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "a-file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := mcptapeCmd(t, "wrap", "--data", filepath.Join(file, "data"), "--", "sh", "-c", "cat")
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
		var errBuf syncBuffer
		cmd.Stderr = &errBuf
		out, err := cmd.Output()
		if err != nil || string(out) != `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n" {
			t.Errorf("wrap with a data directory it cannot create: %v, out %q; want the traffic relayed", err, out)
		}
		if n := strings.Count(errBuf.String(), "not recording this server"); n != 1 {
			t.Errorf("stderr says %d times that it is not recording, want once:\n%s", n, errBuf.String())
		}
	})
}
