package capture

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// TextOptions configures [Tree.WriteText]. The zero value prints local
// clock times and durations.
type TextOptions struct {
	// Location is the zone of the clock times; nil means time.Local.
	Location *time.Location
	// NoTimes leaves out clock times, durations and offsets, so that two
	// recordings of the same traffic print the same (golden tests).
	NoTimes bool
}

// WriteText prints the tree the way the MCP Inspector's history view
// sketches it: a line per call with its time, status and duration, what it
// set off nested under it with offsets from its start, results and
// findings beneath. Recorded text has its control characters replaced.
func (t *Tree) WriteText(w io.Writer, opts *TextOptions) {
	p := &treePrinter{w: w, loc: time.Local}
	if opts != nil {
		p.noTimes = opts.NoTimes
		if opts.Location != nil {
			p.loc = opts.Location
		}
	}
	p.print(t)
}

type treePrinter struct {
	w       io.Writer
	loc     *time.Location
	noTimes bool
}

func (p *treePrinter) print(t *Tree) {
	stderr := t.StderrLines
	// A stdio server's stderr lines go among the calls, in time order.
	upTo := func(at time.Time, all bool) {
		for len(stderr) > 0 && (all || stderr[0].Time.Before(at)) {
			fmt.Fprintln(p.w, clean("[2]"+p.clock(stderr[0].Time)+" stderr: "+stderr[0].Text))
			stderr = stderr[1:]
		}
	}
	defer func() {
		upTo(time.Time{}, true)
		if more := t.Stderr - len(t.StderrLines); more > 0 {
			fmt.Fprintf(p.w, "[2] (%d more stderr lines)\n", more)
		}
		if s := t.Session; s != nil && s.Command != nil && s.Command.Exit != "" {
			fmt.Fprintln(p.w, clean("[.] server process: "+s.Command.Exit))
		}
	}()
	for _, n := range t.Roots {
		upTo(n.Start, false)
		marker := "[>]"
		switch {
		case n.Kind == NodeNotification:
			marker = "[*]"
		case n.Kind == NodeOther:
			marker = "[!]"
		case n.Dir == protocol.ServerToClient:
			marker = "[<]"
		}
		line := marker + p.clock(n.Start) + " " + p.title(n)
		if n.Status != "" {
			line += " [" + n.Status + "]"
		}
		if n.Duration > 0 && !p.noTimes {
			line += " " + fmtDur(n.Duration)
		}
		fmt.Fprintln(p.w, clean(line))
		p.details(n, "    ", true)
		p.children(n, n.Start, " ")
	}
}

func (p *treePrinter) title(n *Node) string {
	s := n.Method
	if n.Name != "" {
		s += " " + n.Name
	}
	if n.Key != "" {
		s += " [" + n.Key + "]"
	}
	if n.Label != "" {
		s += " (" + n.Label + ")"
	}
	return s
}

func (p *treePrinter) details(n *Node, indent string, root bool) {
	if n.Summary != "" && n.Kind != NodeNotification {
		fmt.Fprintf(p.w, "%sresult: %s\n", indent, clean(n.Summary))
	}
	if n.Note != "" && root {
		fmt.Fprintf(p.w, "%snote: %s\n", indent, clean(n.Note))
	}
	for _, f := range n.Findings {
		if f.Kind == FindingRedacted {
			continue
		}
		fmt.Fprintf(p.w, "%s! %s: %s\n", indent, f.Kind, clean(f.Message))
	}
}

// children prints rounds and children; consecutive progress notifications
// fold into one line.
func (p *treePrinter) children(n *Node, parentStart time.Time, prefix string) {
	type entry struct {
		node  *Node
		text  string
		count int
	}
	var entries []entry
	for i, r := range n.Rounds {
		entries = append(entries, entry{node: r, text: fmt.Sprintf("round %d", i+1)})
	}
	for _, c := range n.Children {
		if c.Method == protocol.MethodProgress && len(entries) > 0 && entries[len(entries)-1].node.Method == protocol.MethodProgress {
			last := &entries[len(entries)-1]
			last.count++
			last.node = c
			continue
		}
		entries = append(entries, entry{node: c, count: 1})
	}
	for i, e := range entries {
		last := i == len(entries)-1
		branch, more := " +-- ", " |   "
		if last {
			more = "     "
		}
		c := e.node
		title := e.text
		if title == "" {
			title = p.title(c)
		}
		line := prefix + branch + strings.TrimPrefix(p.clock(c.Start)+" ", " ") + title
		switch {
		case c.Method == protocol.MethodProgress && e.count > 1:
			line += fmt.Sprintf(" x%d, last %s", e.count, c.Summary)
		case c.Kind == NodeNotification && c.Summary != "":
			line += " " + c.Summary
		}
		if c.Status != "" && c.Status != "success" {
			line += " [" + c.Status + "]"
		}
		if !p.noTimes {
			line += fmt.Sprintf(" [+%s]", fmtDur(c.Start.Sub(parentStart)))
		}
		fmt.Fprintln(p.w, clean(line))
		p.details(c, prefix+more+"  ", false)
		p.children(c, c.Start, prefix+more)
	}
}

// clock is " 15:04:05", or "" without times.
func (p *treePrinter) clock(t time.Time) string {
	if p.noTimes {
		return ""
	}
	return " " + t.In(p.loc).Format("15:04:05")
}

// clean is TerminalText.
func clean(s string) string { return TerminalText(s) }

// fmtDur is 850µs, 12ms, 2.5s.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Round(time.Millisecond).Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
