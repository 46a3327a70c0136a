package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// subcommands are the commands reached through another (`replay server`),
// with their arguments and what they do, for their -h.
var subcommands = map[string][2]string{
	"replay server":     {"--tape FILE [--listen ADDR | --stdio] [--profile FILE] [--timing recorded|fast] [--strict]", "Stand in for the recorded server: MCP clients connect to --listen and get the tape's answers, or,\nwith --stdio, a client launches it as a stdio server (the command in its config) and talks over stdin and stdout."},
	"replay client":     {"--tape FILE --target URL [--profile FILE] [--junit FILE]", "Send the tape's recorded client requests to a live server and compare its answers with the recording."},
	"fixture server":    {"[--listen ADDR] [--tls-cert FILE --tls-key FILE] [--stdio]", "Run the reference MCP server (both protocol eras) that the demo and the tests use."},
	"fixture client":    {"--url URL [--only STEPS] [--json]", "Run the scripted reference client against an MCP endpoint and report each step."},
	"fixture oauth":     {"[--listen ADDR] [--auth-listen ADDR] [--accept-resource URL]...", "Run the reference MCP server behind OAuth bearer tokens, with an authorization server that approves every request at once."},
	"ca init":           {"[--force] [--data DIR]", "Create mcptape's own CA (for intercepting HTTPS) in DATA/ca: a certificate for clients to trust, and its private key (mode 0600)."},
	"ca path":           {"[--data DIR]", "Print the path of mcptape's CA certificate (for NODE_EXTRA_CA_CERTS, curl --cacert, …)."},
	"metrics grafana":   {"", "Print a Grafana dashboard (JSON) for the metrics `mcptape record` serves."},
	"baseline accept":   {"[--data DIR] [UPSTREAM | ROUTE | stdio NAME]...", "Trust the tools each named upstream (every upstream, when none is named) listed last: a tools/list of it that differs from then on is marked with a drift finding."},
	"baseline show":     {"[--data DIR] [--json] [UPSTREAM | stdio NAME]...", "Print the trusted tool lists."},
	"baseline reset":    {"[--data DIR] (UPSTREAM | stdio NAME)... | --all", "Forget trusted tool lists."},
	"bench plain-proxy": {"--upstream URL [--listen ADDR]", "A plain Go reverse proxy that records nothing (used by `mcptape bench`)."},
}

// usageOf is the argument synopsis and summary of a command or subcommand.
func usageOf(name string) (args, summary string) {
	if s, ok := subcommands[name]; ok {
		return s[0], s[1]
	}
	for _, c := range commands() {
		if c.name == name {
			return c.args, c.summary
		}
	}
	return "", ""
}

// newFlags is a flag set that reports errors instead of exiting; its -h
// prints the command's synopsis, summary and flags.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("mcptape "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(fs, name) }
	return fs
}

func printUsage(fs *flag.FlagSet, name string) {
	w := fs.Output()
	args, summary := usageOf(name)
	fmt.Fprintf(w, "usage: mcptape %s %s\n", name, args)
	if summary != "" {
		fmt.Fprintf(w, "\n%s\n", summary)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		fs.PrintDefaults()
	}
}

// parse parses flags. -h (anywhere, also after the arguments) prints the
// usage and returns flag.ErrHelp; a mistake becomes one usage error that
// says what the flag wants, without the whole flag list.
func parse(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err == nil && helpAfter(args, fs.Args()) {
		err = flag.ErrHelp
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	return &usageError{msg: flagProblem(fs, err), cmd: strings.TrimPrefix(fs.Name(), "mcptape ")}
}

// helpAfter reports whether -h came among the arguments left after the
// flags (`mcptape metrics grafana -h`), not after a `--`.
func helpAfter(args, rest []string) bool {
	for i, a := range args {
		if a == "--" && len(args)-i-1 >= len(rest) {
			return false
		}
	}
	for _, a := range rest {
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

var (
	reInvalid  = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for flag -(\S+): (.*)$`)
	reUnknown  = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	reNeedsArg = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// flagProblem turns the flag package's error into what a user can act on.
func flagProblem(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := reUnknown.FindStringSubmatch(msg); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		s := fmt.Sprintf("unknown flag --%s", m[1])
		if near := closest(m[1], names); near != "" {
			s += fmt.Sprintf("; did you mean --%s?", near)
		}
		return s
	}
	if m := reNeedsArg.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s needs a value%s", m[1], wants(fs.Lookup(m[1]), ""))
	}
	if m := reInvalid.FindStringSubmatch(msg); m != nil {
		value, name, why := m[1], m[2], m[3]
		f := fs.Lookup(name)
		if w := wants(f, value); w != "" {
			return fmt.Sprintf("--%s %q%s", name, value, w)
		}
		return fmt.Sprintf("--%s %q: %s", name, value, why)
	}
	return msg
}

// wants says what a flag takes, for a value that was not that: ": needs a
// unit, e.g. 5m" for a bare number given to a duration.
func wants(f *flag.Flag, value string) string {
	if f == nil {
		return ""
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return fmt.Sprintf(": needs a unit, e.g. %sm", value)
		}
		return ": want a duration such as 500ms, 30s, 5m or 1h30m"
	case bool:
		return ": want true or false"
	case int, int64, uint, uint64:
		return ": want a whole number"
	case float64:
		return ": want a number"
	}
	return ""
}

// closest is the candidate nearest to s (edit distance at most a third of
// its length, or s a prefix of it), or "".
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/3+1
	for _, c := range candidates {
		if len(s) >= 2 && strings.HasPrefix(c, s) {
			return c
		}
		if d := editDistance(s, c); d < bestD || (d == bestD && best == "" && d <= 2) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (adjacent swaps count
// one, as in "recrod").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// groupHelp answers `mcptape replay -h` and the like: the subcommands of
// group, each with its synopsis and summary.
func groupHelp(w io.Writer, group string, subs ...string) error {
	fmt.Fprintf(w, "usage: mcptape %s %s ...\n\n", group, strings.Join(subs, "|"))
	for _, s := range subs {
		args, summary := usageOf(group + " " + s)
		fmt.Fprintf(w, "  mcptape %s %s %s\n      %s\n", group, s, args, summary)
	}
	fmt.Fprintf(w, "\nRun `mcptape %s %s -h` for its flags.\n", group, subs[0])
	return flag.ErrHelp
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// buildVersion is the main module's version from the build information:
// v1.2.3 when built with `go install …@v1.2.3`, else the commit of the
// checkout it was built in (with "+dirty" for uncommitted changes), else
// "(devel)".
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	v := info.Main.Version
	if v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" {
		return "(devel) " + rev[:min(12, len(rev))] + modified
	}
	return "(devel)"
}

// didYouMean is "; did you mean X?" for the candidate nearest to s, or "".
func didYouMean(s string, candidates ...string) string {
	if near := closest(s, candidates); near != "" {
		return fmt.Sprintf("; did you mean %s?", near)
	}
	return ""
}
