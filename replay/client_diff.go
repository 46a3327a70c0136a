package replay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcptape/mcptape/capture"
)

// ErrBadIgnorePath is returned for an ignore path that cannot be parsed.
var ErrBadIgnorePath = errors.New("bad ignore path")

// ignoreRules are what the replay client's comparison leaves out: members
// by name anywhere, and paths from the compared document's root.
type ignoreRules struct {
	keys  map[string]bool
	paths [][]string // segments: member names, "[3]", "[*]" or "*"
}

func newIgnoreRules(keys, paths []string) (*ignoreRules, error) {
	ig := &ignoreRules{keys: map[string]bool{}}
	for _, k := range keys {
		ig.keys[k] = true
	}
	for _, p := range paths {
		segs, err := parseDocPath(p)
		if err != nil {
			return nil, err
		}
		ig.paths = append(ig.paths, segs)
	}
	return ig, nil
}

// parseDocPath splits "result.content[0].text" into result, content, [0],
// text. "[*]" stands for any element, "*" for any member.
func parseDocPath(p string) ([]string, error) {
	bad := func(why string) ([]string, error) { return nil, fmt.Errorf("%w %q: %s", ErrBadIgnorePath, p, why) }
	if strings.TrimSpace(p) == "" {
		return bad("empty")
	}
	var segs []string
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name == "" && rest == "" {
			return bad("an empty member name (two dots, or a leading or trailing one?)")
		}
		if strings.Contains(name, "]") {
			return bad("a ] without its [")
		}
		if name != "" {
			segs = append(segs, name)
		}
		if !strings.Contains(part, "[") {
			continue
		}
		for rest = "[" + rest; rest != ""; {
			end := strings.IndexByte(rest, ']')
			if rest[0] != '[' || end < 0 {
				return bad("want [N] or [*] after a member name")
			}
			idx := rest[1:end]
			if _, err := strconv.Atoi(idx); err != nil && idx != "*" {
				return bad("[" + idx + "] is not an index: want [N] or [*]")
			}
			segs = append(segs, "["+idx+"]")
			rest = rest[end+1:]
		}
	}
	return segs, nil
}

// skip reports whether the value at path (segments) is left out.
func (ig *ignoreRules) skip(path []string) bool {
	if n := len(path); n > 0 && !strings.HasPrefix(path[n-1], "[") && ig.keys[path[n-1]] {
		return true
	}
	for _, p := range ig.paths {
		if len(p) > len(path) {
			continue
		}
		match := true
		for i, s := range p {
			switch {
			case s == path[i]:
			case s == "[*]" && strings.HasPrefix(path[i], "["):
			case s == "*" && !strings.HasPrefix(path[i], "["):
			default:
				match = false
			}
			if !match {
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// maxDiffs bounds the differences listed for one call.
const maxDiffs = 50

const absent = "(absent)"

// diffDocs lists where live differs from recorded, structurally: member
// order and number spelling (1 and 1.0) do not count; ignored paths are
// left out.
func diffDocs(recorded, live any, ig *ignoreRules) []Difference {
	var out []Difference
	for _, c := range capture.DiffJSON(recorded, live, ig.skip, maxDiffs, maxRendered) {
		if c.Path == "" {
			c.Path = "(the whole response)"
		}
		out = append(out, Difference{Path: c.Path, Recorded: c.Old, Live: c.New})
	}
	return out
}

// maxRendered bounds a value's JSON in a Difference.
const maxRendered = 2000
