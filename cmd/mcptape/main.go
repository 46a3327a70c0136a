// Command mcptape records and replays Model Context Protocol traffic.
//
// Run `mcptape help` for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/procs"
)

func main() { os.Exit(runProcess(os.Args[1:])) }

// runProcess runs a command as the whole process (main, and the tests'
// child processes): Ctrl-C and SIGTERM end it, and a proxy's Ps follow its
// load (one while it is light). Not for run in a test's own process, where
// commands run side by side.
func runProcess(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 && (args[0] == "record" || args[0] == "wrap") {
		go procs.Run(ctx, procs.CPUTime)
	}
	return run(ctx, args, os.Stdout, os.Stderr)
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // the command line was wrong
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"record", "--upstream URL | --route NAME=URL... | --forward [--mitm HOST-GLOB...] [--listen ADDR] [--data DIR] [--dashboard ADDR|off]", "put the recording proxy in front of MCP servers (one, several, or as an HTTP(S) proxy)", runRecord},
		{"wrap", wrapUsage, "run a stdio MCP server and record its traffic (what goes in a client's config)", runWrap},
		{"ls", "[--data DIR] [--json] [--limit N]", "list recorded sessions", runLs},
		{"dashboard", "[--data DIR] [--listen ADDR] [--max-age 30d] [--max-store-size SIZE]", "browse, search and edit a store in the web dashboard (a running record serves its own)", runDashboard},
		{"show", "[--data DIR] [--json] [--tree] SESSION", "print a session's messages in order, or its causal tree", runShow},
		{"demo", "[--keep-running]", "record the built-in fixture client and server on both protocol eras", runDemo},
		{"fixture", "server|oauth|client ...", "run the reference MCP server (also behind OAuth) or scripted client", runFixture},
		{"export", "[--data DIR] [-o FILE] [--format tape|har|jsonl] [SESSION...]", "write sessions (all, or those named by id or prefix) as a tape file, a HAR log or JSON Lines", runExport},
		{"import", "[--data DIR] [--rename] FILE", "read a tape file's sessions into a store", runImport},
		{"verify", "[--data DIR]", "read the whole store and name any damage (checksums, unreadable records)", runVerify},
		{"check", checkUsage, "check that recordings are healthy (no errors, unanswered calls, lost messages or failing findings), for CI: JUnit and SARIF reports", runCheck},
		{"diff", diffUsage, "compare two recordings (tapes or sessions): tools, prompts and resources, answers, calls, latency", runDiff},
		{"baseline", baselineUsage, "trust the tools each upstream lists now: a tools/list that differs later is marked as drift (and fails check)", runBaseline},
		{"prune", pruneUsage, "delete old sessions (quiet for longer than a duration, or the oldest past a size) and give their disk space back", runPrune},
		{"replay", "server --tape FILE [--stdio] | client --tape FILE --target URL", "stand in for a recorded server (over HTTP or stdio), or replay a recorded client", runReplay},
		{"send", sendUsage, "send one request to a live MCP server in a session of its own (through a recorder, to record it)", runSend},
		{"clients", clientsUsage, "list the MCP client configs on this machine (Claude Desktop, Claude Code, Cursor, VS Code) and their servers", runClients},
		{"attach", attachUsage, "route a client's server through `mcptape wrap`, so that it is recorded", runAttach},
		{"detach", detachUsage, "put an attached server's config entry back as it was", runDetach},
		{"ca", caUsage, "create mcptape's own CA (for intercepting HTTPS), or print its certificate's path", runCA},
		{"bench", benchUsage, "measure mcptape against a direct connection, a plain Go proxy and nginx, side by side", runBench},
		{"metrics", metricsUsage, "print the Grafana dashboard for the metrics of record --metrics", runMetrics},
		{"healthcheck", "[--url URL]", "ask a recorder's /readyz (on its --metrics listener) whether it records: exit 0 if so (a container's HEALTHCHECK)", runHealthcheck},
		{"version", "", "print the version", runVersion},
	}
}

// usageError is a command-line mistake: exit code 2, and the usage shown.
type usageError struct {
	msg string
	// cmd is the subcommand the mistake is in ("replay server"), when
	// not the command itself.
	cmd string
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 && args[0] == "help" {
			// `mcptape help record` is `mcptape record -h`.
			return run(ctx, []string{args[1], "-h"}, stdout, stderr)
		}
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ue *usageError
		var ec exitCode
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &ec):
			return int(ec)
		case errors.As(err, &ue):
			name := c.name
			if ue.cmd != "" {
				name = ue.cmd
			}
			fmt.Fprintf(stderr, "mcptape %s: %s\nrun `mcptape %s -h` for its usage\n", name, capture.TerminalLines(ue.msg), name)
			return exitUsage
		default:
			// Errors can quote recorded values (ids, names, versions).
			fmt.Fprintf(stderr, "mcptape %s: %s\n", c.name, capture.TerminalLines(err.Error()))
			return exitError
		}
	}
	fmt.Fprintf(stderr, "mcptape: unknown command %q", args[0])
	if near := closest(args[0], commandNames()); near != "" {
		fmt.Fprintf(stderr, "; did you mean `mcptape %s`?", near)
	}
	fmt.Fprintln(stderr, " Run `mcptape help` for the list.")
	return exitUsage
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

func usage(w io.Writer) {
	fmt.Fprint(w, "mcptape records and replays Model Context Protocol traffic.\n\nUsage:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  mcptape %-8s %s\n      %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprint(w, "\nRun `mcptape COMMAND -h` for a command's flags.\n")
}

// version is what -ldflags "-X main.version=…" set, else the module
// version from the build information (what `go install …@v1.2.3`
// records, or the commit of a build in a checkout).
var version = "dev"

func init() {
	if version == "dev" {
		version = buildVersion()
	}
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintln(stdout, "mcptape", version)
	return nil
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
