package clientconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// Action is what Attach or Detach did with one server.
type Action int

const (
	// Attached: the entry now runs through mcptape wrap (a stdio server),
	// or its url is a running recorder's route (an HTTP server).
	Attached Action = iota + 1
	// AlreadyAttached: the entry ran through mcptape wrap already; unchanged.
	AlreadyAttached
	// Detached: the entry is back, byte for byte, as it was before attach.
	Detached
	// DetachedKeptEdits: the entry was edited while attached; its command
	// and args are back as they were, the edits to its other members kept.
	DetachedKeptEdits
	// DetachedFromArgs: no saved copy of the entry was found (its state
	// file is gone); the command was rebuilt from wrap's arguments.
	DetachedFromArgs
	// NotAttached: the entry does not run through mcptape; unchanged.
	NotAttached
	// Skipped: the entry cannot be routed through mcptape yet (an HTTP
	// server, or an entry that is not a server); see Result.Reason.
	Skipped
)

func (a Action) String() string {
	switch a {
	case Attached:
		return "attached"
	case AlreadyAttached:
		return "already attached"
	case Detached:
		return "detached"
	case DetachedKeptEdits:
		return "detached (edits kept)"
	case DetachedFromArgs:
		return "detached (rebuilt)"
	case NotAttached:
		return "not attached"
	case Skipped:
		return "skipped"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Changed reports whether the action changed the file.
func (a Action) Changed() bool {
	return a == Attached || a == Detached || a == DetachedKeptEdits || a == DetachedFromArgs
}

// ErrHTTPServer is the reason an HTTP (url) entry is skipped when no
// recorder runs to route it through (AttachOptions.Route is nil).
var ErrHTTPServer = errors.New("it is an HTTP server (a url entry), which goes through a running recorder: start one with `mcptape record --routes` (same --data), then attach again")

// Result is what happened to one server.
type Result struct {
	Name   string
	Action Action
	// Reason says why a server was Skipped.
	Reason error
	// Server is the entry as it was before the command.
	Server Server
	// Shadowed lists the other Locations that define a server of this
	// name, which the client does not use; they were left alone.
	Shadowed []Location
}

// Report is what Attach or Detach did to one Location.
type Report struct {
	Location Location
	Results  []Result
	// Backup is the copy of the whole config written by this call before
	// its first change to the file; empty when one existed already or
	// nothing changed. It is never overwritten.
	Backup string
}

// Changed reports whether the file was written.
func (r *Report) Changed() bool {
	return slices.ContainsFunc(r.Results, func(x Result) bool { return x.Action.Changed() })
}

// AttachOptions configures Attach.
type AttachOptions struct {
	// Executable is the absolute path of the mcptape the client is to
	// launch (clients run servers with a minimal PATH). Required to attach
	// a stdio server; when it is "", ExecutableError says why.
	Executable      string
	ExecutableError error
	// Data is wrap's --data, which should be absolute (clients start
	// servers in a directory of their own); "" leaves it out, so that wrap
	// records into its default data directory.
	Data string
	// Route sends an HTTP (url) server through a running recorder: it
	// asks the recorder for a route named after the server to its url,
	// and returns the URL the client is to use instead. Nil skips HTTP
	// servers (ErrHTTPServer); so does an error, which is then the
	// server's Result.Reason, while the other servers are attached.
	Route func(name, upstream string) (string, error)
}

// UnknownServerError is a server name that no config of the client has.
type UnknownServerError struct {
	Client Client
	Name   string
	// Known lists the names each existing config has, by Location.
	Known []KnownServers
	// Looked lists the files looked at, existing or not.
	Looked []string
}

// KnownServers are the server names of one Location.
type KnownServers struct {
	Location Location
	Names    []string
}

func (e *UnknownServerError) Error() string {
	var all []string
	var where []string
	for _, k := range e.Known {
		all = append(all, k.Names...)
		where = append(where, k.Location.Path)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if len(where) == 0 {
		return fmt.Sprintf("no %s config found (looked for %s); add the server in %s first, or name its config file with --config", e.Client.Title(), strings.Join(slices.Compact(e.Looked), ", "), e.Client.Title())
	}
	where = slices.Compact(where)
	if len(all) == 0 {
		return fmt.Sprintf("no server named %q: %s has no servers configured (%s)", e.Name, e.Client.Title(), strings.Join(where, ", "))
	}
	return fmt.Sprintf("no server named %q in %s; the servers there are: %s (see `mcptape clients`)", e.Name, strings.Join(where, ", "), strings.Join(all, ", "))
}

// route sends one kind of server through mcptape and back: stdio servers
// are wrapped (wrapRoute), url entries pointed at a route of a running
// recorder (recorderRoute).
type route interface {
	// attach returns the edits that send e through mcptape.
	attach(c *config, e *entry, opts *AttachOptions) ([]edit, error)
	// restore returns the edits that put e's command back without the
	// whole saved entry: the saved one's command and args when there is
	// one (saved may be nil), else what wrap's arguments say.
	restore(c *config, e *entry, saved *entry) ([]edit, error)
	// check verifies that after (the entry re-read from the edited file)
	// is what attach or restore meant to write.
	check(after *entry, attached bool, opts *AttachOptions) error
}

var routes = map[Transport]route{Stdio: wrapRoute{}, HTTP: recorderRoute{}}

// recorderRoute sends an HTTP server through a route of a running
// recorder: its url becomes the route's URL.
type recorderRoute struct{}

func (recorderRoute) attach(c *config, e *entry, opts *AttachOptions) ([]edit, error) {
	if e.url == nil || e.url.val.kind != kindString || e.URL == "" {
		return nil, errors.New(`its "url" is not a string`)
	}
	to, err := opts.Route(e.Name, e.URL)
	if err != nil {
		return nil, err
	}
	return []edit{{e.url.val.start, e.url.val.end, quote(to)}}, nil
}

func (recorderRoute) restore(c *config, e *entry, saved *entry) ([]edit, error) {
	if saved == nil || saved.url == nil || e.url == nil {
		return nil, errors.New("its saved copy is gone (the state file beside the config), so mcptape does not know the server's own url: put it back by hand")
	}
	return []edit{{e.url.val.start, e.url.val.end, savedText(saved, saved.url)}}, nil
}

func (recorderRoute) check(after *entry, attached bool, opts *AttachOptions) error {
	if after.Transport != HTTP || after.Problem != "" {
		return errors.New("the entry does not read back as an HTTP server")
	}
	return nil
}

// routed reports whether an HTTP entry goes through a recorder's route:
// its url is the one attach put there.
func routed(e *entry, st *state) bool {
	saved, ok := st.Entries[e.pointer]
	return e.Transport == HTTP && ok && saved.Routed != "" && e.URL == saved.Routed
}

// wrapRoute sends a stdio server through `mcptape wrap`.
type wrapRoute struct{}

func wrapArgs(e *entry, opts *AttachOptions) []string {
	args := []string{"wrap", "--name", e.Name}
	if opts.Data != "" {
		args = append(args, "--data", opts.Data)
	}
	args = append(args, "--", e.Command)
	return append(args, e.Args...)
}

func (wrapRoute) attach(c *config, e *entry, opts *AttachOptions) ([]edit, error) {
	switch {
	case opts.Executable == "" && opts.ExecutableError != nil:
		return nil, opts.ExecutableError
	case opts.Executable == "":
		return nil, errors.New("attach needs the path of the mcptape executable")
	case !isMcptape(opts.Executable):
		// Detach and clients tell an attached entry by its command's name.
		return nil, fmt.Errorf("the mcptape executable %s must have \"mcptape\" in its file name; rename it", opts.Executable)
	}
	return []edit{
		{e.command.val.start, e.command.val.end, quote(opts.Executable)},
		setArray(c.data, e.obj(), e.args, e.command, "args", wrapArgs(e, opts)),
	}, nil
}

func (wrapRoute) restore(c *config, e *entry, saved *entry) ([]edit, error) {
	w := e.Wrapped
	if saved != nil && saved.Transport == Stdio && saved.Command == w.Command && slices.Equal(saved.Args, w.Args) {
		// The server's own command line is as it was: put back its text.
		edits := []edit{{e.command.val.start, e.command.val.end, savedText(saved, saved.command)}}
		if saved.args != nil {
			edits = append(edits, edit{e.args.val.start, e.args.val.end, savedText(saved, saved.args)})
		} else {
			edits = append(edits, removeMember(e.obj(), e.args))
		}
		return edits, nil
	}
	edits := []edit{{e.command.val.start, e.command.val.end, quote(w.Command)}}
	if len(w.Args) == 0 && (saved == nil || saved.args == nil) {
		return append(edits, removeMember(e.obj(), e.args)), nil
	}
	return append(edits, setArray(c.data, e.obj(), e.args, e.command, "args", w.Args)), nil
}

// savedText is the text of member m's value in a saved entry.
func savedText(saved *entry, m *member) []byte {
	return []byte(saved.src[m.val.start:m.val.end])
}

func (wrapRoute) check(after *entry, attached bool, opts *AttachOptions) error {
	if attached {
		if after.Wrapped == nil || after.Command != opts.Executable {
			return errors.New("the entry does not read back as attached")
		}
		return nil
	}
	if after.Wrapped != nil || after.Problem != "" {
		return errors.New("the entry does not read back as detached")
	}
	return nil
}

// Servers lists the servers of loc. A missing file is an error that wraps
// fs.ErrNotExist; a file without servers has none.
func Servers(loc Location) ([]Server, error) {
	c, err := load(loc.Path, loc.Client.jsonc())
	if err != nil {
		return nil, err
	}
	es, err := c.entries(loc)
	if err != nil {
		return nil, err
	}
	var st *state
	out := make([]Server, len(es))
	for i, e := range es {
		out[i] = e.Server
		if e.Transport != HTTP {
			continue
		}
		if st == nil {
			if st, err = readState(StatePath(loc.Path)); err != nil {
				st = &state{Entries: map[string]savedEntry{}} // listing does not need it
			}
		}
		if routed(e, st) {
			out[i].Upstream = st.Entries[e.pointer].Upstream
		}
	}
	return out, nil
}

// Find returns those of locs (in their order) whose file defines a server
// named name; an *UnknownServerError when none does. Missing files are
// passed over; a file that cannot be read is an error.
func Find(locs []Location, name string) ([]Location, error) {
	var found []Location
	unknown := &UnknownServerError{Name: name}
	for _, loc := range locs {
		unknown.Client = loc.Client
		unknown.Looked = append(unknown.Looked, loc.Path)
		servers, err := Servers(loc)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		k := KnownServers{Location: loc}
		for _, s := range servers {
			if s.Name == name {
				found = append(found, loc)
			}
			k.Names = append(k.Names, s.Name)
		}
		unknown.Known = append(unknown.Known, k)
	}
	if len(found) == 0 {
		return nil, unknown
	}
	return found, nil
}

// attachAt attaches the named servers of loc, or all of them.
func attachAt(loc Location, names []string, opts *AttachOptions) (*Report, error) {
	return change(loc, names, func(c *config, e *entry, st *state) (Action, []edit, error) {
		if e.Attached() || routed(e, st) {
			return AlreadyAttached, nil, nil
		}
		r := routes[e.Transport]
		if e.Problem != "" || r == nil || e.Transport == HTTP && opts.Route == nil {
			return Skipped, nil, nil
		}
		edits, err := r.attach(c, e, opts)
		if err != nil && e.Transport == HTTP {
			// The recorder cannot take it: say why, attach the rest.
			return Skipped, nil, &skipError{err}
		}
		if err != nil {
			return 0, nil, err
		}
		return Attached, edits, nil
	}, opts)
}

// detachAt detaches the named servers of loc, or all of them.
func detachAt(loc Location, names []string) (*Report, error) {
	return change(loc, names, func(c *config, e *entry, st *state) (Action, []edit, error) {
		if !e.Attached() && !routed(e, st) {
			return NotAttached, nil, nil
		}
		r := routes[e.Transport]
		saved, ok := st.Entries[e.pointer]
		text := string(c.data[e.obj().start:e.obj().end])
		if ok && text == saved.Attached {
			return Detached, []edit{{e.obj().start, e.obj().end, []byte(saved.Original)}}, nil
		}
		var savedEntry *entry
		action := DetachedFromArgs
		if ok {
			if se, err := parseEntry(e.Name, saved.Original, c.jsonc); err == nil {
				savedEntry, action = se, DetachedKeptEdits
			}
		}
		edits, err := r.restore(c, e, savedEntry)
		return action, edits, err
	}, nil)
}

// parseEntry reads an entry's saved text on its own.
func parseEntry(name, src string, jsonc bool) (*entry, error) {
	v, err := parseJSON([]byte(src), jsonc)
	if err != nil {
		return nil, err
	}
	c := &config{data: []byte(src), jsonc: jsonc}
	e := c.readEntry(&member{key: name, val: v}, "")
	e.src = src
	return e, nil
}

// NoConfigError is a client none of whose config files exists.
type NoConfigError struct {
	Client Client
	Looked []string
}

func (e *NoConfigError) Error() string {
	return fmt.Sprintf("no %s config found (looked for %s); add a server in %s first, or name its config file with --config", e.Client.Title(), strings.Join(slices.Compact(e.Looked), ", "), e.Client.Title())
}

// Attach routes servers of a client through `mcptape wrap`, rewriting only
// their entries' "command" and "args"; every other byte of the files stays
// as it was. locs are the client's Locations, highest precedence first (from
// Locations or LocationsIn). A named server is attached where the client
// takes it from: the first Location that defines it (the others are listed
// in Result.Shadowed and left alone). With no names, every server of every
// existing Location is attached. An entry attached already is left alone,
// so attaching twice is attaching once; servers that cannot be wrapped are
// Skipped with a Reason. An unknown name is an *UnknownServerError, and
// nothing is changed.
//
// Before the first change mcptape ever makes to a file it copies the file
// to BackupPath; before each attach it saves the entry's text in the
// file's StatePath, so that Detach can put it back byte for byte.
func Attach(locs []Location, names []string, opts *AttachOptions) ([]*Report, error) {
	if opts == nil {
		opts = &AttachOptions{}
	}
	return each(locs, names, false, func(loc Location, names []string) (*Report, error) {
		return attachAt(loc, names, opts)
	})
}

// Detach puts servers of a client back as they were before Attach: byte
// for byte from the saved entry when the entry is as Attach left it, else
// (the entry was edited while attached, or the saved copy is gone) by
// putting back only its command and args. A named server is detached in
// every Location where it is attached; with no names, every attached server
// of every existing Location is. A server that is not attached is left
// alone (NotAttached).
func Detach(locs []Location, names []string) ([]*Report, error) {
	return each(locs, names, true, detachAt)
}

// each runs op on the Locations concerned, names grouped by Location.
func each(locs []Location, names []string, attachedOnly bool, op func(Location, []string) (*Report, error)) ([]*Report, error) {
	type job struct {
		loc      Location
		names    []string
		shadowed map[string][]Location
	}
	var jobs []*job
	jobFor := func(loc Location) *job {
		for _, j := range jobs {
			if j.loc == loc {
				return j
			}
		}
		j := &job{loc: loc, shadowed: map[string][]Location{}}
		jobs = append(jobs, j)
		return j
	}
	if len(names) == 0 {
		var looked []string
		for _, loc := range locs {
			looked = append(looked, loc.Path)
			if _, err := Servers(loc); errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				return nil, err
			}
			jobFor(loc)
		}
		if len(jobs) == 0 && len(locs) > 0 {
			return nil, &NoConfigError{Client: locs[0].Client, Looked: looked}
		}
	}
	// Resolve every name before changing anything.
	for _, name := range slices.Compact(slices.Clone(names)) {
		found, err := Find(locs, name)
		if err != nil {
			return nil, err
		}
		targets := found[:1]
		if attachedOnly {
			targets = nil
			for _, loc := range found {
				if s, _ := Servers(loc); slices.ContainsFunc(s, func(s Server) bool { return s.Name == name && s.Attached() }) {
					targets = append(targets, loc)
				}
			}
			if len(targets) == 0 {
				targets = found[:1]
			}
		}
		for _, loc := range targets {
			j := jobFor(loc)
			j.names = append(j.names, name)
			if !attachedOnly {
				j.shadowed[name] = found[1:]
			}
		}
	}
	var reps []*Report
	for _, j := range jobs {
		rep, err := op(j.loc, j.names)
		if rep != nil {
			for i := range rep.Results {
				rep.Results[i].Shadowed = j.shadowed[rep.Results[i].Name]
			}
			reps = append(reps, rep)
		}
		if err != nil {
			return reps, err
		}
	}
	return reps, nil
}

// decide says what to do with one entry.
type decide func(c *config, e *entry, st *state) (Action, []edit, error)

// change applies decide to the chosen entries of loc and writes the file
// when anything changed, checking that the result reads back as meant.
func change(loc Location, names []string, d decide, opts *AttachOptions) (*Report, error) {
	c, err := load(loc.Path, loc.Client.jsonc())
	if err != nil {
		return nil, err
	}
	all, err := c.entries(loc)
	if err != nil {
		return nil, err
	}
	chosen := all
	if len(names) > 0 {
		chosen = nil
		for _, n := range names {
			i := slices.IndexFunc(all, func(e *entry) bool { return e.Name == n })
			if i < 0 {
				k := KnownServers{Location: loc}
				for _, e := range all {
					k.Names = append(k.Names, e.Name)
				}
				return nil, &UnknownServerError{Client: loc.Client, Name: n, Known: []KnownServers{k}}
			}
			chosen = append(chosen, all[i])
		}
	}
	st, err := readState(StatePath(loc.Path))
	if err != nil {
		return nil, err
	}
	rep := &Report{Location: loc}
	var edits []edit
	touched := map[string]Action{}
	for _, e := range chosen {
		if _, dup := touched[e.pointer]; dup {
			continue
		}
		action, es, err := d(c, e, st)
		var skip *skipError
		if errors.As(err, &skip) {
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: server %q: %w", c.path, e.Name, err)
		}
		res := Result{Name: e.Name, Action: action, Server: e.Server}
		switch {
		case action == Skipped && skip != nil:
			res.Reason = skip.err
		case action == Skipped:
			res.Reason = skipReason(e)
		}
		rep.Results = append(rep.Results, res)
		touched[e.pointer] = action
		edits = append(edits, es...)
	}
	if len(edits) == 0 {
		return rep, nil
	}
	out := apply(c.data, edits)
	after, err := parseConfig(c.path, out, c.mode, c.jsonc)
	if err != nil {
		if ce, ok := err.(*ConfigError); ok && ce.Syntax != nil {
			err = ce.Syntax
		}
		return nil, fmt.Errorf("%s: mcptape's edit would not be valid JSON (%v), so nothing was changed; this is a bug in mcptape, please report it", c.path, err)
	}
	if err := verify(c, after, loc, touched, opts); err != nil {
		return nil, fmt.Errorf("%s: mcptape's edit failed its own check (%v), so nothing was changed; this is a bug in mcptape, please report it", c.path, err)
	}
	// Save the entries' text before the file changes, forget it after.
	newEntries, _ := after.entries(loc)
	for _, ne := range newEntries {
		switch touched[ne.pointer] {
		case Attached:
			for _, oe := range all {
				if oe.pointer == ne.pointer {
					st.Entries[ne.pointer] = savedEntry{
						Original: string(c.data[oe.obj().start:oe.obj().end]),
						Attached: string(out[ne.obj().start:ne.obj().end]),
					}
					if ne.Transport == HTTP {
						se := st.Entries[ne.pointer]
						se.Routed, se.Upstream = ne.URL, oe.URL
						st.Entries[ne.pointer] = se
					}
				}
			}
		case Detached, DetachedKeptEdits, DetachedFromArgs:
			delete(st.Entries, ne.pointer)
		}
	}
	if rep.Backup, err = backup(c); err != nil {
		return nil, err
	}
	attaching := slices.ContainsFunc(rep.Results, func(r Result) bool { return r.Action == Attached })
	if attaching {
		if err := st.write(); err != nil {
			return nil, err
		}
	}
	if err := replace(c, out); err != nil {
		return nil, err
	}
	if !attaching {
		if err := st.write(); err != nil {
			return rep, fmt.Errorf("the config was restored, but %w", err)
		}
	}
	return rep, nil
}

// skipError carries why a server is Skipped from a decide function.
type skipError struct{ err error }

func (e *skipError) Error() string { return e.err.Error() }

func skipReason(e *entry) error {
	if e.Problem != "" {
		return errors.New(e.Problem)
	}
	if e.Transport == HTTP {
		return ErrHTTPServer
	}
	return fmt.Errorf("mcptape cannot route a %s server", e.Transport)
}

// verify checks the edited file: the changed entries read back as meant,
// and every byte outside them is as it was.
func verify(before, after *config, loc Location, touched map[string]Action, opts *AttachOptions) error {
	old, err := before.entries(loc)
	if err != nil {
		return err
	}
	now, err := after.entries(loc)
	if err != nil {
		return err
	}
	if len(old) != len(now) {
		return errors.New("the edit changed the number of servers")
	}
	// Walk the file's entries in order: the bytes between changed
	// entries must be identical.
	bi, ai := 0, 0
	for i := range old {
		o, n := old[i], now[i]
		if o.pointer != n.pointer {
			return errors.New("the edit changed the servers' names or order")
		}
		action := touched[o.pointer]
		if !action.Changed() {
			continue
		}
		if !bytes.Equal(before.data[bi:o.obj().start], after.data[ai:n.obj().start]) {
			return errors.New("the edit changed text outside the entries it meant to change")
		}
		bi, ai = o.obj().end, n.obj().end
		if err := routes[o.Transport].check(n, action == Attached, opts); err != nil {
			return fmt.Errorf("server %q: %v", o.Name, err)
		}
	}
	if !bytes.Equal(before.data[bi:], after.data[ai:]) {
		return errors.New("the edit changed text outside the entries it meant to change")
	}
	return nil
}
