package badgerstore

import (
	"os"
	"sync"
)

// blobCache keeps blob files from filling the page cache. A recorder writes
// every large result it forwards; left in the page cache, those pages are
// new memory for every blob (on a virtual machine, memory the host backs on
// first touch), which cost about ten times the copy itself. So once a blob
// is written its write-back is started, and once that is done its cached
// pages are dropped, in the background: the next blob reuses pages already
// touched. Reads of a blob come back from disk. On systems without the calls
// (dropSupported) a store has none, and a blob file is just closed.
type blobCache struct {
	ch   chan *os.File
	done sync.WaitGroup
}

// blobCacheDepth is how many written blobs may wait for their write-back
// before the writer waits with them: enough for a burst of large results,
// few enough that a slow disk slows the recorder down rather than leaving
// the page cache to grow.
const blobCacheDepth = 8

// newBlobCache starts a blobCache, or returns nil where pages cannot be
// dropped.
func newBlobCache() *blobCache {
	if !dropSupported {
		return nil
	}
	c := &blobCache{ch: make(chan *os.File, blobCacheDepth)}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for f := range c.ch {
			dropCached(f)
			_ = f.Close()
		}
	}()
	return c
}

// written takes f, a blob just written, and closes it. Its write-back is
// started and waited for by the goroutine, off the writer's path.
func (c *blobCache) written(f *os.File) {
	if c == nil {
		_ = f.Close()
		return
	}
	select {
	case c.ch <- f:
	default:
		dropCached(f)
		_ = f.Close()
	}
}

// close drops the blobs still waiting and stops the goroutine.
func (c *blobCache) close() {
	if c == nil {
		return
	}
	close(c.ch)
	c.done.Wait()
}
