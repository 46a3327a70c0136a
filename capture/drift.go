package capture

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Drift: a tools/list that differs from the upstream's baseline (see
// BaselineFile) gets a drift finding per tool added, removed or changed,
// at capture time. The pipeline calls driftCheck.toolsList where it
// handles a tools/list result; a list in pages is compared once its last
// page (no nextCursor) is in.

// driftCheck compares complete tools/list results with their upstream's
// baseline. It is used by the pipeline goroutine alone.
type driftCheck struct {
	src BaselineSource
	// pages holds, per session, the tools of a paged list's pages so far.
	pages map[string][]json.RawMessage
}

// Bounds of drift checking: a hostile server's lists.
const (
	maxDriftSessions = 1000 // sessions with a paged list in progress
	maxDriftFindings = 50   // findings on one tools/list
	maxDriftText     = 1000 // one finding's message
)

func newDriftCheck(src BaselineSource) *driftCheck {
	if src == nil {
		return nil
	}
	return &driftCheck{src: src, pages: map[string][]json.RawMessage{}}
}

// toolsList takes a tools/list result of session s (paged: its request
// had a cursor) and returns the drift findings for it: none until the
// list is complete, nor when its upstream has no baseline.
func (d *driftCheck) toolsList(s *Session, result json.RawMessage, paged bool) []Finding {
	if d == nil {
		return nil
	}
	var r struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor *string           `json:"nextCursor"`
	}
	if json.Unmarshal(result, &r) != nil {
		return nil
	}
	tools := r.Tools
	if paged {
		if prev, ok := d.pages[s.ID]; ok {
			tools = append(prev, tools...)
		}
	}
	delete(d.pages, s.ID)
	if r.NextCursor != nil && *r.NextCursor != "" {
		if len(d.pages) < maxDriftSessions && len(tools) <= maxCatalogItems {
			d.pages[s.ID] = tools
		}
		return nil
	}
	base, ok := d.src.Baseline(BaselineKey(s))
	if !ok {
		return nil
	}
	list, err := json.Marshal(tools)
	if err != nil {
		return nil
	}
	return driftFindings(base, DiffCatalog(CatalogKinds[0], base.Tools, list))
}

// driftFindings turns a comparison with base into findings: one per tool
// added or removed, and one per tool changed that lists its fields.
func driftFindings(base *Baseline, changes []CatalogChange) []Finding {
	if len(changes) == 0 {
		return nil
	}
	since := "the baseline accepted " + base.Accepted.UTC().Format(time.DateTime) + " UTC"
	var out []Finding
	tools := 0
	for i := 0; i < len(changes); {
		c := changes[i]
		j := i + 1
		for j < len(changes) && changes[j].Name == c.Name && changes[j].Change == "changed" && c.Change == "changed" {
			j++
		}
		tools++
		if len(out) < maxDriftFindings {
			var text string
			switch c.Change {
			case "added":
				text = fmt.Sprintf("tool %q is new since %s", c.Name, since)
			case "removed":
				text = fmt.Sprintf("tool %q of %s is gone", c.Name, since)
			default:
				var b strings.Builder
				fmt.Fprintf(&b, "tool %q changed since %s: ", c.Name, since)
				for k, ch := range changes[i:j] {
					if k > 0 {
						b.WriteString("; ")
					}
					fmt.Fprintf(&b, "%s was %s, now %s", ch.Path, ch.Old, ch.New)
				}
				text = clip(b.String(), maxDriftText)
			}
			out = append(out, Finding{FindingDrift, text})
		}
		i = j
	}
	if tools > maxDriftFindings {
		out = append(out, Finding{FindingDrift, fmt.Sprintf("%d more tools differ from %s", tools-maxDriftFindings, since)})
	}
	return out
}
