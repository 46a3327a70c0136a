package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

func runLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ls", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store")
	asJSON := fs.Bool("json", false, "one JSON object per session")
	limit := fs.Int("limit", 0, "show at most this many sessions (newest first); 0 means all")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	store, err := openRead(ctx, *data)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := listSessions(ctx, store, capture.SessionQuery{Limit: *limit}, *asJSON, stdout, firstSteps(*data)); err != nil {
		return err
	}
	if !*asJSON {
		printLost(ctx, stdout, *data, store)
	}
	return nil
}

// listSessions lists the sessions as a table (hint, if any, follows an
// empty one) or as JSON lines.
func listSessions(ctx context.Context, store capture.Reader, q capture.SessionQuery, asJSON bool, w io.Writer, hint string) error {
	if asJSON {
		enc := newJSONLines(w)
		for s, err := range store.Sessions(ctx, q) {
			if err != nil {
				return err
			}
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tVIA\tERA\tVERSION\tCLIENT\tSERVER\tSTART\tCALLS\tERRORS\tSTATUS")
	n := 0
	for s, err := range store.Sessions(ctx, q) {
		if err != nil {
			return err
		}
		n++
		status := s.Status.String()
		if s.Findings > 0 {
			status += fmt.Sprintf(" (%d findings)", s.Findings)
		}
		if s.Lost > 0 {
			status += fmt.Sprintf(" (%d lost)", s.Lost)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", clean(s.ID), via(s), eraName(s.Era, s.Opening), dash(clean(s.Version)),
			dash(clean(s.Client.String())), dash(clean(s.Server.String())), s.Start.Local().Format("2006-01-02 15:04:05"),
			s.Calls, s.Errors, status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintln(w, "(no sessions recorded yet)")
		if hint != "" {
			fmt.Fprintln(w, hint)
		}
	}
	return nil
}

// via says how a session's traffic reached mcptape: the leg, and the route
// or wrapped server's name ("reverse", "reverse:github", "stdio:weather").
func via(s *capture.Session) string {
	v := s.Leg.String()
	if s.Route != "" {
		v += ":" + clean(s.Route)
	}
	return v
}

func eraName(e protocol.Era, opening string) string {
	if opening == "http" {
		return "http"
	}
	return e.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("show", stderr)
	data := fs.String("data", defaultDataDir(), "directory of the capture store")
	asJSON := fs.Bool("json", false, "one JSON object per message, the raw message included")
	tree := fs.Bool("tree", false, "show the causal tree: calls and what each set off")
	if err := parse(fs, interleave(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("name one session (its id from `mcptape ls`, or a unique prefix of it)")
	}
	// Past damage: what can be read is shown, then the damage named.
	store, err := openTolerant(ctx, *data)
	if err != nil {
		return err
	}
	defer store.Close()
	s, err := findSession(ctx, store, fs.Arg(0))
	if err != nil {
		return err
	}
	if *tree {
		t, err := capture.SessionTree(ctx, store, s.ID)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := newJSONLines(stdout)
			enc.indent = "  "
			if err := enc.Encode(t); err != nil {
				return err
			}
			return store.err()
		}
		sessionHeader(stdout, s)
		t.WriteText(stdout, nil)
		return store.err()
	}
	if err := showSession(ctx, store, s, *asJSON, stdout); err != nil {
		return err
	}
	return store.err()
}

// interleave moves flags after positional arguments to the front, so
// `show ID --json` works like `show --json ID`.
func interleave(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && i+1 < len(args) && takesValue(a) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func takesValue(flag string) bool {
	switch strings.TrimLeft(flag, "-") {
	case "data", "o", "config", "tape", "fail-on", "junit", "sarif", "ignore", "ignore-in", "format":
		return true
	}
	return false
}

func findSession(ctx context.Context, store capture.Reader, id string) (*capture.Session, error) {
	s, err := store.Session(ctx, id)
	if err == nil {
		return s, nil
	}
	var matches []*capture.Session
	for s, err := range store.Sessions(ctx, capture.SessionQuery{}) {
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(s.ID, id) {
			matches = append(matches, s)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return nil, fmt.Errorf("no session %q; `mcptape ls` lists them", id)
	}
	ids := make([]string, 0, len(matches))
	for _, m := range matches {
		ids = append(ids, clean(m.ID))
	}
	return nil, fmt.Errorf("%q matches %d sessions (%s); give more of the id", id, len(matches), strings.Join(ids, ", "))
}

// shownMessage is the JSON form of one message in `show --json` and
// `export --format jsonl`.
type shownMessage struct {
	// Session is the message's session (export, of several sessions).
	Session  string            `json:"session,omitempty"`
	Seq      uint64            `json:"seq"`
	Offset   float64           `json:"offset"` // seconds since the session's start
	Time     time.Time         `json:"time"`
	Dir      string            `json:"dir"`
	Kind     string            `json:"kind"`
	Method   string            `json:"method,omitempty"`
	Name     string            `json:"name,omitempty"`
	ID       json.RawMessage   `json:"id,omitempty"`
	Size     int               `json:"size"`
	Exchange uint64            `json:"exchange"`
	SSE      *capture.SSEInfo  `json:"sse,omitempty"`
	Links    capture.Links     `json:"links,omitzero"`
	Findings []capture.Finding `json:"findings,omitempty"`
	// Raw is the message itself when it is JSON; RawText holds a frame
	// that is not.
	Raw     json.RawMessage `json:"raw,omitempty"`
	RawText string          `json:"rawText,omitempty"`
}

func showSession(ctx context.Context, store capture.Reader, s *capture.Session, asJSON bool, w io.Writer) error {
	if asJSON {
		enc := newJSONLines(w)
		for m, err := range store.Messages(ctx, s.ID, capture.MessageQuery{}) {
			if err != nil {
				return err
			}
			if err := enc.Encode(shownOf(s, m)); err != nil {
				return err
			}
		}
		return nil
	}
	sessionHeader(w, s)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OFFSET\tDIR\tKIND\tMETHOD\tID\tSIZE\tNOTES")
	for m, err := range store.Messages(ctx, s.ID, capture.MessageQuery{NoRaw: true}) {
		if err != nil {
			return err
		}
		method := m.Method
		if m.Name != "" {
			method += " " + m.Name
		}
		var notes []string
		if m.Kind == protocol.KindFrame && m.SSE != nil {
			notes = append(notes, "sse "+frameNote(m))
		}
		if m.Kind == protocol.KindStderr {
			notes = append(notes, stderrNote(ctx, store, m))
		}
		for _, f := range m.Findings {
			notes = append(notes, "! "+string(f.Kind)+": "+f.Message)
		}
		fmt.Fprintf(tw, "+%s\t%s\t%s\t%s\t%s\t%d\t%s\n", fmtOffset(m.Time.Sub(s.Start)), m.Direction.Arrow(), m.Kind,
			dash(clean(method)), dash(clean(string(m.ID))), m.Size, clean(strings.Join(notes, "; ")))
	}
	if c := s.Command; c != nil && c.Exit != "" {
		// How a stdio server ended, after what it said.
		fmt.Fprintf(tw, "+%s\t\texit\t-\t-\t-\t%s\n", fmtOffset(s.End.Sub(s.Start)), clean(c.Exit))
	}
	return tw.Flush()
}

// maxStderrNote bounds what a row of show quotes of a stderr line.
const maxStderrNote = 160

// stderrNote is what a stdio server wrote to stderr, quoted, for show's
// table (which lists messages without their bytes).
func stderrNote(ctx context.Context, store capture.Reader, m *capture.Message) string {
	full, err := store.Message(ctx, m.Seq)
	if err != nil {
		return "(the line cannot be read: " + err.Error() + ")"
	}
	text := string(full.Raw)
	if len(text) > maxStderrNote {
		text = text[:maxStderrNote]
		for len(text) > 0 && !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
		return strconv.Quote(text) + "…"
	}
	return strconv.Quote(text)
}

// shownOf is message m of session s as `show --json` prints it.
func shownOf(s *capture.Session, m *capture.Message) shownMessage {
	sm := shownMessage{
		Seq: m.Seq, Offset: m.Time.Sub(s.Start).Seconds(), Time: m.Time, Dir: m.Direction.String(),
		Kind: m.Kind.String(), Method: m.Method, Name: m.Name, ID: m.ID, Size: m.Size, Exchange: m.ExchangeID,
		SSE: m.SSE, Links: m.Links, Findings: m.Findings,
	}
	if m.Kind != protocol.KindInvalid && m.Kind != protocol.KindFrame && json.Valid(m.Raw) {
		sm.Raw = m.Raw
	} else {
		sm.RawText = string(m.Raw)
	}
	return sm
}

func frameNote(m *capture.Message) string {
	switch {
	case m.SSE.ID != "" && m.Size > 0:
		return "priming id " + m.SSE.ID
	case m.SSE.Type != "":
		return "event " + m.SSE.Type
	}
	return "comment/retry"
}

func fmtOffset(d time.Duration) string {
	return fmt.Sprintf("%.6fs", d.Seconds())
}

func sessionHeader(w io.Writer, s *capture.Session) {
	fmt.Fprintf(w, "session %s  via %s  %s %s  client %s  server %s  %s\n", clean(s.ID), via(s), eraName(s.Era, s.Opening), dash(clean(s.Version)),
		dash(clean(s.Client.String())), dash(clean(s.Server.String())), s.Status)
	if c := s.Command; c != nil {
		fmt.Fprintf(w, "command %s", clean(strings.Join(c.Args, " ")))
		if c.Dir != "" {
			fmt.Fprintf(w, "  in %s", clean(c.Dir))
		}
		if c.Exit != "" {
			fmt.Fprintf(w, "  (%s)", clean(c.Exit))
		}
		fmt.Fprintln(w)
	}
}
