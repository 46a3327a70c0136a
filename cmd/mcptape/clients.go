package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/cmd/mcptape/internal/clientconfig"
	"github.com/mcptape/mcptape/proxy"
)

// The client-config commands: `clients`, `attach` and `detach`. The config
// logic lives in internal/clientconfig; here are flags and output. Every
// string read from a config (names, commands, paths, URLs) goes through
// clean before it reaches the terminal, and commands are shown with their
// secrets redacted.

const (
	clientsUsage = "[CLIENT] [--config FILE]"
	attachUsage  = "CLIENT NAME...|--all [--config FILE] [--data DIR]"
	detachUsage  = "CLIENT NAME...|--all [--config FILE]"
)

func clientNames() string {
	var names []string
	for _, c := range clientconfig.Clients() {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

// locations are the configs of client: the one named by --config, else
// the client's own.
func locations(c clientconfig.Client, config string) ([]clientconfig.Location, error) {
	if config == "" {
		return clientconfig.Locations(c, nil), nil
	}
	abs, err := filepath.Abs(config)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--config %s: there is no such file", clean(config))
	} else if err != nil {
		return nil, fmt.Errorf("--config %s: %w", clean(config), err)
	}
	return clientconfig.LocationsIn(c, abs, nil), nil
}

// cleanErr makes an error that quotes a config safe for the terminal.
func cleanErr(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(clean(err.Error()))
}

func runClients(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("clients", stderr)
	config := fs.String("config", "", "read this config file instead of the client's own (needs CLIENT)")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	clients := clientconfig.Clients()
	switch fs.NArg() {
	case 0:
		if *config != "" {
			return usagef("--config needs a CLIENT, one of %s", clientNames())
		}
	case 1:
		c, err := clientconfig.ParseClient(fs.Arg(0))
		if err != nil {
			return usagef("%v", err)
		}
		clients = []clientconfig.Client{c}
	default:
		return usagef("name at most one client")
	}
	for i, c := range clients {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s (%s)\n", c.Title(), c)
		locs, err := locations(c, *config)
		if err != nil {
			return err
		}
		for _, loc := range locs {
			listLocation(stdout, loc)
		}
	}
	fmt.Fprintf(stdout, "\nRoute a server through mcptape with `mcptape attach CLIENT NAME`, and back with `mcptape detach CLIENT NAME`.\n")
	return nil
}

func listLocation(w io.Writer, loc clientconfig.Location) {
	where := fmt.Sprintf("  %s config: %s", loc.Scope, clean(loc.Path))
	if loc.Scope == clientconfig.ScopeLocal {
		where = fmt.Sprintf("  local config (this directory's entry): %s", clean(loc.Path))
	}
	servers, err := clientconfig.Servers(loc)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(w, "%s (not found)\n", where)
		return
	case err != nil:
		var ce *clientconfig.ConfigError
		switch {
		case errors.As(err, &ce) && ce.Syntax != nil:
			fmt.Fprintf(w, "%s\n    not valid JSON, so the client cannot read it either: %s\n", where, clean(ce.Syntax.Error()))
		case errors.As(err, &ce):
			fmt.Fprintf(w, "%s\n    cannot be read: %s\n", where, clean(ce.Msg))
		default:
			fmt.Fprintf(w, "%s\n    cannot be read: %s\n", where, clean(err.Error()))
		}
		return
	case len(servers) == 0:
		fmt.Fprintf(w, "%s (no servers)\n", where)
		return
	}
	fmt.Fprintf(w, "%s\n", where)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    NAME\tTYPE\tATTACHED\tCOMMAND OR URL")
	for _, s := range servers {
		attached, what := "no", ""
		switch s.Transport {
		case clientconfig.Stdio:
			cmd, args := s.Command, s.Args
			if s.Attached() {
				attached = "yes"
				cmd, args = s.Wrapped.Command, s.Wrapped.Args
			}
			what = clientconfig.CommandLine(cmd, args)
			if len(s.Env) > 0 {
				var env []string
				for _, v := range clientconfig.RedactEnv(s.Env) {
					env = append(env, v.Name+"="+v.Value)
				}
				what += "  (env " + strings.Join(env, " ") + ")"
			}
		case clientconfig.HTTP:
			what = clientconfig.RedactURL(s.URL)
			if s.Attached() {
				attached = "yes"
				what = clientconfig.RedactURL(s.Upstream) + "  (via " + clientconfig.RedactURL(s.URL) + ")"
			}
		}
		if s.Problem != "" {
			attached = "-"
			what = "cannot be attached: " + s.Problem
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", clean(s.Name), s.Transport, attached, clean(what))
	}
	tw.Flush()
}

// clientCmd is what attach and detach were asked: CLIENT NAME...|--all,
// the config files, and attach's data directory.
type clientCmd struct {
	client clientconfig.Client
	names  []string
	locs   []clientconfig.Location
	data   string // absolute; attach's --data, else the default
	config string // --config as given, "" without it
}

// args repeats the command's client, servers and --config, for a command
// it prints (to undo, to run again).
func (cc *clientCmd) args(names []string) string {
	s := cc.client.String() + " " + undoArgs(names)
	if cc.config != "" {
		s += " --config " + clean(shellWord(cc.config))
	}
	return s
}

// clientArgs parses CLIENT NAME...|--all for attach and detach.
func clientArgs(name string, args []string, stderr io.Writer, withData bool) (*clientCmd, error) {
	fs := newFlags(name, stderr)
	config := fs.String("config", "", "the config file to change, instead of the client's own")
	all := fs.Bool("all", false, "every server of the client")
	dataFlag := new(string)
	if withData {
		dataFlag = fs.String("data", "", "the directory wrap records into (default: the per-user data directory, or $"+envData+" when set); attach writes it into the entry, absolute")
	}
	if err := parse(fs, interleave(args)); err != nil {
		return nil, err
	}
	if fs.NArg() == 0 {
		return nil, usagef("name a client (%s) and a server, or --all", clientNames())
	}
	c, err := clientconfig.ParseClient(fs.Arg(0))
	if err != nil {
		return nil, usagef("%v", err)
	}
	cc := &clientCmd{client: c, names: fs.Args()[1:], config: *config}
	switch {
	case *all && len(cc.names) > 0:
		return nil, usagef("name servers or give --all, not both")
	case !*all && len(cc.names) == 0:
		return nil, usagef("name a server of %s (see `mcptape clients %s`), or give --all", c.Title(), c)
	}
	if withData {
		// Always absolute and always written: a client starts a server in
		// a directory of its own, without this shell's environment, and
		// maybe without HOME.
		d := *dataFlag
		if d == "" {
			d = defaultDataDir()
		}
		if cc.data, err = filepath.Abs(d); err != nil {
			return nil, err
		}
	}
	if cc.config != "" {
		if abs, err := filepath.Abs(cc.config); err == nil {
			cc.config = abs
		}
	}
	cc.locs, err = locations(c, *config)
	return cc, err
}

// executable is the mcptape a client is to launch: this one, by the path
// the user ran it by (the link on PATH, not the versioned file it points
// to, which an upgrade removes), unless it is a temporary build that
// disappears when it exits.
func executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this mcptape's own path: %w", err)
	}
	if abs, err := filepath.Abs(exe); err == nil {
		exe = abs
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "", fmt.Errorf("this mcptape is a temporary build (go run) that is deleted when it exits, and the client would launch it later; build it first (go build -o mcptape ./cmd/mcptape, or go install ./cmd/mcptape) and run attach with that binary")
	}
	return invokedAs(exe), nil
}

// invokedAs is the path this process was started by (os.Args[0], looked
// up on PATH when it is a bare name, made absolute, links kept), when it
// names the same file as exe; else exe.
func invokedAs(exe string) string {
	arg0 := os.Args[0]
	var p string
	if strings.ContainsRune(arg0, filepath.Separator) || strings.ContainsRune(arg0, '/') {
		p, _ = filepath.Abs(arg0)
	} else if lp, err := exec.LookPath(arg0); err == nil {
		p, _ = filepath.Abs(lp)
	}
	if p == "" || p == exe {
		return exe
	}
	a, err1 := os.Stat(p)
	b, err2 := os.Stat(exe)
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		return exe
	}
	return p
}

func runAttach(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cc, err := clientArgs("attach", args, stderr, true)
	if err != nil {
		return err
	}
	// Only a stdio server needs this mcptape's path (an HTTP one goes
	// through a running recorder): a temporary build fails those alone.
	exe, exeErr := executable()
	opts := &clientconfig.AttachOptions{Executable: exe, ExecutableError: exeErr, Data: cc.data}
	// An HTTP (url) server goes through a running recorder's route.
	var routedVia string
	if rc, st, derr := remotestore.Discover(ctx, cc.data); derr == nil {
		routedVia = st.Listen
		opts.Route = func(name, upstream string) (string, error) {
			if st.Listen == "" {
				return "", &ownerError{cc: cc, name: name, pid: st.PID}
			}
			ri, err := rc.AddRoute(ctx, routeName(name), upstream)
			if errors.Is(err, remotestore.ErrNoRoutes) {
				return "", &ownerError{cc: cc, name: name, pid: st.PID, single: true}
			}
			if err != nil {
				return "", err
			}
			return ri.URL, nil
		}
	}
	reps, err := clientconfig.Attach(cc.locs, cc.names, opts)
	failed := report(stdout, reps, cc)
	if err != nil {
		return cleanErr(err)
	}
	if changed(reps) {
		stdio, http := attachedKinds(reps)
		if stdio {
			fmt.Fprintf(stdout, "The attached stdio servers now run through `mcptape wrap`, which records into %s; see them with `mcptape dashboard --data %s`.\n", clean(cc.data), clean(shellWord(cc.data)))
		}
		if http {
			fmt.Fprintf(stdout, "The attached HTTP servers now go through the recorder at %s, while it runs (detach before you stop it for good).\n", clean(routedVia))
		}
		fmt.Fprintf(stdout, "To apply: %s.\n", cc.client.Restart())
		fmt.Fprintf(stdout, "To undo: mcptape detach %s.\n", cc.args(cc.names))
		for _, r := range reps {
			if r.Changed() && r.Location.Scope == clientconfig.ScopeProject {
				fmt.Fprintf(stdout, "Note: %s is a project config, often shared through version control; the attached entry names this machine's mcptape, so detach before you commit it.\n", clean(r.Location.Path))
			}
		}
	} else {
		fmt.Fprintln(stdout, "Nothing changed.")
	}
	return failed
}

// attachedKinds says whether stdio servers, and HTTP ones, were attached.
func attachedKinds(reps []*clientconfig.Report) (stdio, http bool) {
	for _, r := range reps {
		for _, res := range r.Results {
			if res.Action == clientconfig.Attached {
				stdio = stdio || res.Server.Transport == clientconfig.Stdio
				http = http || res.Server.Transport == clientconfig.HTTP
			}
		}
	}
	return stdio, http
}

// ownerError is why the process that owns the data directory cannot take
// an HTTP server: a dashboard (which records no HTTP traffic), or a
// recorder of one upstream. It says what to run instead.
type ownerError struct {
	cc     *clientCmd
	name   string
	pid    int
	single bool // a recorder with --upstream, not a dashboard
}

func (e *ownerError) Error() string {
	data := clean(shellWord(e.cc.data))
	again := fmt.Sprintf("mcptape attach %s --data %s", e.cc.args([]string{e.name}), data)
	if e.single {
		return fmt.Sprintf("the recorder running on %s (pid %d) serves one upstream (--upstream), so it cannot add this server as a route: stop it, start `mcptape record --routes --data %s` (name its upstream with --route NAME=URL to keep it), then run `%s`",
			clean(e.cc.data), e.pid, data, again)
	}
	return fmt.Sprintf("%s is held by `mcptape dashboard` (pid %d), which shows recordings but records no HTTP traffic: stop it, start `mcptape record --routes --data %s` (it serves the same dashboard while it records), then run `%s`",
		clean(e.cc.data), e.pid, data, again)
}

func runDetach(_ context.Context, args []string, stdout, stderr io.Writer) error {
	cc, err := clientArgs("detach", args, stderr, false)
	if err != nil {
		return err
	}
	reps, err := clientconfig.Detach(cc.locs, cc.names)
	failed := report(stdout, reps, cc)
	if err != nil {
		return cleanErr(err)
	}
	if changed(reps) {
		fmt.Fprintf(stdout, "To apply: %s.\n", cc.client.Restart())
	} else {
		fmt.Fprintln(stdout, "Nothing changed.")
	}
	return failed
}

// routeName is a route name for a client's server name: characters a
// route name cannot hold become '-'.
func routeName(server string) string {
	b := []byte(server)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	name := strings.TrimLeft(string(b), ".")
	if len(name) > 64 {
		name = name[:64]
	}
	if name == "" || proxy.ValidRouteName(name) != nil {
		name = "server-" + name
	}
	return name
}

func undoArgs(names []string) string {
	if len(names) == 0 {
		return "--all"
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = clean(shellWord(n))
	}
	return strings.Join(quoted, " ")
}

func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t'\"\\$`;&|<>()*?[]{}!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func changed(reps []*clientconfig.Report) bool {
	for _, r := range reps {
		if r.Changed() {
			return true
		}
	}
	return false
}

// report prints what attach or detach did, config by config. It returns an
// error when a server named on the command line could not be attached.
func report(w io.Writer, reps []*clientconfig.Report, cc *clientCmd) error {
	named := cc.names
	var failed []string
	for _, r := range reps {
		fmt.Fprintf(w, "%s %s config %s:\n", r.Location.Client.Title(), r.Location.Scope, clean(r.Location.Path))
		shown := 0
		for _, res := range r.Results {
			if len(named) == 0 && (res.Action == clientconfig.NotAttached) {
				continue // detach --all: only what was attached
			}
			shown++
			name := clean(res.Name)
			switch res.Action {
			case clientconfig.Attached:
				if res.Server.Transport == clientconfig.HTTP {
					fmt.Fprintf(w, "  %s: attached (the client now connects to the recorder's route to %s)\n", name, clean(clientconfig.RedactURL(res.Server.URL)))
				} else {
					fmt.Fprintf(w, "  %s: attached (the client now starts `mcptape wrap … -- %s`)\n", name, clean(clientconfig.CommandLine(res.Server.Command, res.Server.Args)))
				}
			case clientconfig.AlreadyAttached:
				fmt.Fprintf(w, "  %s: already attached; nothing to do\n", name)
			case clientconfig.Detached:
				fmt.Fprintf(w, "  %s: detached; its entry is back as it was\n", name)
			case clientconfig.DetachedKeptEdits:
				fmt.Fprintf(w, "  %s: detached; its entry was edited while attached, so only its command and arguments were unwrapped, and your edits kept\n", name)
			case clientconfig.DetachedFromArgs:
				fmt.Fprintf(w, "  %s: detached; no saved copy of its entry was found (%s is gone), so its command and arguments were rebuilt from wrap's arguments\n", name, clean(clientconfig.StatePath(r.Location.Path)))
			case clientconfig.NotAttached:
				fmt.Fprintf(w, "  %s: not attached; nothing to do\n", name)
			case clientconfig.Skipped:
				if errors.Is(res.Reason, clientconfig.ErrHTTPServer) {
					data := clean(shellWord(cc.data))
					fmt.Fprintf(w, "  %s: skipped: it is an HTTP server (%s), which goes through a running recorder, and none runs on %s: start one with `mcptape record --routes --data %s`, then run `mcptape attach %s --data %s`\n",
						name, clean(clientconfig.RedactURL(res.Server.URL)), clean(cc.data), data, cc.args([]string{res.Name}), data)
				} else if res.Server.Transport == clientconfig.HTTP {
					fmt.Fprintf(w, "  %s: skipped: it is an HTTP server (%s); %s\n", name, clean(clientconfig.RedactURL(res.Server.URL)), clean(res.Reason.Error()))
				} else {
					fmt.Fprintf(w, "  %s: skipped: %s\n", name, clean(res.Reason.Error()))
				}
				if len(named) > 0 {
					failed = append(failed, name)
				}
			}
			for _, s := range res.Shadowed {
				fmt.Fprintf(w, "    (%s also has a server %s in its %s config %s, which it does not use; that one was left alone)\n", r.Location.Client.Title(), name, s.Scope, clean(s.Path))
			}
		}
		if shown == 0 {
			fmt.Fprintln(w, "  no server here is attached")
		}
		if r.Backup != "" {
			fmt.Fprintf(w, "  A backup of the config as it was is in %s.\n", clean(r.Backup))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not attach %s (see above)", strings.Join(failed, ", "))
	}
	return nil
}
