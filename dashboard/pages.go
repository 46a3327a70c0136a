package dashboard

import (
	"encoding/json"
	"fmt"
	"io/fs"
)

// Page is one of the app's pages, as static/js/pages.json lists them: the
// one list of pages, which the app routes on and the server answers with
// index.html (a page the server did not know would answer 404 on reload).
type Page struct {
	// Path is the page's address in gorilla/mux's syntax: {id} is one
	// path segment, {seq:[0-9]+} one that matches the pattern.
	Path string `json:"path"`
	// Module is the ES module that draws it (relative to js/) and Func
	// the function it exports; Redirect, instead, is where the page
	// sends the browser.
	Module   string `json:"module,omitempty"`
	Func     string `json:"page,omitempty"`
	Redirect string `json:"redirect,omitempty"`
	// Nav is the nav link the page lights up ("" for none).
	Nav string `json:"nav,omitempty"`
}

// pagesFile is the list, inside the embedded static files.
const pagesFile = "js/pages.json"

// readPages reads the page list from the static files.
func readPages(static fs.FS) ([]Page, error) {
	b, err := fs.ReadFile(static, pagesFile)
	if err != nil {
		return nil, err
	}
	var pages []Page
	if err := json.Unmarshal(b, &pages); err != nil {
		return nil, fmt.Errorf("dashboard: %s: %w", pagesFile, err)
	}
	for _, p := range pages {
		if p.Path == "" || p.Path[0] != '/' || (p.Redirect == "") == (p.Module == "" || p.Func == "") {
			return nil, fmt.Errorf("dashboard: %s: page %q needs a path and either a module and its function or a redirect", pagesFile, p.Path)
		}
	}
	return pages, nil
}

// Pages lists the app's pages.
func (s *Server) Pages() []Page { return append([]Page(nil), s.pages...) }
