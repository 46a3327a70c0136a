package clientconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// BackupPath is where the copy of a config is kept that mcptape writes
// before it first changes the file: FILE.mcptape-backup, beside it. It is
// written once and never overwritten.
func BackupPath(config string) string { return config + ".mcptape-backup" }

// StatePath is where mcptape keeps the text of the entries it attached, so
// that detach can put them back byte for byte: FILE.mcptape-state, beside
// the config, readable by its owner only (entries hold secrets in "env").
// It is removed when nothing is attached any more.
func StatePath(config string) string { return config + ".mcptape-state" }

// stateVersion is the version of the state file's format.
const stateVersion = 1

// ErrStateVersion is a state file written by a newer mcptape.
var ErrStateVersion = errors.New("unknown state file version")

// state is a StatePath file:
//
//	{
//	  "version": 1,
//	  "about": "…",
//	  "entries": {
//	    "/mcpServers/NAME": {"original": "<entry text before attach>", "attached": "<entry text attach wrote>"}
//	  }
//	}
//
// Entries are keyed by their JSON Pointer in the config.
type state struct {
	path    string
	Version int                   `json:"version"`
	About   string                `json:"about"`
	Entries map[string]savedEntry `json:"entries"`
}

type savedEntry struct {
	Original string `json:"original"`
	Attached string `json:"attached"`
	// Routed is, for an HTTP server attached to a recorder's route, the
	// route's URL that attach put in the entry, and Upstream the server's
	// own url it replaced.
	Routed   string `json:"routed,omitempty"`
	Upstream string `json:"upstream,omitempty"`
}

const stateAbout = "mcptape attach keeps here the text each entry had before it was attached, so that mcptape detach can restore it byte for byte. Run mcptape detach rather than deleting this file."

func readState(path string) (*state, error) {
	st := &state{path: path, Version: stateVersion, About: stateAbout, Entries: map[string]savedEntry{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v); move it away to go on (detach then rebuilds entries from their arguments)", path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("%s: %w %d: it was written by a newer mcptape; use that one", path, ErrStateVersion, st.Version)
	}
	if st.Entries == nil {
		st.Entries = map[string]savedEntry{}
	}
	st.About = stateAbout
	return st, nil
}

// write saves st, or removes its file when it holds no entries.
func (st *state) write() error {
	if len(st.Entries) == 0 {
		if err := os.Remove(st.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(st); err != nil {
		return err
	}
	return writeAtomic(st.path, b.Bytes(), 0o600, nil)
}

// backup copies c's file to BackupPath unless a backup exists; it returns
// the path when it wrote one.
func backup(c *config) (string, error) {
	path := BackupPath(c.path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, c.mode)
	if errors.Is(err, fs.ErrExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("writing a backup of the config: %w; nothing was changed", err)
	}
	_, err = f.Write(c.data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("writing a backup of the config: %w; nothing was changed", err)
	}
	return path, nil
}

// replace writes data over c's file atomically (a temporary file beside it,
// renamed over it), keeping its mode and, through a symbolic link, the
// link. It refuses when the file changed since c was read.
func replace(c *config, data []byte) error {
	target, err := filepath.EvalSymlinks(c.path)
	if err != nil {
		return err
	}
	now, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	if !bytes.Equal(now, c.data) {
		return fmt.Errorf("%s changed while mcptape was editing it (is the client writing it?); nothing was changed, run the command again", c.path)
	}
	fi, err := os.Stat(target)
	if err != nil {
		return err
	}
	return writeAtomic(target, data, c.mode, fi)
}

// writeAtomic writes data to a temporary file in path's directory and
// renames it over path; like is the file whose owner to keep, if any.
func writeAtomic(path string, data []byte, mode fs.FileMode, like fs.FileInfo) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".mcptape-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("writing %s: %w; it was left as it was", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if like != nil {
		keepOwner(f, like)
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}
