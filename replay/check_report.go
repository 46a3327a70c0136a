package replay

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText writes the check for people: a line per problem that fails
// the check — where (the tape file and line, or the session and message
// index), then what — and a verdict. verbose adds the problems that do
// not fail it, marked as notes.
func (r *CheckReport) WriteText(w io.Writer, verbose bool) error {
	ew := &errWriter{w: w}
	calls, failing := 0, 0
	for _, s := range r.Sessions {
		calls += len(s.Calls)
		if len(s.Failures()) > 0 {
			failing++
		}
		for _, p := range s.Problems {
			if !p.Fails && !verbose {
				continue
			}
			note := ""
			if !p.Fails {
				note = "note: "
			}
			ew.printf("%s: %s%s\n", oneLine(s.where(p)), note, oneLine(p.Text))
		}
	}
	if n := len(r.Failures()); n > 0 {
		ew.printf("FAIL: %d problem(s) in %d of %d session(s) (%d call(s) checked; failing on %s)\n", n, failing, len(r.Sessions), calls,
			strings.Join(r.FailOn, ","))
	} else {
		ew.printf("OK: %d session(s), %d call(s), nothing failing (checked for %s)\n", len(r.Sessions), calls, strings.Join(r.FailOn, ","))
	}
	return ew.err
}

// where names a problem's place: "bug.tape.json:41: session S, message 7",
// or "session S, message 7" for a store's session.
func (s *CheckedSession) where(p *Problem) string {
	var b strings.Builder
	if s.File != "" {
		b.WriteString(s.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	}
	b.WriteString("session " + s.Session.ID)
	if p.Index >= 0 {
		fmt.Fprintf(&b, ", message %d", p.Index)
	}
	return b.String()
}

// WriteJUnit writes the check as JUnit XML: one testsuite per session, one
// testcase per client call (its method and tool, its time, and a failure
// with the text of each problem that fails the check), and one testcase
// "session" more where the session itself fails (lost messages, findings
// outside any call).
func (r *CheckReport) WriteJUnit(w io.Writer) error {
	out := junitSuites{Name: "mcptape check"}
	var total time.Duration
	for _, s := range r.Sessions {
		x := s.Session
		suite := junitSuite{Name: fmt.Sprintf("%s (%s %s)", x.ID, x.Era, x.Version), Time: seconds(x.End.Sub(x.Start)),
			Properties: []junitProperty{{"session", x.ID}, {"client", x.Client.String()}, {"server", x.Server.String()}, {"recording", s.Recording}}}
		total += max(x.End.Sub(x.Start), 0)
		class := "mcptape.check." + x.ID
		for _, c := range s.Calls {
			tc := junitCase{Name: xmlSafe(c.Title()), Classname: xmlSafe(class), Time: seconds(c.Duration)}
			if f := failuresOf(c.Problems); len(f) > 0 {
				tc.Failure = junitFailure(s, f)
				suite.Failures++
			}
			suite.Cases = append(suite.Cases, tc)
		}
		var outside []*Problem
		for _, p := range s.Failures() {
			if p.Call == 0 {
				outside = append(outside, p)
			}
		}
		if len(outside) > 0 {
			suite.Cases = append(suite.Cases, junitCase{Name: "session", Classname: xmlSafe(class), Time: "0", Failure: junitFailure(s, outside)})
			suite.Failures++
		}
		suite.Tests = len(suite.Cases)
		out.Tests += suite.Tests
		out.Failures += suite.Failures
		out.Suites = append(out.Suites, suite)
	}
	out.Time = seconds(total)
	return writeJUnitXML(w, out)
}

func failuresOf(ps []*Problem) []*Problem {
	var out []*Problem
	for _, p := range ps {
		if p.Fails {
			out = append(out, p)
		}
	}
	return out
}

func junitFailure(s *CheckedSession, ps []*Problem) *junitProblem {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s: %s\n", s.where(p), p.Text)
	}
	msg := ps[0].Text
	if len(ps) > 1 {
		msg = fmt.Sprintf("%s (and %d more)", msg, len(ps)-1)
	}
	return &junitProblem{Message: xmlSafe(clip(msg, 300)), Type: ps[0].Rule, Text: xmlSafe(b.String())}
}
