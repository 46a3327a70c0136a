package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// Baselines: the tools a user trusts, per upstream. `mcptape baseline
// accept` stores the tools/list an upstream answered last; from then on a
// recorder marks every tools/list of that upstream that differs from it
// with a drift finding, saying which field of which tool changed (a tool
// whose description grew instructions after it was approved: a "rug
// pull"). They live in a file of the data directory, not in the store,
// so that every process that records reads them — a recorder, a
// dashboard, each stdio wrap (which records into a spool, without the
// store) — and a change reaches them at their next tools/list, whoever
// holds the store.

// BaselinesFile is the file, in the data directory, that keeps the
// baselines.
const BaselinesFile = "baselines.json"

// Baselines file format identifiers.
const (
	baselinesFormat  = "mcptape-baselines"
	baselinesVersion = 1
)

// ErrBaselinesVersion is returned for a baselines file of a version or
// format this build does not read.
var ErrBaselinesVersion = errors.New("unsupported baselines file")

// Baseline is the trusted tools/list of one upstream.
type Baseline struct {
	// Upstream names the upstream as BaselineKey does.
	Upstream string `json:"upstream"`
	// Accepted is when it was accepted; Session the session whose
	// tools/list it is, and Server that session's server.
	Accepted time.Time               `json:"accepted"`
	Session  string                  `json:"session,omitempty"`
	Server   protocol.Implementation `json:"server,omitzero"`
	// Tools is the result's tools array, as recorded.
	Tools json.RawMessage `json:"tools"`
}

// BaselineKey names a session's upstream for its baseline: "stdio:NAME"
// for a wrapped stdio server, else the server's endpoint URL (upstream
// and path), whichever route or leg reached it.
func BaselineKey(s *Session) string {
	if s.Leg == LegStdio {
		return "stdio:" + s.Route
	}
	return strings.TrimRight(s.Upstream, "/") + s.Path
}

// BaselineSource gives the baseline of an upstream, for a recorder
// (RecorderOptions.Baselines). It is called from the recorder's pipeline
// on every complete tools/list, so it must be cheap.
type BaselineSource interface {
	Baseline(upstream string) (*Baseline, bool)
}

// BaselineFile is the baselines file of a data directory. It reads the
// file again when it changed (its size or modification time), so a
// recorder sees a baseline accepted while it runs. Safe for concurrent
// use.
type BaselineFile struct {
	path string

	mu      sync.Mutex
	stamp   string // size and modification time of the version read
	byKey   map[string]*Baseline
	readErr error
}

var _ BaselineSource = (*BaselineFile)(nil)

// OpenBaselines returns the baselines file of dataDir (which need not
// exist yet).
func OpenBaselines(dataDir string) *BaselineFile {
	return &BaselineFile{path: filepath.Join(dataDir, BaselinesFile)}
}

// Path is the file's path.
func (f *BaselineFile) Path() string { return f.path }

// Baseline implements BaselineSource. A file that cannot be read counts
// as no baselines (Err says why).
func (f *BaselineFile) Baseline(upstream string) (*Baseline, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refresh()
	b, ok := f.byKey[upstream]
	return b, ok
}

// Err is why the file could not be read at the last look, or nil.
func (f *BaselineFile) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refresh()
	return f.readErr
}

// List returns every baseline, by upstream.
func (f *BaselineFile) List() ([]*Baseline, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refresh()
	if f.readErr != nil {
		return nil, f.readErr
	}
	out := make([]*Baseline, 0, len(f.byKey))
	for _, b := range f.byKey {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *Baseline) int { return strings.Compare(a.Upstream, b.Upstream) })
	return out, nil
}

// refresh reads the file again if it changed. f.mu is held.
func (f *BaselineFile) refresh() {
	fi, err := os.Stat(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		f.stamp, f.byKey, f.readErr = "", nil, nil
		return
	}
	if err != nil {
		f.readErr = err
		return
	}
	stamp := fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
	if stamp == f.stamp {
		return
	}
	byKey, err := readBaselines(f.path)
	f.stamp, f.byKey, f.readErr = stamp, byKey, err
}

type baselinesDoc struct {
	Format    string      `json:"format"`
	Version   int         `json:"version"`
	Baselines []*Baseline `json:"baselines"`
}

// maxBaselinesFile bounds the file read: it holds tool lists, which a
// hostile server can make large, but not without end.
const maxBaselinesFile = 64 << 20

func readBaselines(path string) (map[string]*Baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxBaselinesFile {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxBaselinesFile>>20)
	}
	var doc baselinesDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it, or `mcptape baseline reset --all`, and accept the baselines again)", path, err)
	}
	if doc.Format != baselinesFormat || doc.Version != baselinesVersion {
		return nil, fmt.Errorf("%s: format %q version %d: %w (this mcptape reads %s version %d)", path, doc.Format, doc.Version,
			ErrBaselinesVersion, baselinesFormat, baselinesVersion)
	}
	out := make(map[string]*Baseline, len(doc.Baselines))
	for _, bl := range doc.Baselines {
		if bl != nil {
			out[bl.Upstream] = bl
		}
	}
	return out, nil
}

// Update changes the baselines under a lock on the file, so that two
// commands at once do not lose each other's change: fn gets them by
// upstream and edits the map. The file is replaced whole, atomically.
func (f *BaselineFile) Update(fn func(map[string]*Baseline) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	unlock, err := lockBaselines(f.path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	byKey, err := readBaselines(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		byKey = map[string]*Baseline{}
	case err != nil:
		return err
	}
	if err := fn(byKey); err != nil {
		return err
	}
	doc := baselinesDoc{Format: baselinesFormat, Version: baselinesVersion, Baselines: []*Baseline{}}
	for _, b := range byKey {
		doc.Baselines = append(doc.Baselines, b)
	}
	slices.SortFunc(doc.Baselines, func(a, b *Baseline) int { return strings.Compare(a.Upstream, b.Upstream) })
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+BaselinesFile+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(out, '\n'))
	if err := tmp.Sync(); werr == nil {
		werr = err
	}
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), f.path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", f.path, werr)
	}
	f.stamp = "" // read again at the next look
	return nil
}

// lockBaselines takes an exclusive lock file, waiting up to 10 seconds for
// another command to release it; a lock older than a minute is a crashed
// command's, and taken over.
func lockBaselines(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, serr := os.Stat(path); serr == nil && time.Since(fi.ModTime()) > time.Minute {
			os.Remove(path)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is held by another mcptape baseline command; try again, or remove the file if none runs", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
