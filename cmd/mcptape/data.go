package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/capture/remotestore"
	"github.com/mcptape/mcptape/capture/spool"
)

// Defaults a user can rely on (documented in docs/recording.md).
const (
	defaultListen = "127.0.0.1:7411"
	envData       = "MCPTAPE_DATA"
)

// defaultDataDir is the per-user data directory: $MCPTAPE_DATA, else
// $XDG_DATA_HOME/mcptape, else the platform's convention
// (~/.local/share/mcptape, ~/Library/Application Support/mcptape,
// %LocalAppData%\mcptape). It is never relative to the working directory,
// which for a server a client starts is the client's: without HOME (a
// client started by a service manager, or `env -i`) the home directory
// comes from the account database.
func defaultDataDir() string {
	if d := os.Getenv(envData); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "mcptape")
	}
	home := homeDir()
	if home == "" {
		// No home at all (an account the system does not know): a
		// per-user directory that is at least absolute.
		return filepath.Join(os.TempDir(), fmt.Sprintf("mcptape-%d", os.Getuid()))
	}
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Application Support", "mcptape")
	case "windows":
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "mcptape")
		}
	}
	return filepath.Join(home, ".local", "share", "mcptape")
}

// homeDir is the user's home directory: $HOME (or the platform's
// variable), else the account database's entry for this user; "" when
// neither says, or what they say is not absolute.
func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		return h
	}
	if u, err := user.Current(); err == nil && filepath.IsAbs(u.HomeDir) {
		return u.HomeDir
	}
	return ""
}

// openWrite opens the store for recording (or importing); opts may be
// nil.
func openWrite(dir string, opts *badgerstore.Options) (*badgerstore.Store, error) {
	diskFull := func(err error) error {
		return fmt.Errorf("the disk that holds %s is full, and the store cannot even be opened: free some space there, or record into a directory on another disk with --data DIR (once running, recording pauses by itself before the disk fills, and traffic keeps flowing): %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return nil, diskFull(err)
		}
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	st, err := badgerstore.Open(dir, opts)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device") {
			return nil, diskFull(err)
		}
		if errors.Is(err, badgerstore.ErrLocked) {
			if a, aerr := remotestore.ReadAnnouncement(dir); aerr == nil {
				return nil, heldBy(dir, a)
			}
		}
		return nil, notOpening(dir, err)
	}
	if err := repairStale(dir, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// heldBy says which mcptape holds dir, announced by a, and what to do.
func heldBy(dir string, a *remotestore.Announcement) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, st, err := remotestore.Discover(ctx, dir)
	if err == nil && st.Listen == "" {
		// Only a dashboard announces no listener of a proxy.
		at := ""
		if a.Dashboard != "" {
			at = ", at " + dashboardBase(a.Dashboard)
		}
		return fmt.Errorf("%s is open in `mcptape dashboard` (pid %d%s), and one process at a time holds a data directory: "+
			"stop the dashboard and run this again; `mcptape record` serves the same dashboard while it records (--dashboard ADDR). Or record into another directory with --data", dir, a.PID, at)
	}
	return fmt.Errorf("%s is in use by another mcptape recording (pid %d); stop it first, or use another directory with --data", dir, a.PID)
}

// dashboardBase is a dashboard's URL without its token, for a message.
func dashboardBase(u string) string {
	base, _, _ := strings.Cut(u, "?")
	return base
}

// openedStore is a store opened for reading.
type openedStore interface {
	capture.Reader
	Close() error
}

// repairStale cleans up after a recorder that was killed, in a store this
// process now holds: sessions it left open are recounted and marked
// incomplete, and its announcement (which names a process that is gone)
// is removed.
func repairStale(dir string, st *badgerstore.Store) error {
	if _, err := remotestore.RemoveStale(dir); err != nil {
		return fmt.Errorf("removing the stale %s: %w", remotestore.AnnouncementFile, err)
	}
	if _, err := st.RepairOpenSessions(context.Background()); err != nil {
		return fmt.Errorf("repairing the sessions a killed recorder left open in %s: %w", dir, err)
	}
	return nil
}

// openRead opens the store for reading: directly and read-only when no
// process holds it, else through the API of the recorder that does.
func openRead(ctx context.Context, dir string) (openedStore, error) {
	if err := noStore(dir); err != nil {
		return nil, err
	}
	if c, _, err := remotestore.Discover(ctx, dir); err == nil {
		return c, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); errors.Is(err, fs.ErrNotExist) {
		// No store yet: what wraps recorded may be waiting in spools.
		return withSpools(ctx, memstore.New(), dir)
	}
	// Read-only: a read command never writes, and so works on a full disk.
	st, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	if err == nil {
		s, err := withSpools(ctx, st, dir)
		if err != nil {
			st.Close()
			return nil, err
		}
		return s, nil
	}
	if errors.Is(err, badgerstore.ErrUnclean) {
		return nil, fmt.Errorf("%s: %w: the mcptape that recorded into it was killed (or the machine went down). "+
			"Reading it first needs a repair, which writes, and this command only reads: open it once with `mcptape dashboard --data %s` "+
			"or `mcptape record --data %s …`, which repair it, then try again", dir, badgerstore.ErrUnclean, dir, dir)
	}
	if errors.Is(err, badgerstore.ErrLocked) {
		if _, _, derr := remotestore.Discover(ctx, dir); derr != nil && !errors.Is(derr, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s is locked by another process, and %v", dir, derr)
		}
		return nil, fmt.Errorf("%s is locked by another process that offers no API (an older mcptape, or a crashed one still running?); stop it, then try again", dir)
	}
	return nil, notOpening(dir, err)
}

// noStore says why dir holds no store, or nil when it holds one. Reading
// commands check it first, so they never create a store (Badger would, in
// any directory it opens).
func noStore(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no store at %s (the directory does not exist): nothing was recorded there yet. %s", dir, firstSteps(dir))
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a store: --data takes the directory a recording wrote", dir)
	}
	// Every Badger directory has a MANIFEST, from the moment it is created;
	// before any owner ran, what wraps recorded waits in spools.
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); errors.Is(err, fs.ErrNotExist) {
		if files, _ := spool.Files(dir); len(files) > 0 {
			return nil
		}
		return fmt.Errorf("no store at %s (the directory holds no mcptape recordings); give --data the directory `mcptape record` or `mcptape wrap` wrote. %s", dir, firstSteps(dir))
	}
	return nil
}

// firstSteps says how to record into dir: attach for a client's stdio
// servers (Claude Desktop and the IDEs launch those), record for an HTTP
// server, or the demo.
func firstSteps(dir string) string {
	data := ""
	if dir != defaultDataDir() {
		data = " --data " + shellWord(dir)
	}
	return fmt.Sprintf("To record a client's servers (Claude Desktop, Claude Code, Cursor, VS Code): `mcptape attach CLIENT --all%s` "+
		"(`mcptape clients` lists them), then restart the client; for an HTTP server: `mcptape record%s --upstream URL`; or try `mcptape demo`", data, data)
}

// pseudonymKey is the per-store secret that keys session-id pseudonyms, so
// they are stable across restarts but not guessable. Several processes may
// ask at once (wraps started together): the first to link its key in place
// wins, and the others read that one.
func pseudonymKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, "pseudonym.key")
	if b, err := os.ReadFile(path); err == nil && len(b) >= 16 {
		return b, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".pseudonym-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("writing %s: %w", path, werr)
	}
	if err := os.Link(tmp.Name(), path); err == nil {
		return b, nil
	}
	// Someone else's key is in place (or linking is not possible here).
	if got, err := os.ReadFile(path); err == nil && len(got) >= 16 {
		return got, nil
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return b, nil
}
