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
	ch   chan dropJob
	done sync.WaitGroup
}

// dropJob is a blob's pages to drop: n bytes of f from off (n == 0: to its
// end); unless keep is set, f is closed after.
type dropJob struct {
	f      *os.File
	off, n int64
	keep   bool
}

func (j dropJob) do() {
	dropCached(j.f, j.off, j.n)
	if !j.keep {
		_ = j.f.Close()
	}
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
	c := &blobCache{ch: make(chan dropJob, blobCacheDepth)}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for j := range c.ch {
			j.do()
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
	c.queue(dropJob{f: f})
}

// writtenAt is written for n bytes of a pack from off: f stays open.
func (c *blobCache) writtenAt(f *os.File, off, n int64) {
	c.queue(dropJob{f: f, off: off, n: n, keep: true})
}

// retired closes f, a pack that takes no more blobs, once the drops queued
// before it are done.
func (c *blobCache) retired(f *os.File) {
	c.ch <- dropJob{f: f}
}

func (c *blobCache) queue(j dropJob) {
	select {
	case c.ch <- j:
	default:
		j.do()
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
