package main

import (
	"context"
	"io"
	"slices"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/replay"
)

// Export formats (export --format).
const (
	formatTape  = "tape"
	formatHAR   = "har"
	formatJSONL = "jsonl"
)

// exportAs writes the sessions named by ids (every session, oldest first,
// when none) of store to w as format: HAR 1.2 (a page per session, as the
// dashboard's download), or JSON Lines, one message per line as `show
// --json` prints it, with its session.
func exportAs(ctx context.Context, format string, store capture.Reader, ids []string, w io.Writer) (replay.ExportCounts, error) {
	var counts replay.ExportCounts
	var sessions []*capture.Session
	if len(ids) == 0 {
		for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
			if err != nil {
				return counts, err
			}
			sessions = append(sessions, s)
		}
		slices.Reverse(sessions)
	}
	for _, id := range ids {
		s, err := store.Session(ctx, id)
		if err != nil {
			return counts, err
		}
		sessions = append(sessions, s)
	}
	counts.Sessions = len(sessions)
	if format == formatHAR {
		for _, s := range sessions {
			counts.Messages += s.Messages
		}
		return counts, capture.WriteHAR(ctx, store, w, sessions, version)
	}
	enc := newJSONLines(w)
	for _, s := range sessions {
		for m, err := range store.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				return counts, err
			}
			sm := shownOf(s, m)
			sm.Session = s.ID
			if err := enc.Encode(sm); err != nil {
				return counts, err
			}
			counts.Messages++
		}
	}
	return counts, nil
}
