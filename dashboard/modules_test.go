package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/dashboard"
)

// The app's ES modules, read as the browser reads their imports: static
// imports (import … from, export … from), dynamic import('…') with a
// literal path, and app.js's loading of every page of pages.json.

var (
	importFrom = regexp.MustCompile(`(?m)^\s*(?:import|export)\s+([^;'"]*?)\s*from\s*'([^']+)'`)
	importBare = regexp.MustCompile(`(?m)^\s*import\s*'([^']+)'`)
	importDyn  = regexp.MustCompile(`import\(\s*'([^']+)'\s*\)`)
	exported   = regexp.MustCompile(`(?m)^export\s+(?:async\s+)?(?:function\*?|const|let|var|class)\s+([A-Za-z_$][\w$]*)`)
	exportList = regexp.MustCompile(`(?m)^export\s*\{([^}]*)\}`)
)

// jsModule is one module: its imports (resolved to paths under static/),
// with the names each imports, and its exports.
type jsModule struct {
	imports map[string][]string // module → names imported (nil: none named)
	exports map[string]bool
}

// readModules reads every .js module under static/js, and the page list.
func readModules(t *testing.T) (map[string]*jsModule, []dashboard.Page) {
	t.Helper()
	var pages []dashboard.Page
	b, err := os.ReadFile(filepath.FromSlash("static/js/pages.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &pages); err != nil {
		t.Fatal(err)
	}
	mods := map[string]*jsModule{}
	err = filepath.Walk(filepath.FromSlash("static/js"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(p)
		m := &jsModule{imports: map[string][]string{}, exports: map[string]bool{}}
		dir := path.Dir(name)
		for _, x := range importFrom.FindAllStringSubmatch(string(src), -1) {
			target := path.Join(dir, x[2])
			m.imports[target] = append(m.imports[target], importedNames(x[1])...)
			if strings.HasPrefix(strings.TrimSpace(x[0]), "export") {
				for _, n := range importedNames(x[1]) {
					m.exports[n] = true
				}
			}
		}
		for _, x := range importBare.FindAllStringSubmatch(string(src), -1) {
			m.imports[path.Join(dir, x[1])] = nil
		}
		for _, x := range importDyn.FindAllStringSubmatch(string(src), -1) {
			target := path.Join(dir, x[1])
			if _, ok := m.imports[target]; !ok {
				m.imports[target] = nil
			}
		}
		for _, x := range exported.FindAllStringSubmatch(string(src), -1) {
			m.exports[x[1]] = true
		}
		for _, x := range exportList.FindAllStringSubmatch(string(src), -1) {
			for _, n := range strings.Split(x[1], ",") {
				if f := strings.Fields(n); len(f) > 0 {
					m.exports[f[len(f)-1]] = true
				}
			}
		}
		mods[name] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// app.js loads every page's module.
	app := mods["static/js/app.js"]
	if app == nil {
		t.Fatal("no static/js/app.js")
	}
	for _, p := range pages {
		if p.Module != "" {
			target := path.Join("static/js", p.Module)
			app.imports[target] = append(app.imports[target], p.Func)
		}
	}
	return mods, pages
}

// importedNames are the names an import clause binds from its module:
// "{ a, b as c }" imports a and b; a default import imports "default".
func importedNames(clause string) []string {
	var out []string
	clause = strings.TrimSpace(clause)
	if i := strings.Index(clause, "{"); i >= 0 {
		j := strings.Index(clause, "}")
		for _, n := range strings.Split(clause[i+1:j], ",") {
			if f := strings.Fields(n); len(f) > 0 {
				out = append(out, f[0])
			}
		}
		clause = strings.TrimSpace(strings.Trim(clause[:i]+clause[j+1:], ", "))
	}
	if clause != "" && !strings.HasPrefix(clause, "*") {
		out = append(out, "default")
	}
	return out
}

// findCycle returns a cycle of the graph (a path that ends where it
// began), or nil.
func findCycle(graph map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var cycle []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range graph[n] {
			switch color[m] {
			case grey:
				i := slices.Index(stack, m)
				cycle = append(append([]string{}, stack[i:]...), m)
				return true
			case white:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	nodes := make([]string, 0, len(graph))
	for n := range graph {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		if color[n] == white && visit(n) {
			return cycle
		}
	}
	return nil
}

func TestFindCycle(t *testing.T) {
	if c := findCycle(map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}); strings.Join(c, " ") != "a b c a" {
		t.Errorf("cycle %q, want a b c a", c)
	}
	if c := findCycle(map[string][]string{"a": {"b", "c"}, "b": {"c"}, "c": nil}); c != nil {
		t.Errorf("cycle %q in a graph without one", c)
	}
}

// TestJSModules checks the app's module graph without a browser: every
// import names a module that exists and the names it imports are
// exported there, and no module imports itself through others (pages once
// imported app.js, which loads them; view.js and render/content.js each
// other).
func TestJSModules(t *testing.T) {
	mods, _ := readModules(t)
	graph := map[string][]string{}
	for name, m := range mods {
		for target, names := range m.imports {
			graph[name] = append(graph[name], target)
			if strings.HasSuffix(target, ".json") {
				if _, err := os.Stat(filepath.FromSlash(target)); err != nil {
					t.Errorf("%s imports %s, which does not exist", name, target)
				}
				continue
			}
			tm := mods[target]
			if tm == nil {
				t.Errorf("%s imports %s, which does not exist", name, target)
				continue
			}
			for _, n := range names {
				if !tm.exports[n] {
					t.Errorf("%s imports %s from %s, which does not export it", name, n, target)
				}
			}
		}
		slices.Sort(graph[name])
	}
	if c := findCycle(graph); c != nil {
		t.Errorf("the modules import each other in a cycle: %s", strings.Join(c, " → "))
	}
}

// TestPageList checks the one list of pages: each page's module exports
// its function, each nav name is a link of the header, and the server
// answers every page's address with index.html.
func TestPageList(t *testing.T) {
	mods, pages := readModules(t)
	index, _ := fsRead(t, "static/index.html")
	d, base := newDash(t, smallStore(t), nil)
	if got := d.Pages(); len(got) != len(pages) {
		t.Errorf("the server knows %d pages, pages.json lists %d", len(got), len(pages))
	}
	c := newAPIClient(t, base)
	segment := regexp.MustCompile(`\{([a-z]+)(?::[^}]*)?\}`)
	for _, p := range pages {
		if p.Module != "" {
			m := mods[path.Join("static/js", p.Module)]
			if m == nil || !m.exports[p.Func] {
				t.Errorf("page %s: %s does not export %s", p.Path, p.Module, p.Func)
			}
		}
		if p.Nav != "" && !strings.Contains(index, fmt.Sprintf(`data-nav="%s"`, p.Nav)) {
			t.Errorf("page %s lights up the nav link %q, which index.html does not have", p.Path, p.Nav)
		}
		// An address of the page: digits for the numbered segments.
		addr := segment.ReplaceAllStringFunc(p.Path, func(s string) string {
			if strings.Contains(s, ":") {
				return "7"
			}
			return "x1"
		})
		code, body, h := c.do(http.MethodGet, addr, nil, nil)
		if code != http.StatusOK || string(body) != index || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s (page %s): %d %s, want index.html", addr, p.Path, code, h.Get("Content-Type"))
		}
	}
}
