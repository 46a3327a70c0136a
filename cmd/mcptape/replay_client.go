package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/dashboard"
	"github.com/mcptape/mcptape/replay"
)

// runReplayClient is `mcptape replay client`: the recorded client requests
// of a tape against a live server, compared with the recording.
func runReplayClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay client", stderr)
	tapePath := fs.String("tape", "", "the tape to replay (required)")
	target := fs.String("target", "", "the live server: its MCP endpoint URL, or a base URL to which each session's recorded path is added (required)")
	profilePath := fs.String("profile", "", "a testing profile: answers the server's sampling, elicitation and roots requests the recording has no answer for")
	junit := fs.String("junit", "", "also write the result as JUnit XML to this file, for CI")
	var ignore, ignoreKeys, sessions, headers stringList
	fs.Var(&ignore, "ignore", "leave this path out of the comparison, e.g. result.content[0].text or result.content[*].text (repeatable)")
	fs.Var(&ignoreKeys, "ignore-key", "leave members of this name out wherever they appear, beyond _meta, requestState and timestamps (repeatable)")
	fs.Var(&sessions, "session", "replay only this tape session (its id or a unique prefix; repeatable); default all")
	fs.Var(&headers, "header", "add this header to every request, e.g. 'Authorization: Bearer …' (repeatable)")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on one call, its rounds and answers included, but not the time a person takes to answer (--manual-timeout)")
	dash := fs.String("dashboard", dashboard.DefaultAddr, "with a testing profile whose sampling provider is manual: serve the dashboard at `ADDR`, where a person answers the sampling requests (a free port when the default is taken); off: nobody answers them")
	dashToken := fs.String("dashboard-token", "", "the token a dashboard off loopback asks for (default: a random one, printed once)")
	manualTimeout := fs.Duration("manual-timeout", replay.DefaultManualTimeout, "how long to wait for a person's answer to one sampling request (the manual provider); the call's --timeout stops meanwhile")
	streamWait := fs.Duration("stream-wait", 3*time.Second, "how long a long-lived stream (listen, GET) may take to carry what it carried in the recording")
	strict := fs.Bool("strict", false, "also count as a difference each request of the server that no recorded request matches (answered by the profile, a person, or nobody)")
	verbose := fs.Bool("v", false, "list the calls that matched too")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *tapePath == "" {
		return usagef("--tape is required: the file `mcptape export` wrote")
	}
	if *target == "" {
		return usagef("--target is required: the live server's URL, e.g. --target http://127.0.0.1:3001/mcp")
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	h := http.Header{}
	for _, kv := range headers {
		k, v, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return usagef("--header %q: want 'Name: value'", kv)
		}
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	opts := &replay.ClientOptions{Ignore: ignore, Sessions: sessions, Header: h, CallTimeout: *timeout, StreamWait: *streamWait, Logger: logger,
		Strict: *strict}
	if len(ignoreKeys) > 0 {
		opts.IgnoreKeys = append(slices.Clone(replay.DefaultIgnoreKeys), ignoreKeys...)
	}
	if *profilePath != "" {
		if opts.Profile, err = replay.LoadProfile(*profilePath); err != nil {
			return err
		}
	}
	tape, err := replay.OpenTape(*tapePath)
	if err != nil {
		return err
	}
	defer tape.Close()
	if s := opts.Profile; s != nil && s.Sampling != nil && s.Sampling.Provider == replay.ProviderManual {
		if *dash == dashboardOff {
			fmt.Fprintln(stderr, "mcptape: the testing profile leaves sampling to a person, but --dashboard off leaves nobody to ask: "+
				"the server gets an error for each sampling request the recording has no answer for")
		} else {
			pd, err := startPendingDashboard(ctx, tape, *dash, *dashToken, flagSet(fs, "dashboard"), logger)
			if err != nil {
				return err
			}
			defer pd.close()
			opts.Manual, opts.ManualTimeout = pd.pending.Ask, *manualTimeout
			fmt.Fprintf(stderr, "mcptape: sampling requests wait for you at %s (each for at most %s)\n", pd.pageURL("/pending"), *manualTimeout)
		}
	}
	c, err := replay.NewClient(tape, opts)
	switch {
	case errors.Is(err, replay.ErrBadIgnorePath):
		return usagef("--ignore: %v", err)
	case errors.Is(err, replay.ErrNoSession):
		return usagef("--session: %v; the tape holds %s", err, sessionIDs(tape))
	case err != nil:
		return fmt.Errorf("%s: %w", *tapePath, err)
	}
	rep, err := c.Run(ctx, *target)
	if rep == nil {
		return err
	}
	// The report quotes recorded and live values: through the terminal
	// filter.
	if werr := rep.WriteText(&terminalWriter{w: stdout}, *verbose); werr != nil && err == nil {
		err = werr
	}
	if *junit != "" {
		var b bytes.Buffer
		if jerr := rep.WriteJUnit(&b); jerr != nil {
			return jerr
		}
		if jerr := os.WriteFile(*junit, b.Bytes(), 0o644); jerr != nil {
			return fmt.Errorf("writing the JUnit report: %w", jerr)
		}
	}
	if err != nil {
		return err
	}
	if n := rep.Problems(); n > 0 {
		return fmt.Errorf("the live server differs from the recording: %d problem(s), listed above", n)
	}
	return nil
}

func sessionIDs(t *replay.Tape) string {
	ids := make([]string, len(t.Sessions))
	for i, s := range t.Sessions {
		ids[i] = s.Session.ID
	}
	return strings.Join(ids, ", ")
}

// pendingDashboard is the replay client's dashboard for the manual
// sampling provider: the tape's sessions in memory, to look at, and the
// requests that wait for a person, to answer.
type pendingDashboard struct {
	*runningDashboard
	pending *dashboard.Pending
	store   *memstore.Store
	replays *replayServers
}

func startPendingDashboard(ctx context.Context, tape *replay.Tape, addr, token string, fixed bool, logger *slog.Logger) (*pendingDashboard, error) {
	store := memstore.New()
	if _, err := replay.Import(ctx, store, tape, &replay.ImportOptions{Rename: true}); err != nil {
		store.Close()
		return nil, fmt.Errorf("showing the tape in the dashboard: %w", err)
	}
	pending := dashboard.NewPending()
	replays := &replayServers{store: store, logger: logger}
	d, err := startDashboard(&dashboardConfig{store: store, addr: addr, flag: "--dashboard", fixed: fixed, token: token,
		feed: dashboard.FeedPoll, backend: &dashBackend{replays: replays}, pending: pending, logger: logger})
	if err != nil {
		pending.Close()
		store.Close()
		return nil, err
	}
	return &pendingDashboard{runningDashboard: d, pending: pending, store: store, replays: replays}, nil
}

// close ends the waits (a person can no longer answer), then stops the
// dashboard.
func (d *pendingDashboard) close() {
	d.pending.Close()
	_ = d.runningDashboard.close()
	d.replays.close()
	d.store.Close()
}
