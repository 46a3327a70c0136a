package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcptape/mcptape/replay"
)

const checkUsage = "[--data DIR] [SESSION | --tape FILE]... [--fail-on error,unanswered,lost,finding:KIND] [--junit FILE] [--sarif FILE]"

// runCheck is `mcptape check`: is a recording healthy? Exit 0 when it is,
// 1 when not (or it cannot be read), 2 for a wrong command line.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store the SESSIONs are in")
	var tapes stringList
	fs.Var(&tapes, "tape", "check the sessions of this tape `FILE` (repeatable; mixes with SESSIONs)")
	failOn := fs.String("fail-on", strings.Join(replay.DefaultFailOn, ","),
		"what makes a recording unhealthy, comma-separated: error (JSON-RPC errors, isError results), unanswered, lost (messages not recorded), finding:KIND (a finding kind, e.g. finding:schema, or finding:* for every finding)")
	junit := fs.String("junit", "", "also write a JUnit XML report to `FILE`: a test case per call")
	sarif := fs.String("sarif", "", "also write the problems as SARIF 2.1.0 to `FILE`, for a code-scanning tab")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a line per problem")
	verbose := fs.Bool("v", false, "also list the findings that do not fail the check")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	rules, err := replay.ParseFailOn(*failOn)
	if err != nil {
		return usagef("--fail-on: %v", err)
	}
	recs, closeStore, err := recordingsOf(ctx, *data, fs.Args(), tapes)
	if err != nil {
		return err
	}
	defer closeStore()
	rep, err := replay.Check(ctx, &replay.CheckOptions{FailOn: rules}, recs...)
	if err != nil {
		return err
	}
	if *junit != "" {
		if err := writeReport(*junit, rep.WriteJUnit); err != nil {
			return fmt.Errorf("--junit: %w", err)
		}
	}
	if *sarif != "" {
		if err := writeReport(*sarif, func(w io.Writer) error { return rep.WriteSARIF(w, version) }); err != nil {
			return fmt.Errorf("--sarif: %w", err)
		}
	}
	if *asJSON {
		enc := newJSONLines(stdout)
		enc.indent = "  "
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(stdout, *verbose)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return exitCode(exitError)
	}
	return nil
}

// recordingsOf is what check reads: each SESSION (an id or a
// unique prefix) of the store in data, each tape; with neither, every
// session of the store. close releases the store, if one was opened.
func recordingsOf(ctx context.Context, data string, sessions, tapes []string) (recs []replay.Recording, close func(), err error) {
	close = func() {}
	for _, t := range tapes {
		recs = append(recs, replay.TapeRecording(t))
	}
	if len(sessions) == 0 && len(tapes) > 0 {
		return recs, close, nil
	}
	store, err := openRead(ctx, data)
	if err != nil {
		return nil, close, err
	}
	close = func() { store.Close() }
	var ids []string
	for _, a := range sessions {
		s, err := findSession(ctx, store, a)
		if err != nil {
			close()
			return nil, func() {}, err
		}
		ids = append(ids, s.ID)
	}
	return append(recs, replay.StoreRecording(store, ids...)), close, nil
}

// writeReport writes a report file through write, atomically: a failed
// write leaves no half file under the name.
func writeReport(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	werr := write(tmp)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}
