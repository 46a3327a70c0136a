package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// maxBacklog bounds the bytes one stream's backlog holds on disk.
const maxBacklog = 1 << 30

// streamBacklog is where a Stream's frames wait, in order, while the
// recorder's queue is full: a file of its own in RecorderOptions.SpillDir,
// removed from the folder as soon as it is made (the process holds it open;
// nothing is left behind by a process that is killed). A drainer goroutine
// reads the frames back and hands them to the recorder as it catches up;
// once everything written is handed over, the backlog goes and the stream
// queues directly again.
type streamBacklog struct {
	s *Stream
	f *os.File
	// Under s.mu: the bytes written and read; the spilled frames' files,
	// in order; the frames pushed and handed over.
	w, r         int64
	files        []*frameFile
	pushed, sent int64

	wake chan struct{}
	quit chan struct{}
	done chan struct{} // closed when the drainer has ended
}

// newStreamBacklog starts a backlog for s, with s.mu held; nil when the
// recorder has no spill directory or the file cannot be made.
func newStreamBacklog(s *Stream) *streamBacklog {
	dir := s.r.opts.SpillDir
	if dir == "" {
		return nil
	}
	f, err := tempUnlinked(dir, ".backlog-*")
	if err != nil {
		s.r.log.Warn("the stream's backlog cannot be made", LogKeyError, err)
		return nil
	}
	b := &streamBacklog{s: s, f: f, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go b.drain()
	return b
}

// tempUnlinked makes a file in dir and removes its name at once where the
// system allows it (Unix): the file lives as long as it is open.
func tempUnlinked(dir, pattern string) (*os.File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	return f, nil
}

// frameHeader is a backlog record's header: kind, direction, time (Unix
// nanoseconds), the frame's length on the wire, and the length of the
// bytes that follow (fileFrame for a frame in a file of its own).
const frameHeader = 1 + 1 + 8 + 8 + 4

const fileFrame = ^uint32(0)

// push appends a block's frames, with s.mu held.
func (b *streamBacklog) push(blk *streamBlock) error {
	buf := make([]byte, 0, len(blk.data)+len(blk.frames)*frameHeader)
	for _, f := range blk.frames {
		var h [frameHeader]byte
		h[0], h[1] = byte(f.kind), byte(f.dir)
		binary.BigEndian.PutUint64(h[2:], uint64(f.at.UnixNano()))
		binary.BigEndian.PutUint64(h[10:], uint64(f.total))
		n := uint32(f.n)
		if f.file != nil {
			n = fileFrame
		}
		binary.BigEndian.PutUint32(h[18:], n)
		buf = append(buf, h[:]...)
		if f.file == nil {
			buf = append(buf, blk.data[f.off:f.off+f.n]...)
		}
	}
	if b.w+int64(len(buf)) > maxBacklog {
		return fmt.Errorf("the backlog holds %d MiB already", maxBacklog>>20)
	}
	if _, err := b.f.WriteAt(buf, b.w); err != nil {
		return err
	}
	b.w += int64(len(buf))
	for _, f := range blk.frames {
		if f.file != nil {
			b.files = append(b.files, f.file)
		}
	}
	b.pushed += int64(len(blk.frames))
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

// backlogRead is how much of the backlog the drainer reads at a time: a
// block of frames for the recorder.
const backlogRead = 256 << 10

func (b *streamBacklog) drain() {
	defer close(b.done)
	defer b.f.Close()
	s := b.s
	buf := make([]byte, 0, backlogRead)
	for {
		s.mu.Lock()
		from, to := b.r, b.w
		if from == to {
			// Caught up: the stream queues directly again.
			if s.backlog == b {
				s.backlog = nil
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		blk, used, err := b.read(buf, from, to)
		if err != nil {
			s.r.log.Warn("reading the stream's backlog back", LogKeyError, err)
			b.abandon()
			return
		}
		ev := event{kind: evLine, x: s.id, block: blk, weight: blk.weight()}
		for !s.r.send(ev, true) {
			select {
			case <-b.quit:
				blk.release()
				b.abandon()
				return
			default:
			}
			if s.r.closing.Load() {
				blk.release()
				b.abandon()
				return
			}
		}
		s.mu.Lock()
		b.r += used
		b.sent += int64(len(blk.frames))
		s.mu.Unlock()
		select {
		case <-b.quit:
			b.abandon()
			return
		default:
		}
	}
}

// read decodes the whole records of the backlog from offset from (up to
// to, and about backlogRead bytes) into a block, returning the bytes used.
func (b *streamBacklog) read(buf []byte, from, to int64) (*streamBlock, int64, error) {
	want := min(to-from, backlogRead)
	if want < frameHeader {
		want = min(to-from, frameHeader)
	}
	buf = buf[:want]
	if _, err := b.f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	blk := &streamBlock{}
	used := 0
	for len(buf)-used >= frameHeader {
		h := buf[used : used+frameHeader]
		n := binary.BigEndian.Uint32(h[18:])
		size := frameHeader
		if n != fileFrame {
			size += int(n)
		}
		if used+size > len(buf) {
			if used == 0 {
				// One frame larger than the read: read exactly it.
				big := make([]byte, size)
				if _, err := b.f.ReadAt(big, from); err != nil {
					return nil, 0, err
				}
				buf, used = big, 0
				continue
			}
			break
		}
		f := streamFrame{kind: evKind(h[0]), dir: protocol.Direction(h[1]),
			at: time.Unix(0, int64(binary.BigEndian.Uint64(h[2:]))), total: int64(binary.BigEndian.Uint64(h[10:]))}
		if n == fileFrame {
			b.s.mu.Lock()
			f.file, b.files = b.files[0], b.files[1:]
			b.s.mu.Unlock()
		} else {
			f.off, f.n = len(blk.data), int(n)
			blk.data = append(blk.data, buf[used+frameHeader:used+size]...)
		}
		blk.frames = append(blk.frames, f)
		used += size
	}
	return blk, int64(used), nil
}

// abandon counts what the backlog still holds as lost and closes its
// files: the recorder is closing, or the stream was closed before it
// drained.
func (b *streamBacklog) abandon() {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if left := b.pushed - b.sent; left > 0 {
		s.lost.Add(left)
		s.r.dropped.Add(left)
		s.broken = true
	}
	for _, f := range b.files {
		f.Close()
	}
	b.files = nil
	b.sent = b.pushed
	if s.backlog == b {
		s.backlog = nil
	}
}

// stop ends the drainer, counting what it did not hand over as lost.
func (b *streamBacklog) stop() {
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	<-b.done
}
