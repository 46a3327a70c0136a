package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The user documentation is the README plus the pages under docs/: the
// README stays short and every page must be reachable from it, and no
// link between them may point at a file or a heading that is not there
// (a moved section would otherwise leave its readers at a dead link).

var mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)

// mdAnchor is the anchor GitHub gives a heading: lower case, punctuation
// other than '-' and '_' dropped, spaces as '-'.
func mdAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '›' && r != '—' && r != '’':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func mdAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	inCode := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[mdAnchor(strings.TrimLeft(line, "#"))] = true
	}
	return anchors
}

func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	pages := []string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs pages found: %v", err)
	}
	pages = append(pages, docs...)
	reached := map[string]bool{}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel(root, page), target)
				continue
			}
			if page == pages[0] {
				reached[filepath.Clean(dest)] = true
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !mdAnchors(t, dest)[anchor] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", rel(root, page), target, rel(root, dest))
			}
		}
	}
	for _, d := range docs {
		if !reached[filepath.Clean(d)] {
			t.Errorf("the README does not link to %s: a reader cannot find it", rel(root, d))
		}
	}
	readme, _ := os.ReadFile(pages[0])
	if n := strings.Count(string(readme), "\n"); n > 300 {
		t.Errorf("README.md has %d lines: keep it under 300 and move the details into a page under docs/", n)
	}
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}
