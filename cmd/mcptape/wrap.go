package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/spool"
	"github.com/mcptape/mcptape/capture/traces"
	"github.com/mcptape/mcptape/proxy"
)

const wrapUsage = "[--data DIR] [--name NAME] [--otlp URL] -- COMMAND [ARG...]"

// exitCode is an exit status a command passes on as it is (wrap exits with
// its server's).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// runWrap is `mcptape wrap`: the stdio leg. It runs the server command as
// a child, relays stdin, stdout and stderr unchanged, records the traffic
// into a spool file the store's owner ingests, and exits as the server did.
// It prints nothing to stdout but the server's own bytes, and to stderr
// only the server's stderr and, once, what it could not record.
func runWrap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return wrap(ctx, args, os.Stdin, stdout, stderr)
}

func wrap(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("wrap", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store the recording goes to")
	name := fs.String("name", "", "the server's name in the recording (default: from the command)")
	noRedact := fs.Bool("no-redact", false, "store secrets unredacted (local debugging only)")
	var redactArgs, redactEnv stringList
	fs.Var(&redactArgs, "redact-arg", "also redact what this regular expression matches in the server's arguments (its first group, if it has one), there and in every message (repeatable)")
	fs.Var(&redactEnv, "redact-env", "also redact the values of the server's environment variables named like this (a shell pattern such as 'DB_*'; repeatable)")
	otlp := fs.String("otlp", "", otlpUsage)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mcptape wrap %s\n\nRuns COMMAND as a stdio MCP server and records its traffic; put it in front of the\nserver's command in a client's config (or let `mcptape attach` do it).\n\n", wrapUsage)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usagef("no server command: give it after --, e.g. mcptape wrap -- node build/index.js")
	}
	if *name == "" {
		*name = serverName(argv)
	}
	redact := capture.RedactOptions{Disabled: *noRedact, Env: redactEnv}
	for _, p := range redactArgs {
		re, err := regexp.Compile(p)
		if err != nil {
			return usagef("--redact-arg %q: %v", p, err)
		}
		redact.Args = append(redact.Args, re)
	}
	for _, p := range redactEnv {
		if _, err := path.Match(p, ""); err != nil {
			return usagef("--redact-env %q: %v", p, err)
		}
	}
	wd, _ := os.Getwd()
	note := func(format string, a ...any) { fmt.Fprintf(stderr, "mcptape wrap: "+format+"\n", a...) }
	// A write to a client that has gone must fail, not kill the wrap
	// (SIGPIPE) before the recording is finished; handled signals are
	// reset for the server, which gets SIGPIPE as it would unwrapped.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	// Spans go out from here only when asked: a wrap never fails its server
	// for them, so an endpoint it cannot use is said once and dropped.
	tr, terr := startTraces(ctx, *otlp, nil, nil, nil)
	if terr != nil {
		note("not exporting spans (%v)", terr)
	}
	defer closeTraces(tr, nil)
	started := time.Now()
	rec, sp, err := openWrapRecording(ctx, *data, *name, redact, stderr, tr)
	var stream *capture.Stream
	if err != nil {
		note("not recording this server (%v); it runs as usual", err)
	} else {
		stream = rec.OpenStream(&capture.StreamInfo{Name: *name, Leg: capture.LegStdio, Command: capture.Command{
			Args: argv, Env: serverEnv(os.Environ()), Dir: wd,
		}})
	}
	finish := func(exit string) {
		if stream != nil {
			dctx, cancel := context.WithTimeout(context.Background(), drainWait)
			if err := stream.Drain(dctx); err != nil {
				note("the recording was still catching up after %s; what it had not stored is counted as lost", drainWait)
			}
			cancel()
			stream.Close(exit)
			closeWrapRecording(rec, sp, note, *data, started)
		}
	}

	prog, err := exec.LookPath(argv[0])
	if err != nil {
		// Recorded too: a server that cannot start is one a user looks for.
		finish("not started: " + err.Error())
		note("cannot start the server: %v", err)
		return exitCode(startFailure(err))
	}
	cmd := exec.Command(prog, argv[1:]...)
	cmd.Args[0] = argv[0]

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// The server gets the signals the wrap gets; the wrap ends when it does.
	res, werr := proxy.Wrap(context.WithoutCancel(ctx), cmd, stdin, stdout, stderr, &proxy.WrapOptions{Stream: stream, Signals: sigs})
	if res == nil {
		finish("not started: " + werr.Error())
		note("cannot start the server: %v", werr)
		return exitCode(startFailure(werr))
	}
	// The client has what the server wrote: let it see the end of the
	// output now, not once the recording has caught up.
	closeOutput(stdout)
	finish(res.Exit())
	if werr != nil {
		return werr
	}
	if ws, ok := res.State.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := ws.Signal()
		if crashSignal(sig) {
			// Go turns these into a crash dump of the wrap's own: exit as
			// a shell reports the server's death instead.
			note("the server was %s; exiting with %d", proxy.ExitText(res.State), 128+int(sig))
			return exitCode(128 + int(sig))
		}
		// Die as the server did, so the client sees the same end.
		signal.Reset(sig)
		raise(sig)
		time.Sleep(100 * time.Millisecond)
		return exitCode(128 + int(sig))
	}
	if c := res.State.ExitCode(); c != 0 {
		return exitCode(c)
	}
	return nil
}

// drainWait bounds how long a wrap whose server has ended waits for its
// recording to catch up with a burst (see capture.Stream.Drain).
const drainWait = 30 * time.Second

// startFailure is the exit status for a server that could not start, as a
// shell's: 127 for a command that is not there, 126 for one that cannot
// be run.
func startFailure(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// crashSignal reports whether sig is one whose default action dumps core
// (SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS,
// SIGXCPU, SIGXFSZ): raised in a Go program, those print a crash dump of
// the program's own and exit 2, so a wrap exits with 128 plus the signal,
// the status a shell reports for a process that died of it.
func crashSignal(sig syscall.Signal) bool {
	for _, s := range crashSignals {
		if sig == s {
			return true
		}
	}
	return false
}

// closeOutput closes the wrap's stdout when it is the process's own.
func closeOutput(w io.Writer) {
	if f, ok := w.(*os.File); ok && f == os.Stdout {
		_ = f.Close()
	}
}

// openWrapRecording starts a recorder writing to a new spool in data, its
// batches going to tr too when the wrap exports spans (nil: it does not).
func openWrapRecording(ctx context.Context, data, name string, redact capture.RedactOptions, stderr io.Writer, tr *traces.Exporter) (*capture.Recorder, *spool.Writer, error) {
	// With spans exported from here (--otlp), the spool says so, and an
	// owner that exports too leaves this server's calls out.
	sp, err := spool.Create(data, name, &spool.Options{Traced: tr != nil})
	if err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("from", "mcptape wrap")
	ro := &capture.RecorderOptions{
		Logger: logger, Redact: redact,
		// A wrap never holds its server up for the record: with the
		// queue full, a burst waits in a backlog file in the spool
		// folder, and a long line is kept there too, not in memory.
		Backpressure: time.Millisecond, QueueBytes: 16 << 20, SpillDir: filepath.Join(data, spool.Dir),
		// The wrap records its server's tools/list itself: it reads the
		// baselines from the data directory, without the store.
		Baselines: capture.OpenBaselines(data),
		OnBatch:   tr.BatchHook(),
	}
	if !redact.Disabled {
		if ro.Redact.PseudonymKey, err = pseudonymKey(data); err != nil {
			sp.Close()
			return nil, nil, err
		}
	}
	rec, err := capture.NewRecorder(ctx, sp, ro)
	if err != nil {
		sp.Close()
		return nil, nil, err
	}
	return rec, sp, nil
}

func closeWrapRecording(rec *capture.Recorder, sp *spool.Writer, note func(string, ...any), data string, started time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), drainWait)
	defer cancel()
	cerr := rec.Close(ctx)
	st := rec.Stats()
	if err := errors.Join(cerr, sp.Close()); err != nil {
		note("closing the recording: %v", err)
	}
	if lost := st.Lost + st.Dropped; lost > 0 {
		why := st.LastError
		if why == "" {
			why = "the recording could not keep up"
		}
		note("%d messages of this session could not be recorded (%s)", lost, why)
		// Where `ls` says it too: a client keeps the wrap's stderr in
		// its own logs, which a user rarely reads. (A wrap that lost
		// nothing leaves the file alone: other wraps share the folder.)
		saveLost(data, started, st, why)
	}
}

// interpreters run a script named by their first argument, which then
// names the server better than the interpreter does.
var interpreters = map[string]bool{
	"node": true, "npx": true, "python": true, "python3": true, "uv": true, "uvx": true, "deno": true,
	"bun": true, "bunx": true, "pnpm": true, "yarn": true, "docker": true, "java": true, "ruby": true, "go": true,
}

// serverName makes a name for a server from its command line:
// `node build/index.js` → "index", `npx -y @scope/server-everything` →
// "server-everything", `/usr/bin/weather-mcp` → "weather-mcp".
func serverName(argv []string) string {
	base := func(s string) string {
		s = filepath.Base(s)
		if i := strings.LastIndexByte(s, '@'); i > 0 {
			s = s[:i] // a version: server@1.2.3
		}
		return strings.TrimSuffix(s, filepath.Ext(s))
	}
	cmd := strings.TrimSuffix(filepath.Base(argv[0]), ".exe")
	if interpreters[cmd] {
		for _, a := range argv[1:] {
			if a != "" && !strings.HasPrefix(a, "-") && a != "run" && a != "exec" && a != "dlx" && a != "x" {
				return base(a)
			}
		}
	}
	return base(argv[0])
}

// ambient are environment variables every process has, which say nothing
// about how the server was configured: left out of the record.
var ambient = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "PWD": true, "OLDPWD": true,
	"SHLVL": true, "_": true, "TERM": true, "LANG": true, "TMPDIR": true, "TMP": true, "TEMP": true,
	"HOSTNAME": true, "MAIL": true, "DISPLAY": true, "COLORTERM": true, "TERM_PROGRAM": true,
	"TERM_PROGRAM_VERSION": true, "LS_COLORS": true, "LSCOLORS": true, "PS1": true, "EDITOR": true, "PAGER": true,
	"__CF_BUNDLE_IDENTIFIER": true, "__CFBundleIdentifier": true, "XPC_FLAGS": true, "XPC_SERVICE_NAME": true,
	"COMMAND_MODE": true, "SECURITYSESSIONID": true, "SystemRoot": true, "windir": true, "ComSpec": true,
	"PATHEXT": true, "APPDATA": true, "LOCALAPPDATA": true, "USERPROFILE": true, "HOMEDRIVE": true, "HOMEPATH": true,
}

// serverEnv is the environment as recorded for the session: the variables
// a client's config sets, without those every process inherits.
func serverEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if ambient[name] || strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "XDG_") || strings.HasPrefix(name, "SSH_") || name == childEnvName {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// childEnvName is set by mcptape's own tests when they run mcptape as a
// child process; it says nothing about the server.
const childEnvName = "MCPTAPE_TEST_AS_MCPTAPE"
