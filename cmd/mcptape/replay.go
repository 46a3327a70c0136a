package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("say which: `mcptape replay server --tape FILE [--stdio]` or `mcptape replay client --tape FILE --target URL`")
	}
	if isHelp(args[0]) {
		return groupHelp(stderr, "replay", "server", "client")
	}
	switch args[0] {
	case "server":
		return runReplayServer(ctx, args[1:], stdout, stderr)
	case "client":
		return runReplayClient(ctx, args[1:], stdout, stderr)
	}
	return usagef("unknown replay mode %q: want server or client%s", args[0], didYouMean(args[0], "server", "client"))
}

func runReplayServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay server", stderr)
	tapePath := fs.String("tape", "", "the tape to replay (required)")
	listen := fs.String("listen", "127.0.0.1:7412", "address to listen on")
	profilePath := fs.String("profile", "", "a testing profile (its faults are injected)")
	timing := fs.String("timing", "recorded", "recorded (the recorded pauses) or fast")
	strict := fs.Bool("strict", false, "treat any difference from the recording as a failure: exit non-zero with a report")
	var ignore stringList
	fs.Var(&ignore, "ignore", "also ignore this params path when matching, e.g. arguments.timestamp (repeatable)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	allowAnyHost := fs.Bool("allow-any-host", false, "accept any Host header on a loopback listener (turns off DNS-rebinding protection)")
	stdio := fs.Bool("stdio", false, "serve one client on stdin and stdout (newline-delimited JSON-RPC; logs and the report on stderr) instead of listening: the command a client config launches")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tapePath == "" {
		return usagef("--tape is required: the file `mcptape export` wrote")
	}
	if *stdio && (flagSet(fs, "listen") || *allowAnyHost) {
		return usagef("--stdio serves stdin and stdout: it listens nowhere, so --listen and --allow-any-host do not go with it")
	}
	tm, err := replay.ParseTiming(*timing)
	if err != nil {
		return usagef("--timing: %v", err)
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	// The tape stays in its file, read as it is replayed: a large one
	// costs its index, not its size.
	tape, err := replay.OpenTape(*tapePath)
	if err != nil {
		return err
	}
	defer tape.Close()
	opts := &replay.ServerOptions{Timing: tm, Strict: *strict, Logger: logger, Matcher: replay.NewMatcher(replay.IgnorePaths(ignore...)),
		AllowAnyHost: *allowAnyHost}
	if *profilePath != "" {
		if opts.Profile, err = loadProfile(*profilePath); err != nil {
			return err
		}
	}
	s, err := replay.NewServerHandler(tape, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", *tapePath, err)
	}
	if *stdio {
		// stdout is the client's: everything for people goes to stderr.
		fmt.Fprintf(stderr, "mcptape replay: serving %s (%d session(s)) on stdin and stdout, timing %s\n", clean(*tapePath), len(tape.Sessions), tm)
		err := s.ServeStdio(ctx, replayStdin, stdout)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = nil // stopped by a signal
		}
		s.Close()
		if rerr := replayReport(stderr, s, *strict); err == nil {
			err = rerr
		}
		return err
	}
	srv, err := proxy.Listen(*listen, s, &proxy.ServerOptions{Logger: logger})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mcptape replay: serving %s (%d session(s)) at %s, timing %s\n", clean(*tapePath), len(tape.Sessions), srv.URL(), tm)
	printEndpoints(stdout, srv.URL(), tape)
	fmt.Fprintln(stdout, "mcptape replay: Ctrl-C stops")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(sctx)
	cancel()
	if rerr := replayReport(stdout, s, *strict); rerr != nil {
		return rerr
	}
	return err
}

// maxEndpointLines bounds the endpoints the replay server lists.
const maxEndpointLines = 20

// printEndpoints lists where the replay answers: each recorded endpoint
// (under its route's prefix) once, with what was recorded there.
func printEndpoints(w io.Writer, base string, tape *replay.Tape) {
	type endpoint struct {
		url      string
		sessions int
		first    *capture.Session
	}
	var list []*endpoint
	byURL := map[string]*endpoint{}
	for _, ts := range tape.Sessions {
		s := ts.Session
		if s.Opening == "http" {
			continue // no MCP traffic: OAuth metadata, probes
		}
		u := base + clean(s.Path)
		if s.Route != "" {
			u = base + "/" + clean(s.Route) + clean(s.Path)
		}
		e := byURL[u]
		if e == nil {
			e = &endpoint{url: u, first: s}
			byURL[u] = e
			list = append(list, e)
		}
		e.sessions++
	}
	for i, e := range list {
		if i == maxEndpointLines {
			fmt.Fprintf(w, "  … and %d more endpoints\n", len(list)-i)
			break
		}
		if e.sessions == 1 {
			fmt.Fprintf(w, "  %s  (%s %s, recorded from %s)\n", e.url, e.first.Era, clean(e.first.Version), dash(clean(e.first.Client.String())))
			continue
		}
		fmt.Fprintf(w, "  %s  (%d sessions)\n", e.url, e.sessions)
	}
}

// replayStdin is what `replay server --stdio` serves: the process's stdin.
var replayStdin io.Reader = os.Stdin

// replayReport writes what a replay server served and, when strict, every
// difference, and says whether the replay failed.
func replayReport(w io.Writer, s *replay.Server, strict bool) error {
	rep := s.Report()
	fmt.Fprintf(w, "mcptape replay: served %d request(s), %d miss(es)\n", rep.Served, len(rep.Misses))
	if strict && !rep.OK() {
		fmt.Fprintf(w, "strict replay found %d difference(s):\n", len(rep.Failures))
		for _, f := range rep.Failures {
			fmt.Fprintf(w, "  - %s\n", clean(f))
		}
		return fmt.Errorf("the replay differed from the recording (%d difference(s))", len(rep.Failures))
	}
	return nil
}

// loadProfile reads and checks a testing profile (docs/testing-profiles.md).
func loadProfile(path string) (*replay.Profile, error) { return replay.LoadProfile(path) }
