package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/mcptape/mcptape/replay"
)

const diffUsage = "[--data DIR] [--ignore PATH]... [--ignore-in 'METHOD [NAME]=PATH']... [--json] A B"

// runDiff is `mcptape diff A B`: how two recordings differ. A and B are
// each a tape file or a session of the store (its id or a unique prefix).
// Exit 0 when they agree, 1 when they differ.
func runDiff(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("diff", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store the sessions are in")
	var ignore stringList
	fs.Var(&ignore, "ignore", "also leave this `PATH` out of the comparison of calls, e.g. result.content[0].text or params.arguments.when (repeatable); ids, _meta and timestamps are left out already")
	var ignoreIn stringList
	fs.Var(&ignoreIn, "ignore-in", "leave `CALL=PATH` out of the calls of one method and name only, e.g. 'tools/call toggle-subscriber-updates=result.content[0].text' (repeatable)")
	asJSON := fs.Bool("json", false, "print the comparison as JSON")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	in := map[string][]string{}
	for _, v := range ignoreIn {
		call, path, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(call) == "" {
			return usagef("--ignore-in %q: want CALL=PATH, e.g. 'tools/call get-time=result.content[0].text'", v)
		}
		call = strings.TrimSpace(call)
		in[call] = append(in[call], strings.TrimSpace(path))
	}
	if fs.NArg() != 2 {
		return usagef("name two recordings to compare: tape files, or sessions (an id from `mcptape ls`, or a unique prefix), in any mix")
	}
	var recs [2]replay.Recording
	var store openedStore
	for i, a := range fs.Args() {
		if isTapeFile(a) {
			recs[i] = replay.TapeRecording(a)
			continue
		}
		if store == nil {
			var err error
			if store, err = openRead(ctx, *data); err != nil {
				return err
			}
			defer store.Close()
		}
		s, err := findSession(ctx, store, a)
		if err != nil {
			return err
		}
		recs[i] = replay.StoreRecording(store, s.ID)
	}
	rep, err := replay.Diff(ctx, recs[0], recs[1], &replay.DiffOptions{Ignore: ignore, IgnoreIn: in})
	if errors.Is(err, replay.ErrBadIgnorePath) {
		return usagef("--ignore: %v", err)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := newJSONLines(stdout)
		enc.indent = "  "
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if rep.Differ() {
		return exitCode(exitError)
	}
	return nil
}

// isTapeFile reports whether a names a file (not a directory): a tape to
// read, where anything else is a session's id.
func isTapeFile(a string) bool {
	fi, err := os.Stat(a)
	return err == nil && fi.Mode().IsRegular()
}
