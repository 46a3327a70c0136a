package dashboard

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Testing profiles (docs/testing-profiles.md) are files in Options.Profiles:
// NAME.json each, and the name of the default one in DefaultProfileFile.
// `mcptape replay … --profile DATA/profiles/NAME.json` reads them.

// DefaultProfileFile, in the profiles directory, holds the name of the
// default profile.
const DefaultProfileFile = "default-profile"

// maxProfile bounds a profile file.
const maxProfile = 1 << 20

var profileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func validProfileName(n string) bool {
	return profileName.MatchString(n) && !strings.HasSuffix(n, ".json") && n != DefaultProfileFile
}

type profileRow struct {
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	Default  bool      `json:"default"`
	// Error says why the file is not a valid profile; "" when it is.
	Error string `json:"error,omitempty"`
}

func (s *Server) profilesDir(w http.ResponseWriter) (string, bool) {
	if s.opts.Profiles == "" {
		writeError(w, http.StatusNotImplemented, "testing profiles are not available in this dashboard", "unsupported")
		return "", false
	}
	return s.opts.Profiles, true
}

func (s *Server) defaultProfile() string {
	b, err := os.ReadFile(filepath.Join(s.opts.Profiles, DefaultProfileFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (s *Server) checkProfile(b []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		if err := checkJSON(b); err != nil {
			return err
		}
		return errors.New("a testing profile is a JSON object")
	}
	if s.opts.Backend != nil {
		return s.opts.Backend.CheckProfile(b)
	}
	return nil
}

// apiProfiles is GET /api/v1/profiles.
func (s *Server) apiProfiles(w http.ResponseWriter, r *http.Request) {
	dir, ok := s.profilesDir(w)
	if !ok {
		return
	}
	out := struct {
		Dir      string       `json:"dir"`
		Default  string       `json:"default"`
		Profiles []profileRow `json:"profiles"`
	}{Dir: dir, Default: s.defaultProfile(), Profiles: []profileRow{}}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		storeError(w, err)
		return
	}
	for _, e := range entries {
		name, isJSON := strings.CutSuffix(e.Name(), ".json")
		if !isJSON || !e.Type().IsRegular() || !validProfileName(name) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		row := profileRow{Name: name, Size: info.Size(), Modified: info.ModTime(), Default: name == out.Default}
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			row.Error = err.Error()
		} else if err := s.checkProfile(b); err != nil {
			row.Error = err.Error()
		}
		out.Profiles = append(out.Profiles, row)
	}
	slices.SortFunc(out.Profiles, func(a, b profileRow) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) profilePath(w http.ResponseWriter, r *http.Request) (string, string, bool) {
	dir, ok := s.profilesDir(w)
	if !ok {
		return "", "", false
	}
	name := pathVar(r, "name")
	if !validProfileName(name) {
		badRequest(w, "a profile name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
		return "", "", false
	}
	return name, filepath.Join(dir, name+".json"), true
}

// apiProfile is GET /api/v1/profiles/{name}.
func (s *Server) apiProfile(w http.ResponseWriter, r *http.Request) {
	name, path, ok := s.profilePath(w, r)
	if !ok {
		return
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, "no profile "+name, "not_found")
		return
	}
	if err != nil {
		storeError(w, err)
		return
	}
	out := map[string]any{"name": name, "content": string(b), "default": s.defaultProfile() == name}
	if err := s.checkProfile(b); err != nil {
		out["error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// apiPutProfile is PUT /api/v1/profiles/{name} {"content": "..."}: create
// or replace a profile, once it validates.
func (s *Server) apiPutProfile(w http.ResponseWriter, r *http.Request) {
	name, path, ok := s.profilePath(w, r)
	if !ok {
		return
	}
	var body struct {
		Content string `json:"content"`
	}
	if !readJSON(w, r, maxProfile+4096, &body) {
		return
	}
	b := []byte(body.Content)
	if len(b) > maxProfile {
		badRequest(w, "a profile is at most 1 MiB")
		return
	}
	if err := s.checkProfile(b); err != nil {
		badRequest(w, err.Error())
		return
	}
	if err := writeFileAtomic(path, b); err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name})
}

// apiDeleteProfile is DELETE /api/v1/profiles/{name}.
func (s *Server) apiDeleteProfile(w http.ResponseWriter, r *http.Request) {
	name, path, ok := s.profilePath(w, r)
	if !ok {
		return
	}
	if err := os.Remove(path); errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, "no profile "+name, "not_found")
		return
	} else if err != nil {
		storeError(w, err)
		return
	}
	if s.defaultProfile() == name {
		_ = os.Remove(filepath.Join(s.opts.Profiles, DefaultProfileFile))
	}
	w.WriteHeader(http.StatusNoContent)
}

// apiSetDefaultProfile is PUT /api/v1/default-profile {"name": "..."};
// "" clears the default.
func (s *Server) apiSetDefaultProfile(w http.ResponseWriter, r *http.Request) {
	dir, ok := s.profilesDir(w)
	if !ok {
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	if !readJSON(w, r, 4096, &body) {
		return
	}
	file := filepath.Join(dir, DefaultProfileFile)
	if body.Name == "" {
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			storeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"default": ""})
		return
	}
	if !validProfileName(body.Name) {
		badRequest(w, "not a profile name")
		return
	}
	if _, err := os.Stat(filepath.Join(dir, body.Name+".json")); err != nil {
		writeError(w, http.StatusNotFound, "no profile "+body.Name, "not_found")
		return
	}
	if err := writeFileAtomic(file, []byte(body.Name+"\n")); err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"default": body.Name})
}

// writeFileAtomic writes path through a temporary file beside it.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// info is GET /api/v1/info: what this dashboard can do.
type info struct {
	Version  string   `json:"version"`
	DataDir  string   `json:"dataDir,omitempty"`
	Live     string   `json:"live"` // publish or poll
	Features features `json:"features"`
}

type features struct {
	Edit        bool `json:"edit"`
	Export      bool `json:"export"`
	Import      bool `json:"import"`
	Profiles    bool `json:"profiles"`
	StartReplay bool `json:"startReplay"`
	Metrics     bool `json:"metrics"`
	Pending     bool `json:"pending"`
	Intercept   bool `json:"intercept"`
}

func (s *Server) apiInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, info{Version: s.opts.Version, DataDir: s.opts.DataDir, Live: s.opts.Feed.String(),
		Features: features{Edit: s.editor != nil, Export: s.opts.Backend != nil, Import: s.opts.Backend != nil,
			Profiles: s.opts.Profiles != "", StartReplay: s.opts.Backend != nil, Metrics: s.opts.Metrics != nil,
			Pending: s.opts.Pending != nil, Intercept: s.opts.Intercept != nil}})
}
