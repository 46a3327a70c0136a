package replay

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText writes the report for people: each call that differed, with
// its differences (path, recorded, live) or its error, then a summary per
// session and one in all. verbose lists the matching calls too.
func (r *ClientReport) WriteText(w io.Writer, verbose bool) error {
	ew := &errWriter{w: w}
	var ok, differ, failed, calls int
	for _, s := range r.Sessions {
		ew.printf("session %s (%s %s) against %s\n", s.ID, s.Era, s.Version, s.Endpoint)
		if s.Skipped != "" {
			ew.printf("  skipped: %s\n", oneLine(s.Skipped))
			continue
		}
		if s.Err != "" {
			ew.printf("  ERROR  %s\n", oneLine(s.Err))
		}
		for _, c := range s.Calls {
			switch {
			case c.Err != "":
				ew.printf("  ERROR  %s: %s\n", oneLine(c.Title()), oneLine(c.Err))
			case len(c.Diffs) > 0:
				ew.printf("  DIFF   %s (%d difference(s))\n", oneLine(c.Title()), len(c.Diffs))
				for _, d := range c.Diffs {
					ew.printf("         %s\n", oneLine(d.Path))
					ew.printf("           recorded: %s\n", clip(oneLine(d.Recorded), 160))
					ew.printf("           live:     %s\n", clip(oneLine(d.Live), 160))
				}
			case verbose:
				ew.printf("  ok     %s\n", oneLine(c.Title()))
			}
		}
		o, d, f := s.Counts()
		ok, differ, failed, calls = ok+o, differ+d, failed+f, calls+len(s.Calls)
		ew.printf("  %d call(s): %d ok, %d differ, %d failed, %s\n", len(s.Calls), o, d, f, s.Duration.Round(time.Millisecond))
	}
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	ew.printf("%s: %d session(s), %d call(s): %d ok, %d differ, %d failed (%s)\n", verdict, len(r.Sessions), calls, ok, differ, failed,
		r.Duration.Round(time.Millisecond))
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, a ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, a...)
	}
}

// oneLine makes recorded or live text safe for one terminal line: it is
// hostile, so control characters never reach the terminal.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
}

// JUnit XML, as CI systems read it (the Jenkins/Ant schema).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemErr  string          `xml:"system-err,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// WriteJUnit writes the report as JUnit XML: one testsuite per tape
// session, one testcase per replayed call, a failure (with the
// differences) for a call that differed and an error for one that could
// not be completed. A session that could not be replayed at all is one
// testcase with an error.
func (r *ClientReport) WriteJUnit(w io.Writer) error {
	out := junitSuites{Name: "mcptape replay client " + r.Target, Time: seconds(r.Duration)}
	for _, s := range r.Sessions {
		suite := junitSuite{Name: fmt.Sprintf("%s (%s %s)", s.ID, s.Era, s.Version), Time: seconds(s.Duration),
			Properties: []junitProperty{{"endpoint", s.Endpoint}, {"session", s.ID}, {"era", s.Era.String()}, {"version", s.Version}}}
		class := "mcptape.replay." + s.ID
		if s.Skipped != "" {
			suite.Cases = append(suite.Cases, junitCase{Name: "session", Classname: class, Time: "0",
				Skipped: &junitProblem{Message: xmlSafe(s.Skipped), Type: "skipped"}})
			suite.Skipped++
		}
		if s.Err != "" {
			suite.Cases = append(suite.Cases, junitCase{Name: "session", Classname: class, Time: "0",
				Error: &junitProblem{Message: xmlSafe(clip(s.Err, 200)), Type: "replay", Text: xmlSafe(s.Err)}})
			suite.Errors++
		}
		for _, c := range s.Calls {
			tc := junitCase{Name: xmlSafe(c.Title()), Classname: class, Time: seconds(c.Duration)}
			switch {
			case c.Err != "":
				tc.Error = &junitProblem{Message: xmlSafe(clip(c.Err, 200)), Type: "replay", Text: xmlSafe(c.Err)}
				suite.Errors++
			case len(c.Diffs) > 0:
				var b strings.Builder
				for _, d := range c.Diffs {
					fmt.Fprintf(&b, "%s\n  recorded: %s\n  live:     %s\n", d.Path, d.Recorded, d.Live)
				}
				tc.Failure = &junitProblem{Message: xmlSafe(fmt.Sprintf("%d difference(s) from the recording, first at %s", len(c.Diffs), c.Diffs[0].Path)),
					Type: "difference", Text: xmlSafe(b.String())}
				suite.Failures++
			}
			suite.Cases = append(suite.Cases, tc)
		}
		suite.Tests = len(suite.Cases)
		out.Tests += suite.Tests
		out.Failures += suite.Failures
		out.Errors += suite.Errors
		out.Suites = append(out.Suites, suite)
	}
	return writeJUnitXML(w, out)
}

// writeJUnitXML writes a JUnit document, with its XML header.
func writeJUnitXML(w io.Writer, out junitSuites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// xmlSafe drops what XML 1.0 cannot hold at all (most control
// characters); encoding/xml escapes the rest.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0xFFFE || r == 0xFFFF {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}
