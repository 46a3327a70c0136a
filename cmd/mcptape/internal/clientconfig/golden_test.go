package clientconfig_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/mcptape/mcptape/cmd/mcptape/internal/clientconfig"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The golden cases are testdata/edit/*.txtar. The archive's comment
// describes the case, then after a blank line holds directives, one a line:
//
//	client NAME       the client (required)
//	file NAME         the config's file name (default config.json)
//	dir PATH          the working directory, for Claude Code's local servers
//	exe PATH          the mcptape executable (default /opt/mcptape/bin/mcptape)
//	run OP            an operation; they run in order:
//	    attach NAME... [--data DIR]     attach --all [--data DIR] (DIR: the rest of the line)
//	    detach NAME...                  detach --all
//	    edit OLD => NEW        a user changes the file outside the attached entries
//	    edit-entry OLD => NEW  a user changes an attached entry itself
//	    lose-state             the state file is deleted
//
// The file "config" is the config before the first operation; for the Nth
// operation OP, "N OP" is the file after it and "N OP (report)" what it
// reported. In these files a carriage return is written ␍, and a file that
// does not end in a line break ends in ␄.
//
// Beyond the golden files, every case checks what a user relies on: a
// refused operation leaves the file as it was; an operation repeated
// changes nothing; whenever nothing is attached and no attached entry was
// edited, the file is byte for byte the original (with the user's other
// edits); the backup is the original and never changes; the config keeps
// its mode and the state file is private.
func TestGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "edit", "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			runGolden(t, path)
		})
	}
}

func encode(b []byte) string {
	s := strings.ReplaceAll(string(b), "\r", "␍")
	if !strings.HasSuffix(s, "\n") {
		s += "␄\n"
	}
	return s
}

func decode(s string) []byte {
	s = strings.TrimSuffix(s, "␄\n")
	return []byte(strings.ReplaceAll(s, "␍", "\r"))
}

func runGolden(t *testing.T, path string) {
	a, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		client clientconfig.Client
		file   = "config.json"
		dir    = "/work/proj"
		exe    = "/opt/mcptape/bin/mcptape"
		ops    []string
	)
	_, directives, ok := strings.Cut(string(a.Comment), "\n\n")
	if !ok {
		t.Fatalf("%s: the comment needs a description, a blank line, then directives", path)
	}
	for _, line := range strings.Split(strings.TrimRight(directives, "\n"), "\n") {
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "client":
			if client, err = clientconfig.ParseClient(rest); err != nil {
				t.Fatal(err)
			}
		case "file":
			file = rest
		case "dir":
			dir = rest
		case "exe":
			exe = rest
		case "run":
			ops = append(ops, rest)
		default:
			t.Fatalf("%s: unknown directive %q", path, line)
		}
	}
	var input []byte
	for _, f := range a.Files {
		if f.Name == "config" {
			input = decode(string(f.Data))
		}
	}
	if client == 0 || input == nil || len(ops) == 0 {
		t.Fatalf("%s needs a client, a config file and operations", path)
	}

	tmp := t.TempDir()
	cfg := filepath.Join(tmp, file)
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, input, 0o640); err != nil {
		t.Fatal(err)
	}
	locs := clientconfig.LocationsIn(client, cfg, &clientconfig.Env{Dir: dir, Home: "/home/u"})

	out := &txtar.Archive{Comment: a.Comment, Files: []txtar.File{{Name: "config", Data: []byte(encode(input))}}}
	want := slices.Clone(input)    // the original, with the user's other edits
	exact := !anyAttached(t, locs) // no attached entry was there or edited
	prev, prevOp := slices.Clone(input), ""
	var backup []byte
	for i, op := range ops {
		before := read(t, cfg)
		report, opErr := runOp(t, op, cfg, locs, exe, &want, &exact)
		after := read(t, cfg)
		report = strings.ReplaceAll(report, tmp, "$DIR")

		if opErr != nil && !bytes.Equal(before, after) {
			t.Errorf("%s: refused, but the file changed", op)
		}
		if op == prevOp && !bytes.Equal(prev, after) {
			t.Errorf("%s twice: the second time changed the file", op)
		}
		prev, prevOp = after, op
		if b, err := os.ReadFile(clientconfig.BackupPath(cfg)); err == nil {
			if backup == nil {
				backup = b
				if !bytes.Equal(b, input) {
					t.Errorf("%s: the backup is not the original config", op)
				}
			} else if !bytes.Equal(b, backup) {
				t.Errorf("%s: the backup was overwritten", op)
			}
		}
		if fi, err := os.Stat(cfg); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: the config's mode is %v, want 0640 (%v)", op, fi.Mode().Perm(), err)
		}
		if fi, err := os.Stat(clientconfig.StatePath(cfg)); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: the state file's mode is %v, want 0600", op, fi.Mode().Perm())
		}
		if exact && opErr == nil && !anyAttached(t, locs) && !bytes.Equal(after, want) {
			t.Errorf("%s: nothing is attached, but the file is not the original:\n%s", op, cmp.Diff(string(want), string(after)))
		}

		name := fmt.Sprintf("%d %s", i+1, op)
		out.Files = append(out.Files,
			txtar.File{Name: name, Data: []byte(encode(after))},
			txtar.File{Name: name + " (report)", Data: []byte(report)})
	}

	if *update {
		if err := os.WriteFile(path, txtar.Format(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := map[string]string{}
	for _, f := range out.Files {
		got[f.Name] = string(f.Data)
	}
	seen := map[string]bool{}
	for _, f := range a.Files {
		seen[f.Name] = true
		g, ok := got[f.Name]
		if !ok {
			t.Errorf("the golden file has %q, which the operations no longer produce (run with -update)", f.Name)
			continue
		}
		if d := cmp.Diff(string(f.Data), g); d != "" {
			t.Errorf("%q differs from the golden file (-want +got):\n%s", f.Name, d)
		}
	}
	for _, f := range out.Files {
		if !seen[f.Name] {
			t.Errorf("%q is not in the golden file (run with -update)", f.Name)
		}
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func anyAttached(t *testing.T, locs []clientconfig.Location) bool {
	for _, loc := range locs {
		servers, err := clientconfig.Servers(loc)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false // an invalid file: nothing to compare
		}
		for _, s := range servers {
			if s.Attached() {
				return true
			}
		}
	}
	return false
}

// runOp runs one operation and describes what it did.
func runOp(t *testing.T, op, cfg string, locs []clientconfig.Location, exe string, want *[]byte, exact *bool) (string, error) {
	t.Helper()
	fields := strings.Fields(op)
	switch fields[0] {
	case "edit", "edit-entry":
		from, to, ok := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(op, fields[0]), " "), " => ")
		if !ok {
			t.Fatalf("%q: want edit OLD => NEW", op)
		}
		from, to = strings.ReplaceAll(from, `\n`, "\n"), strings.ReplaceAll(to, `\n`, "\n")
		data := read(t, cfg)
		if bytes.Count(data, []byte(from)) != 1 {
			t.Fatalf("%q: the file has %q %d times, want once", op, from, bytes.Count(data, []byte(from)))
		}
		if err := os.WriteFile(cfg, bytes.Replace(data, []byte(from), []byte(to), 1), 0o640); err != nil {
			t.Fatal(err)
		}
		if fields[0] == "edit" {
			if bytes.Count(*want, []byte(from)) != 1 {
				t.Fatalf("%q: the original has %q %d times, want once", op, from, bytes.Count(*want, []byte(from)))
			}
			*want = bytes.Replace(*want, []byte(from), []byte(to), 1)
		} else {
			*exact = false
		}
		return "edited by hand\n", nil
	case "lose-state":
		if err := os.Remove(clientconfig.StatePath(cfg)); err != nil {
			t.Fatal(err)
		}
		return "state file deleted\n", nil
	}
	var names []string
	data := ""
	all := false
	for i := 1; i < len(fields); i++ {
		switch fields[i] {
		case "--all":
			all = true
		case "--data":
			// The rest of the line, spaces and all.
			data = strings.Join(fields[i+1:], " ")
			i = len(fields)
		default:
			names = append(names, fields[i])
		}
	}
	if all != (len(names) == 0) {
		t.Fatalf("%q: name servers or --all", op)
	}
	var reps []*clientconfig.Report
	var err error
	switch fields[0] {
	case "attach":
		reps, err = clientconfig.Attach(locs, names, &clientconfig.AttachOptions{Executable: exe, Data: data})
	case "detach":
		reps, err = clientconfig.Detach(locs, names)
	default:
		t.Fatalf("unknown operation %q", op)
	}
	var b strings.Builder
	for _, r := range reps {
		fmt.Fprintf(&b, "%s\n", r.Location)
		for _, res := range r.Results {
			fmt.Fprintf(&b, "  %s: %s", res.Name, res.Action)
			if res.Reason != nil {
				fmt.Fprintf(&b, ": %v", res.Reason)
			}
			for _, s := range res.Shadowed {
				fmt.Fprintf(&b, "; also in %s, left alone", s)
			}
			b.WriteString("\n")
		}
		if r.Backup != "" {
			fmt.Fprintf(&b, "  backup written: %s\n", r.Backup)
		}
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	return b.String(), err
}
