package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

const baselineUsage = "accept|show|reset [--data DIR] [UPSTREAM | ROUTE | stdio NAME]..."

// runBaseline is `mcptape baseline`: the tools each upstream is trusted to
// offer. A recorder marks a tools/list that differs from its upstream's
// baseline with drift findings.
func runBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("say what to do: `mcptape baseline accept` (trust the tools each upstream lists now), `show` or `reset`")
	}
	if isHelp(args[0]) {
		return groupHelp(stderr, "baseline", "accept", "show", "reset")
	}
	switch args[0] {
	case "accept":
		return baselineAccept(ctx, args[1:], stdout, stderr)
	case "show":
		return baselineShow(args[1:], stdout, stderr)
	case "reset":
		return baselineReset(args[1:], stdout, stderr)
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q%s", args[0], didYouMean(args[0], "accept", "show", "reset"))}
}

// upstreamArgs joins `stdio NAME` into stdio:NAME.
func upstreamArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "stdio" && i+1 < len(args) {
			out = append(out, "stdio:"+args[i+1])
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// toolListing is the latest complete tools/list of one upstream.
type toolListing struct {
	session *capture.Session
	at      time.Time
	tools   json.RawMessage
}

func baselineAccept(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("baseline accept", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store (and of the baselines)")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	store, err := openRead(ctx, *data)
	if err != nil {
		return err
	}
	defer store.Close()
	latest, routes, err := latestToolLists(ctx, store)
	if err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(latest))
	if len(keys) == 0 {
		return fmt.Errorf("%s holds no tools/list answer to accept: record a client listing the server's tools first", *data)
	}
	want := keys
	if fs.NArg() > 0 {
		want = nil
		for _, a := range upstreamArgs(fs.Args()) {
			var found []string
			for _, k := range keys {
				if k == a || strings.TrimRight(latest[k].session.Upstream, "/") == strings.TrimRight(a, "/") || slices.Contains(routes[k], a) {
					found = append(found, k)
				}
			}
			if len(found) == 0 {
				return fmt.Errorf("no tools/list recorded from %q; upstreams that listed tools: %s", a, strings.Join(cleanAll(keys), ", "))
			}
			want = append(want, found...)
		}
		slices.Sort(want)
		want = slices.Compact(want)
	}
	now := time.Now().UTC()
	bf := capture.OpenBaselines(*data)
	err = bf.Update(func(m map[string]*capture.Baseline) error {
		for _, k := range want {
			l := latest[k]
			m[k] = &capture.Baseline{Upstream: k, Accepted: now, Session: l.session.ID, Server: l.session.Server, Tools: l.tools}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range want {
		l := latest[k]
		fmt.Fprintf(stdout, "accepted the %d tool(s) of %s, as session %s listed them at %s (server %s)\n", len(toolNames(l.tools)), clean(k),
			clean(l.session.ID), l.at.Local().Format(time.DateTime), dash(clean(l.session.Server.String())))
	}
	fmt.Fprintf(stdout, "a tools/list of these upstreams that differs is now marked with a drift finding, and fails `mcptape check`\n")
	return nil
}

// maxBaselineSessions bounds the sessions read for the latest tools
// lists, newest first.
const maxBaselineSessions = 2000

// latestToolLists finds the newest complete tools/list of each upstream
// (capture.BaselineKey), and the routes each was reached through.
func latestToolLists(ctx context.Context, store capture.Reader) (map[string]*toolListing, map[string][]string, error) {
	out := map[string]*toolListing{}
	routes := map[string][]string{}
	n := 0
	for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			return nil, nil, err
		}
		if n++; n > maxBaselineSessions {
			break
		}
		key := capture.BaselineKey(s)
		if s.Route != "" && s.Leg != capture.LegStdio && !slices.Contains(routes[key], s.Route) {
			routes[key] = append(routes[key], s.Route)
		}
		if prev := out[key]; prev != nil && !prev.session.End.Before(s.End) {
			continue
		}
		var results []uint64
		for m, err := range store.Messages(ctx, s.ID, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				return nil, nil, err
			}
			if m.Direction == protocol.ServerToClient && m.Kind == protocol.KindResult && m.Method == protocol.MethodToolsList {
				results = append(results, m.Seq)
			}
		}
		var pages, done []json.RawMessage
		var at time.Time
		for _, seq := range results {
			m, err := store.Message(ctx, seq)
			if err != nil {
				return nil, nil, err
			}
			var r struct {
				Tools      []json.RawMessage `json:"tools"`
				NextCursor string            `json:"nextCursor"`
			}
			if json.Unmarshal(protocol.Decode(m.Raw).Result, &r) != nil {
				continue
			}
			pages = append(pages, r.Tools...)
			if r.NextCursor == "" {
				done, pages, at = pages, nil, m.Time
			}
		}
		if done == nil {
			continue
		}
		tools, err := json.Marshal(done)
		if err != nil {
			return nil, nil, err
		}
		out[key] = &toolListing{session: s, at: at, tools: tools}
	}
	return out, routes, nil
}

func toolNames(tools json.RawMessage) []string {
	var ts []struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(tools, &ts)
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func cleanAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clean(s)
	}
	return out
}

func baselineShow(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("baseline show", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the baselines")
	asJSON := fs.Bool("json", false, "print the baselines as JSON, tools included")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	all, err := capture.OpenBaselines(*data).List()
	if err != nil {
		return err
	}
	want := upstreamArgs(fs.Args())
	var shown []*capture.Baseline
	for _, b := range all {
		if len(want) == 0 || slices.Contains(want, b.Upstream) {
			shown = append(shown, b)
		}
	}
	if len(want) > 0 && len(shown) < len(want) {
		return fmt.Errorf("no baseline for some of %s; baselines: %s", strings.Join(cleanAll(want), ", "), strings.Join(baselineKeys(all), ", "))
	}
	if *asJSON {
		enc := newJSONLines(stdout)
		enc.indent = "  "
		return enc.Encode(shown)
	}
	if len(shown) == 0 {
		fmt.Fprintln(stdout, "(no baselines: `mcptape baseline accept` trusts the tools each upstream lists now)")
	}
	for _, b := range shown {
		names := toolNames(b.Tools)
		fmt.Fprintf(stdout, "%s  accepted %s  from session %s (server %s)  %d tool(s): %s\n", clean(b.Upstream), b.Accepted.Local().Format(time.DateTime),
			dash(clean(b.Session)), dash(clean(b.Server.String())), len(names), clean(strings.Join(names, ", ")))
	}
	return nil
}

func baselineKeys(bs []*capture.Baseline) []string {
	var out []string
	for _, b := range bs {
		out = append(out, clean(b.Upstream))
	}
	if len(out) == 0 {
		return []string{"(none)"}
	}
	return out
}

func baselineReset(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("baseline reset", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the baselines")
	all := fs.Bool("all", false, "forget every baseline")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	want := upstreamArgs(fs.Args())
	if len(want) == 0 && !*all {
		return usagef("name the upstreams whose baseline to forget (as `mcptape baseline show` lists them), or --all")
	}
	var gone []string
	err := capture.OpenBaselines(*data).Update(func(m map[string]*capture.Baseline) error {
		if *all {
			gone = slices.Sorted(maps.Keys(m))
			clear(m)
			return nil
		}
		for _, k := range want {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("no baseline for %s; baselines: %s", clean(k), strings.Join(cleanAll(slices.Sorted(maps.Keys(m))), ", "))
			}
		}
		for _, k := range want {
			delete(m, k)
			gone = append(gone, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range gone {
		fmt.Fprintf(stdout, "forgot the baseline of %s\n", clean(k))
	}
	return nil
}
