package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

func renderPath(path []string) string {
	var b strings.Builder
	for i, s := range path {
		if i > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// maxDiffs bounds the differences listed for one call.
const maxDiffs = 50

const absent = "(absent)"

// diffDocs lists where live differs from recorded, structurally: member
// order and number spelling (1 and 1.0) do not count; ignored paths are
// left out.
func diffDocs(recorded, live any, ig *ignoreRules) []Difference {
	var out []Difference
	more := 0
	var walk func(path []string, a, b any, hasA, hasB bool)
	walk = func(path []string, a, b any, hasA, hasB bool) {
		if len(path) > 0 && ig.skip(path) {
			return
		}
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			keys := make([]string, 0, len(am)+len(bm))
			for k := range am {
				keys = append(keys, k)
			}
			for k := range bm {
				if _, ok := am[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				av, ha := am[k]
				bv, hb := bm[k]
				walk(append(slices.Clip(path), k), av, bv, ha, hb)
			}
			return
		}
		al, alok := a.([]any)
		bl, blok := b.([]any)
		if alok && blok {
			for i := range max(len(al), len(bl)) {
				var av, bv any
				if i < len(al) {
					av = al[i]
				}
				if i < len(bl) {
					bv = bl[i]
				}
				walk(append(slices.Clip(path), "["+strconv.Itoa(i)+"]"), av, bv, i < len(al), i < len(bl))
			}
			return
		}
		if hasA == hasB && sameScalar(a, b) {
			return
		}
		if len(out) >= maxDiffs {
			more++
			return
		}
		d := Difference{Path: renderPath(path), Recorded: absent, Live: absent}
		if hasA {
			d.Recorded = render(a)
		}
		if hasB {
			d.Live = render(b)
		}
		if d.Path == "" {
			d.Path = "(the whole response)"
		}
		out = append(out, d)
	}
	walk(nil, recorded, live, true, true)
	if more > 0 {
		out = append(out, Difference{Path: "…", Recorded: fmt.Sprintf("%d more difference(s) not listed", more), Live: ""})
	}
	return out
}

// sameScalar compares two JSON values that are not both objects or both
// lists: numbers by value, everything else exactly.
func sameScalar(a, b any) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		if an == bn {
			return true
		}
		af, err1 := an.Float64()
		bf, err2 := bn.Float64()
		return err1 == nil && err2 == nil && af == bf
	}
	switch a.(type) {
	case map[string]any, []any:
		return false
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

// maxRendered bounds a value's JSON in a Difference.
const maxRendered = 2000

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return clip(string(b), maxRendered)
}
