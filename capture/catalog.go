package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// CatalogChange is one difference between two lists of a server's tools,
// prompts, resources or resource templates, as two tools/list results (or
// prompts/list, …) show them: an item added or removed, or one field of
// an item changed.
type CatalogChange struct {
	// Kind is "tool", "prompt", "resource" or "resource template".
	Kind string `json:"kind"`
	// Name is the item's name (a resource's uri, a template's
	// uriTemplate).
	Name string `json:"name"`
	// Change is "added", "removed" or "changed".
	Change string `json:"change"`
	// Path is, on a change, where in the item: "description",
	// "inputSchema.properties.city.type", "annotations.destructiveHint".
	Path string `json:"path,omitempty"`
	// Old and New are the value at Path before and after, as compact
	// JSON, or "(absent)".
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
}

func (c CatalogChange) String() string {
	switch c.Change {
	case "added", "removed":
		return fmt.Sprintf("%s %q %s", c.Kind, c.Name, c.Change)
	}
	return fmt.Sprintf("%s %q: %s changed from %s to %s", c.Kind, c.Name, c.Path, c.Old, c.New)
}

// CatalogKind is what a list method lists, and the member that names its
// items.
type CatalogKind struct {
	Method, Member, Kind, Key string
}

// CatalogKinds are the lists DiffCatalog compares, as their methods name
// them.
var CatalogKinds = []CatalogKind{
	{"tools/list", "tools", "tool", "name"},
	{"prompts/list", "prompts", "prompt", "name"},
	{"resources/list", "resources", "resource", "uri"},
	{"resources/templates/list", "resourceTemplates", "resource template", "uriTemplate"},
}

// Bounds of a catalog comparison: recorded lists are hostile.
const (
	maxCatalogItems   = 5000
	maxChangesPerItem = 50
	maxValueText      = 300
)

// DiffCatalog compares two lists of k's items (the JSON arrays of a list
// result's member, e.g. its "tools"), item by item under their names: the
// items added, removed, and every field that changed, as a path and both
// values. Member order and number spelling do not count, nor an item's
// _meta. Items come out in name order.
func DiffCatalog(k CatalogKind, old, new json.RawMessage) []CatalogChange {
	a, b := catalogItems(old, k.Key), catalogItems(new, k.Key)
	names := slices.Sorted(maps.Keys(a))
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []CatalogChange
	for _, n := range names {
		av, inA := a[n]
		bv, inB := b[n]
		switch {
		case !inA:
			out = append(out, CatalogChange{Kind: k.Kind, Name: n, Change: "added"})
		case !inB:
			out = append(out, CatalogChange{Kind: k.Kind, Name: n, Change: "removed"})
		default:
			for _, d := range DiffJSON(av, bv, nil, maxChangesPerItem, maxValueText) {
				out = append(out, CatalogChange{Kind: k.Kind, Name: n, Change: "changed", Path: d.Path, Old: d.Old, New: d.New})
			}
		}
	}
	return out
}

// catalogItems decodes a list's items by name, without their _meta.
func catalogItems(raw json.RawMessage, key string) map[string]any {
	out := map[string]any{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return out
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var items []map[string]any
	if dec.Decode(&items) != nil {
		return out
	}
	for _, it := range items {
		if len(out) >= maxCatalogItems {
			break
		}
		name, _ := it[key].(string)
		delete(it, "_meta")
		out[name] = it
	}
	return out
}
