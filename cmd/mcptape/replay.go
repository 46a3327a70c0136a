package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mcptape/mcptape/proxy"
	"github.com/mcptape/mcptape/replay"
)

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("say which: `mcptape replay server --tape FILE` or `mcptape replay client --tape FILE --target URL`")
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
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tapePath == "" {
		return usagef("--tape is required: the file `mcptape export` wrote")
	}
	tm, err := replay.ParseTiming(*timing)
	if err != nil {
		return usagef("--timing: %v", err)
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	tape, err := replay.LoadTape(*tapePath)
	if err != nil {
		return err
	}
	opts := &replay.ServerOptions{Timing: tm, Strict: *strict, Logger: logger, Matcher: replay.NewMatcher(replay.IgnorePaths(ignore...))}
	if *profilePath != "" {
		if opts.Profile, err = loadProfile(*profilePath); err != nil {
			return err
		}
	}
	s, err := replay.NewServerHandler(tape, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", *tapePath, err)
	}
	srv, err := proxy.Listen(*listen, s, &proxy.ServerOptions{Logger: logger})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mcptape replay: serving %s (%d session(s)) at %s, timing %s\n", *tapePath, len(tape.Sessions), srv.URL(), tm)
	for _, ts := range tape.Sessions {
		fmt.Fprintf(stdout, "  %s%s  (%s %s, recorded from %s)\n", srv.URL(), clean(ts.Session.Path), ts.Session.Era, clean(ts.Session.Version), dash(clean(ts.Session.Client.String())))
	}
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
	rep := s.Report()
	fmt.Fprintf(stdout, "mcptape replay: served %d request(s), %d miss(es)\n", rep.Served, len(rep.Misses))
	if *strict && !rep.OK() {
		fmt.Fprintf(stdout, "strict replay found %d difference(s):\n", len(rep.Failures))
		for _, f := range rep.Failures {
			fmt.Fprintf(stdout, "  - %s\n", clean(f))
		}
		return fmt.Errorf("the replay differed from the recording (%d difference(s))", len(rep.Failures))
	}
	return err
}

// loadProfile reads and checks a testing profile (docs/testing-profiles.md).
func loadProfile(path string) (*replay.Profile, error) { return replay.LoadProfile(path) }
