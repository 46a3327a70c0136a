package badgerstore

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"github.com/mcptape/mcptape/capture"
)

var _ capture.Sizer = (*Store)(nil)

// sizeTTL is how long Size reuses a measurement: metrics scrapes ask every
// few seconds, and the directory changes size only as Badger flushes and
// compacts.
const sizeTTL = 15 * time.Second

// reclaimPatience is how long deleted sessions' space counts as on its way
// back: Badger gives back deleted records' space as it compacts, which
// may take a while, or, for records it never compacts again, not at all.
const reclaimPatience = 10 * time.Minute

// sizeCache holds the latest measurement of the store's directory, and
// for the size bound, estimates of what changed since.
type sizeCache struct {
	mu   sync.Mutex
	at   time.Time
	size int64
	err  error
	// since estimates the bytes written since the measurement; reclaim
	// the bytes of deleted sessions that the directory has not yet been
	// seen to give back (since reclaimAt).
	since     int64
	reclaim   int64
	reclaimAt time.Time
}

// Size is the store's size on disk in bytes: the space every file in its
// directory takes (Badger's tables and value log, large raw bytes in
// blobs/; the allocated blocks on Unix, the apparent size elsewhere),
// measured at most every 15 seconds. A store in memory has none:
// Size returns an error wrapping errors.ErrUnsupported.
func (s *Store) Size() (int64, error) { return s.measureSize(false) }

// measureSize is Size; force measures even when a measurement is fresh.
func (s *Store) measureSize(force bool) (int64, error) {
	if s.blobs == "" {
		return 0, errors.ErrUnsupported
	}
	c := &s.size
	c.mu.Lock()
	defer c.mu.Unlock()
	if !force && !c.at.IsZero() && time.Since(c.at) < sizeTTL {
		return c.size, c.err
	}
	var n int64
	err := filepath.WalkDir(s.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a table compacted away while we walked
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += diskUsage(fi)
			}
		}
		return nil
	})
	if err == nil && c.reclaim > 0 {
		// What the directory gave back beyond the prediction is deleted
		// sessions' space coming back.
		if back := c.size + c.since - n; back > 0 {
			c.reclaim = max(0, c.reclaim-back)
		}
		if time.Since(c.reclaimAt) > reclaimPatience {
			c.reclaim = 0
		}
	}
	c.at, c.size, c.err, c.since = time.Now(), n, err, 0
	return n, err
}

// effectiveSize is the size the size bound goes by: the latest
// measurement, plus what was written since, less what deleted sessions
// are yet to give back.
func (s *Store) effectiveSize() int64 {
	n, err := s.Size()
	if err != nil {
		return 0
	}
	c := &s.size
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(0, n+c.since-c.reclaim)
}

// wrote notes bytes written since the latest measurement.
func (c *sizeCache) wrote(n int64) {
	c.mu.Lock()
	c.since += n
	c.mu.Unlock()
}

// deleted notes the bytes of a deleted session, which the directory gives
// back as Badger compacts.
func (c *sizeCache) deleted(n int64) {
	c.mu.Lock()
	c.reclaim += n
	c.reclaimAt = time.Now()
	c.mu.Unlock()
}
