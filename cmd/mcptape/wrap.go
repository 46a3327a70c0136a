package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/spool"
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
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("cannot start the server: %w", err)
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	wd, _ := os.Getwd()

	note := func(format string, a ...any) { fmt.Fprintf(stderr, "mcptape wrap: "+format+"\n", a...) }
	// Spans go out from here only when asked: a wrap never fails its server
	// for them, so an endpoint it cannot use is said once and dropped.
	tr, terr := startTraces(ctx, *otlp, nil, nil, nil)
	if terr != nil {
		note("not exporting spans (%v)", terr)
	}
	defer closeTraces(tr, nil)
	var onBatch func(*capture.Batch)
	if tr != nil {
		onBatch = tr.OnBatch
	}
	rec, sp, err := openWrapRecording(ctx, *data, *name, *noRedact, stderr, onBatch)
	var stream *capture.Stream
	if err != nil {
		note("not recording this server (%v); it runs as usual", err)
	} else {
		stream = rec.OpenStream(&capture.StreamInfo{Name: *name, Command: capture.Command{
			Args: argv, Env: serverEnv(os.Environ()), Dir: wd,
		}})
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// The server gets the signals the wrap gets; the wrap ends when it does.
	state, werr := proxy.Wrap(context.WithoutCancel(ctx), cmd, stdin, stdout, stderr, &proxy.WrapOptions{Stream: stream, Signals: sigs})
	if stream != nil {
		stream.Close(proxy.ExitText(state))
		closeWrapRecording(rec, sp, note)
	}
	if werr != nil {
		return werr
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		// Die as the server did, so the client sees the same end.
		signal.Reset(ws.Signal())
		raise(ws.Signal())
		time.Sleep(100 * time.Millisecond)
		return exitCode(128 + int(ws.Signal()))
	}
	if c := state.ExitCode(); c != 0 {
		return exitCode(c)
	}
	return nil
}

// openWrapRecording starts a recorder writing to a new spool in data.
func openWrapRecording(ctx context.Context, data, name string, noRedact bool, stderr io.Writer, onBatch func(*capture.Batch)) (*capture.Recorder, *spool.Writer, error) {
	sp, err := spool.Create(data, name, nil)
	if err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("from", "mcptape wrap")
	ro := &capture.RecorderOptions{
		Logger: logger, Redact: capture.RedactOptions{Disabled: noRedact},
		// A wrap never holds its server up for the record: with the
		// queue full it gives the record up (counted) at once.
		Backpressure: time.Millisecond, QueueBytes: 64 << 20,
		// The wrap records its server's tools/list itself: it reads the
		// baselines from the data directory, without the store.
		Baselines: capture.OpenBaselines(data),
		OnBatch:   onBatch,
	}
	if !noRedact {
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

func closeWrapRecording(rec *capture.Recorder, sp *spool.Writer, note func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
