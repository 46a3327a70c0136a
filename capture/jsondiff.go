package capture

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// JSONChange is one place where two JSON documents differ: its path from
// the root ("result.content[0].text"; "" for the root itself) and the
// value on each side, as compact JSON cut to a length, or "(absent)".
type JSONChange struct {
	Path, Old, New string
}

// DiffJSON lists where b differs from a, two JSON documents decoded with
// UseNumber: structurally, so member order and number spelling (1 and
// 1.0) do not count. skip, if set, leaves out the value at a path (given
// as segments: member names, and "[3]" for list elements) and everything
// under it. At most limit changes are listed, then one more, at path "…",
// that says how many were left out; values are cut to clipAt characters.
// The replay client's comparison of answers, diff's, and drift's use it.
func DiffJSON(a, b any, skip func(path []string) bool, limit, clipAt int) []JSONChange {
	var out []JSONChange
	more := 0
	var walk func(path []string, av, bv any, hasA, hasB bool)
	walk = func(path []string, av, bv any, hasA, hasB bool) {
		if len(path) > 0 && skip != nil && skip(path) {
			return
		}
		switch x := av.(type) {
		case map[string]any:
			if y, ok := bv.(map[string]any); ok && hasA && hasB {
				keys := slices.Sorted(maps.Keys(x))
				for k := range y {
					if _, dup := x[k]; !dup {
						keys = append(keys, k)
					}
				}
				slices.Sort(keys)
				for _, k := range keys {
					xv, hx := x[k]
					yv, hy := y[k]
					walk(append(slices.Clip(path), k), xv, yv, hx, hy)
				}
				return
			}
		case []any:
			if y, ok := bv.([]any); ok && hasA && hasB {
				for i := range max(len(x), len(y)) {
					var xv, yv any
					if i < len(x) {
						xv = x[i]
					}
					if i < len(y) {
						yv = y[i]
					}
					walk(append(slices.Clip(path), "["+strconv.Itoa(i)+"]"), xv, yv, i < len(x), i < len(y))
				}
				return
			}
		}
		if hasA == hasB && sameLeaf(av, bv) {
			return
		}
		if len(out) >= limit {
			more++
			return
		}
		out = append(out, JSONChange{jsonPath(path), valueText(av, hasA, clipAt), valueText(bv, hasB, clipAt)})
	}
	walk(nil, a, b, true, true)
	if more > 0 {
		out = append(out, JSONChange{"…", fmt.Sprintf("%d more difference(s) not listed", more), ""})
	}
	return out
}

// jsonPath renders path segments: member names joined with dots, list
// indexes appended ("content[0].text").
func jsonPath(path []string) string {
	var b strings.Builder
	for i, s := range path {
		if i > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// sameLeaf compares two JSON values of which at least one is not an
// object or array: numbers by value, the rest exactly.
func sameLeaf(a, b any) bool {
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

// valueText is a value as compact JSON, cut to n characters, or
// "(absent)".
func valueText(v any, present bool, n int) string {
	if !present {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return clip(string(b), n)
}
