package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/memlimit"
	"github.com/mcptape/mcptape/fixtures"
	"github.com/mcptape/mcptape/proxy"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	data := fs.String("data", filepath.Join(defaultDataDir(), "demo"), "directory of the demo's capture store")
	listen := fs.String("listen", "127.0.0.1:0", "address of the recording proxy (127.0.0.1:0: any free loopback port)")
	keep := fs.Bool("keep-running", false, "keep the fixture server and the proxy running until Ctrl-C, for your own client")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	_ = applyMemoryLimit(defaultMemoryLimit, false, memlimit.Follow)
	started := time.Now()

	// 1. The reference server, on loopback only.
	upSrv, err := proxy.Listen("127.0.0.1:0", fixtures.Handler(nil), nil)
	if err != nil {
		return fmt.Errorf("starting the fixture server: %w", err)
	}
	go func() { _ = upSrv.Serve() }()
	defer upSrv.Close()
	fmt.Fprintf(stdout, "fixture server   %s (%s for 2025-11-25, %s for 2026-07-28)\n", upSrv.URL(), fixtures.PathStateful, fixtures.PathStateless)

	// 2. The recording proxy in front of it.
	rs, err := startRecording(ctx, &recordConfig{upstream: upSrv.URL() + fixtures.PathStateful, listen: *listen, data: *data, idleGap: 5 * time.Minute}, nil)
	if err != nil {
		return err
	}
	go func() { _ = rs.srv.Serve() }()
	closed := false
	defer func() {
		if !closed {
			_, _ = rs.close()
		}
	}()
	fmt.Fprintf(stdout, "recording proxy  %s -> %s, store %s\n\n", rs.srv.URL(), upSrv.URL(), *data)

	// 3. The scripted client through the proxy, on both eras.
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	for _, path := range []string{fixtures.PathStateful, fixtures.PathStateless} {
		u := rs.srv.URL() + path
		fmt.Fprintf(stdout, "running the fixture client against %s ...\n", u)
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		rep, err := fixtures.RunClient(cctx, u, &fixtures.ClientOptions{HTTPClient: hc})
		cancel()
		if err != nil {
			return fmt.Errorf("fixture client against %s: %w", u, err)
		}
		fmt.Fprint(stdout, rep.String())
		if err := failures(rep); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = rs.rec.Sync(sctx)
	cancel()
	if err != nil {
		return fmt.Errorf("waiting for the recorder: %w", err)
	}

	// 4. What was recorded, and how to look at it.
	fmt.Fprintln(stdout, "recorded sessions:")
	if err := listSessions(ctx, rs.store, capture.SessionQuery{Since: started.Add(-time.Second)}, false, stdout, ""); err != nil {
		return err
	}
	var first string
	for s, err := range rs.store.Sessions(ctx, capture.SessionQuery{Since: started.Add(-time.Second), Limit: 1}) {
		if err == nil {
			first = s.ID
		}
	}
	nextSteps(stdout, selfCommand(), *data, first)
	st := rs.rec.Stats()
	fmt.Fprintf(stdout, "\n%d exchanges, %d messages decoded, %d stored, %d lost\n", st.Exchanges, st.Messages, st.Stored, st.Lost+st.Dropped)

	if *keep {
		fmt.Fprintf(stdout, "\nstill running: point your MCP client at\n  %s%s  (2025-11-25)\n  %s%s  (2026-07-28)\nCtrl-C stops.\n",
			rs.srv.URL(), fixtures.PathStateful, rs.srv.URL(), fixtures.PathStateless)
		<-ctx.Done()
	}
	closed = true
	stats, err := rs.close()
	if err != nil {
		return err
	}
	if stats.Lost+stats.Dropped > 0 {
		return fmt.Errorf("%d records were lost", stats.Lost+stats.Dropped)
	}
	return nil
}

// nextSteps prints what to do with the demo's recording, as commands that
// work when pasted: self is how this mcptape was run.
func nextSteps(w io.Writer, self, data, session string) {
	d := shellWord(data)
	tape := "demo.tape.json"
	fmt.Fprintf(w, "\nnext steps (each works as printed; the store is %s):\n", data)
	if strings.HasPrefix(self, "go run ") {
		fmt.Fprintf(w, "  (run from the repository root, or first `go install ./cmd/mcptape` and type mcptape instead of %q)\n", self)
	}
	steps := [][2]string{
		{"list the sessions", "ls --data " + d},
		{"print one, as its causal tree", "show --data " + d + " --tree " + session},
		{"browse them in the web dashboard (Ctrl-C stops it)", "dashboard --data " + d},
		{"export them as a tape file", "export --data " + d + " -o " + tape},
		{"replay the tape as a stand-in MCP server (Ctrl-C stops it)", "replay server --tape " + tape},
	}
	for _, s := range steps {
		fmt.Fprintf(w, "  # %s\n  %s %s\n", s[0], self, s[1])
	}
}

// selfCommand is how a user runs this mcptape again: `go run ./cmd/mcptape`
// for a binary go run built, mcptape when found on $PATH, else the path it
// was started by.
func selfCommand() string {
	exe := os.Args[0]
	if strings.Contains(filepath.ToSlash(exe), "/go-build") {
		if fi, err := os.Stat(filepath.Join("cmd", "mcptape")); err == nil && fi.IsDir() {
			return "go run ./cmd/mcptape"
		}
		return "go run github.com/mcptape/mcptape/cmd/mcptape"
	}
	if filepath.Base(exe) == exe {
		if p, err := exec.LookPath(exe); err == nil && p != "" {
			return exe
		}
	}
	if abs, err := filepath.Abs(exe); err == nil && !strings.HasPrefix(exe, ".") {
		exe = abs
	}
	return shellWord(exe)
}
