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

// sizeCache holds the latest measurement of the store's directory.
type sizeCache struct {
	mu   sync.Mutex
	at   time.Time
	size int64
	err  error
}

// Size is the store's size on disk in bytes: the space every file in its
// directory takes (Badger's tables and value log, large raw bytes in
// blobs/; the allocated blocks on Unix, the apparent size elsewhere),
// measured at most every 15 seconds. A store in memory has none:
// Size returns an error wrapping errors.ErrUnsupported.
func (s *Store) Size() (int64, error) {
	if s.blobs == "" {
		return 0, errors.ErrUnsupported
	}
	c := &s.size
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < sizeTTL {
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
	c.at, c.size, c.err = time.Now(), n, err
	return n, err
}
