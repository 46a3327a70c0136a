package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// SARIF 2.1.0 (OASIS), as code-scanning tabs read it: one run, a rule per
// kind of problem (mcptape/error, mcptape/unanswered, mcptape/lost,
// mcptape/finding/KIND), a result per problem located at the tape file
// and the line of the message's record (and, logically, the session and
// the message's index).

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID               string      `json:"id"`
	Name             string      `json:"name"`
	ShortDescription sarifText   `json:"shortDescription"`
	FullDescription  sarifText   `json:"fullDescription"`
	Default          sarifConfig `json:"defaultConfiguration"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID     string          `json:"ruleId"`
	RuleIndex  int             `json:"ruleIndex"`
	Level      string          `json:"level"`
	Message    sarifText       `json:"message"`
	Locations  []sarifLocation `json:"locations"`
	Properties map[string]any  `json:"properties,omitempty"`
}

type sarifLocation struct {
	Physical *sarifPhysical `json:"physicalLocation,omitempty"`
	Logical  []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifPhysical struct {
	Artifact sarifArtifact `json:"artifactLocation"`
	Region   *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

type sarifLogical struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

// ruleInfo says what a rule looks for, for the SARIF rule's descriptions.
func ruleInfo(rule string) (name, short, full string) {
	switch rule {
	case RuleError:
		return "CallError", "A call failed", "The server answered a call with a JSON-RPC error, or a tool result with isError (or the client so answered a server's request)."
	case RuleUnanswered:
		return "Unanswered", "A call got no answer", "A request got no response before the recorded session ended, or its HTTP exchange ended before the response (the server died, the stream broke)."
	case RuleLost:
		return "LostMessages", "Messages were not recorded", "The recorder could not store some of the session's messages (the disk was full, the store failed, or it could not keep up): the recording is incomplete."
	}
	kind := strings.TrimPrefix(rule, RuleFinding)
	return "Finding" + camel(kind), "mcptape finding: " + kind,
		"A protocol finding of kind " + kind + " that mcptape recorded on a message (see the finding's text)."
}

// camel makes a finding kind a rule name: invalid-frame → InvalidFrame.
func camel(kind string) string {
	parts := strings.Split(kind, "-")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// sarifRuleID is a rule's SARIF id: mcptape/error, mcptape/finding/schema.
func sarifRuleID(rule string) string { return "mcptape/" + strings.Replace(rule, ":", "/", 1) }

// WriteSARIF writes every problem as a SARIF 2.1.0 result: level error for
// those that fail the check, warning for other findings, note for the
// rest. version names the mcptape that checked.
func (r *CheckReport) WriteSARIF(w io.Writer, version string) error {
	run := sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: "mcptape", Version: version,
		InformationURI: "https://github.com/mcptape/mcptape", Rules: []sarifRule{}}}, Results: []sarifResult{}}
	index := map[string]int{}
	var rules []string
	for _, s := range r.Sessions {
		for _, p := range s.Problems {
			if _, ok := index[p.Rule]; !ok {
				index[p.Rule] = -1
				rules = append(rules, p.Rule)
			}
		}
	}
	slices.Sort(rules)
	for i, rule := range rules {
		index[rule] = i
		name, short, full := ruleInfo(rule)
		level := "warning"
		if fails(r.FailOn, rule) {
			level = "error"
		}
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sarifRule{ID: sarifRuleID(rule), Name: name,
			ShortDescription: sarifText{short}, FullDescription: sarifText{full}, Default: sarifConfig{level}})
	}
	for _, s := range r.Sessions {
		for _, p := range s.Problems {
			level := "note"
			switch {
			case p.Fails:
				level = "error"
			case strings.HasPrefix(p.Rule, RuleFinding):
				level = "warning"
			}
			logical := sarifLogical{Name: "session " + s.Session.ID, FullyQualifiedName: "session " + s.Session.ID, Kind: "module"}
			if p.Index >= 0 {
				logical = sarifLogical{Name: fmt.Sprintf("message %d", p.Index),
					FullyQualifiedName: fmt.Sprintf("session %s/message %d", s.Session.ID, p.Index), Kind: "member"}
			}
			loc := sarifLocation{Logical: []sarifLogical{logical}}
			if s.File != "" {
				loc.Physical = &sarifPhysical{Artifact: sarifArtifact{URI: artifactURI(s.File)}}
				if p.Line > 0 {
					loc.Physical.Region = &sarifRegion{StartLine: p.Line}
				}
			}
			props := map[string]any{"session": s.Session.ID, "messageIndex": p.Index}
			if p.Seq != 0 {
				props["seq"] = p.Seq
			}
			run.Results = append(run.Results, sarifResult{RuleID: sarifRuleID(p.Rule), RuleIndex: index[p.Rule], Level: level,
				Message: sarifText{p.Text}, Locations: []sarifLocation{loc}, Properties: props})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}})
}

// artifactURI is a tape file as SARIF names it: a relative path as it is
// (code scanning resolves it against the repository's root), with
// forward slashes; an absolute one as a file: URI.
func artifactURI(path string) string {
	p := filepath.ToSlash(path)
	if filepath.IsAbs(path) {
		if !strings.HasPrefix(p, "/") {
			p = "/" + p // C:/x on Windows
		}
		return "file://" + p
	}
	return strings.TrimPrefix(p, "./")
}
