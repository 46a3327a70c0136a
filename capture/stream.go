package capture

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptape/mcptape/protocol"
)

// StreamInfo describes a message-framed leg: one conversation whose
// transport frames the messages itself (a stdio server's newline-delimited
// stdin and stdout), as opposed to HTTP, where the recorder sees exchanges.
type StreamInfo struct {
	// Name names the server (`wrap --name`); it becomes the session's
	// Route.
	Name string
	// Leg is how the stream reached the recorder. The zero value,
	// LegReverse, is an HTTP leg and never a stream: it means LegStdio.
	Leg Leg
	// Endpoint is what the client talks to, shown as the exchange's URL
	// (a URL for a stream over the network). "" shows Command's line.
	Endpoint string
	// Command is the process as launched, for a leg that runs the server
	// (a wrap); its zero value (no Args) records none. The recorder
	// redacts it (an argument or an environment value that looks like a
	// secret) before storing it, and scrubs those secrets from every
	// message too.
	Command Command
}

// leg is the stream's leg, LegStdio for the zero value.
func (i *StreamInfo) leg() Leg {
	if i.Leg == LegReverse {
		return LegStdio
	}
	return i.Leg
}

// Stream reports the traffic of one message-framed conversation to the
// recorder: it is one session with one exchange that lasts as long as the
// conversation. Each side writes its frames through a [FrameWriter]
// (Writer and StderrWriter), or whole lines with Line and Stderr.
//
// Recording never holds the traffic up. The frames each Flush hands over
// travel as one event, so a burst costs the recorder's queue its bytes, not
// an event per line; when the queue is full, they wait in a backlog file
// (RecorderOptions.SpillDir) and reach the recorder in order as it catches
// up, so that a burst a pipe carries in a second is recorded whole. A frame
// longer than streamSpillAt is kept in a file too, not in memory, so the
// memory a stream costs does not follow its longest line. Only when
// neither memory nor disk can take a frame is the session cut (recorded
// no further, marked incomplete, every frame not recorded counted).
type Stream struct {
	r    *Recorder
	id   uint64
	info StreamInfo

	mu      sync.Mutex // orders hand-offs: one block at a time reaches the queue or the backlog
	backlog *streamBacklog
	broken  bool
	closed  bool         // Close has handed over the writers' last frames
	lost    atomic.Int64 // frames not recorded
	ended   atomic.Bool

	wmu     sync.Mutex
	writers [3]*FrameWriter // client→server, server→client, stderr
}

// OpenStream starts recording a stream. It returns nil when the recorder
// is closed; a nil *Stream (and its nil FrameWriters) accept every call
// and do nothing.
func (r *Recorder) OpenStream(info *StreamInfo) *Stream {
	if r == nil || r.closing.Load() {
		return nil
	}
	s := &Stream{r: r, id: r.nextExchange.Add(1), info: *info}
	i := *info
	r.exchanges.Add(1)
	r.inflight.Add(1)
	ev := event{kind: evStreamOpen, x: s.id, at: r.opts.Now(), stream: &i}
	if !r.send(ev, true) {
		s.broken = true
		r.log.Warn("the recording cannot keep up: this stream is not recorded, its traffic goes on", "session", s.id)
	}
	return s
}

// ID is the stream's exchange id in the store.
func (s *Stream) ID() uint64 {
	if s == nil {
		return 0
	}
	return s.id
}

// Writer returns the writer of the frames one side sends: dir
// ClientToServer for what the client sends (a stdio server's stdin),
// ServerToClient for what the server sends (its stdout). Each side's
// writer is used by one goroutine at a time.
func (s *Stream) Writer(dir protocol.Direction) *FrameWriter {
	if dir == protocol.ClientToServer {
		return s.writer(0, evLine, dir)
	}
	return s.writer(1, evLine, dir)
}

// StderrWriter returns the writer of the server's diagnostic lines (a
// stdio server's standard error): each frame is stored as one message of
// kind stderr, never parsed.
func (s *Stream) StderrWriter() *FrameWriter {
	return s.writer(2, evStderr, protocol.ServerToClient)
}

func (s *Stream) writer(i int, kind evKind, dir protocol.Direction) *FrameWriter {
	if s == nil {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.writers[i] == nil {
		s.writers[i] = &FrameWriter{s: s, kind: kind, dir: dir}
	}
	return s.writers[i]
}

// Line reports one whole line a side wrote, without its newline: dir
// ClientToServer for the server's stdin, ServerToClient for its stdout.
func (s *Stream) Line(dir protocol.Direction, line []byte) {
	w := s.Writer(dir)
	w.Write(line)
	w.End()
	w.Flush()
}

// Stderr reports one line the server wrote to its standard error.
func (s *Stream) Stderr(line []byte) {
	w := s.StderrWriter()
	w.Write(line)
	w.End()
	w.Flush()
}

// Drain waits until the frames waiting in the stream's backlog have
// reached the recorder, up to ctx. Call it before Close, which counts what
// still waits as lost.
func (s *Stream) Drain(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	b := s.backlog
	s.mu.Unlock()
	if b == nil {
		return nil
	}
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the stream: exit says how it ended ("exited with code 3"),
// "" when it is not known. What its writers hold unflushed is handed over
// first; frames still in the backlog (see Drain) are counted as lost.
func (s *Stream) Close(exit string) {
	if s == nil || s.ended.Swap(true) {
		return
	}
	s.wmu.Lock()
	ws := s.writers
	s.wmu.Unlock()
	for _, w := range ws {
		w.Flush()
	}
	s.mu.Lock()
	s.closed = true
	b := s.backlog
	s.mu.Unlock()
	if b != nil {
		b.stop() // what it still holds is counted as lost
	}
	s.mu.Lock()
	broken := s.broken
	s.mu.Unlock()
	ev := event{kind: evEnd, x: s.id, at: s.r.opts.Now(), errText: exit, broken: broken, lost: s.lost.Load()}
	// The end says how the conversation ended: worth waiting for room
	// longer than a frame is.
	for deadline := time.Now().Add(endWait); !s.r.send(ev, true); {
		if s.r.closing.Load() || time.Now().After(deadline) {
			s.r.log.Warn("the recording cannot keep up: the end of this stream was not recorded", "session", s.id)
			break
		}
	}
	s.r.inflight.Add(-1)
}

// handOff queues a block of frames for the recorder: straight into its
// queue when there is room and no backlog waits, else into the backlog.
func (s *Stream) handOff(b *streamBlock) {
	if len(b.frames) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken || s.closed {
		s.drop(b)
		return
	}
	if s.backlog == nil {
		ev := event{kind: evLine, x: s.id, block: b, weight: b.weight()}
		if s.r.send(ev, false) {
			return
		}
		if s.backlog = newStreamBacklog(s); s.backlog == nil {
			// No disk to wait on: wait for room as any leg does.
			if s.r.send(ev, true) {
				return
			}
			s.cut(b)
			return
		}
	}
	if err := s.backlog.push(b); err != nil {
		s.r.log.Warn("the stream's backlog cannot take more", LogKeyError, err)
		s.cut(b)
	}
}

// cut stops recording the stream: a record with a hole in the middle would
// mislead, so what follows is not recorded either, but every frame is
// counted.
func (s *Stream) cut(b *streamBlock) {
	if !s.broken && !s.r.closing.Load() {
		s.r.log.Warn("the recording cannot keep up: this stream is recorded no further, its traffic goes on", "session", s.id)
	}
	s.broken = true
	s.drop(b)
}

func (s *Stream) drop(b *streamBlock) {
	s.lost.Add(int64(len(b.frames)))
	s.r.dropped.Add(int64(len(b.frames)))
	b.release()
}

// endWait bounds how long Close waits for room for the stream's end.
const endWait = 5 * time.Second

// streamSpillAt is the frame length from which a FrameWriter keeps the
// frame in a file (RecorderOptions.SpillDir) instead of memory.
const streamSpillAt = 1 << 20

// blockFlushAt is how many bytes of frames a FrameWriter gathers before it
// hands them over by itself.
const blockFlushAt = 256 << 10

// FrameWriter collects the frames one side of a [Stream] sends. Write adds
// to the frame in progress, End completes it, Flush hands the completed
// frames to the recorder. A leg that reads its transport in chunks writes
// each chunk's frames and flushes once per chunk, before it forwards the
// chunk: the record then keeps the order in which things happened, and a
// burst travels as a few large events. A FrameWriter is used by one
// goroutine at a time (and by Close); a nil one does nothing.
type FrameWriter struct {
	// mu lets Close flush a side whose reader may still run (a stdio
	// client's stdin, read after its server has gone); uncontended
	// otherwise.
	mu    sync.Mutex
	s     *Stream
	kind  evKind
	dir   protocol.Direction
	cur   []byte     // the frame in progress, until it spills
	file  *frameFile // the frame in progress, once it spilled
	total int64      // the frame's length on the wire
	block *streamBlock
}

// Write adds p to the frame in progress. The frame is kept up to the
// recorder's MaxMessageSize (the rest is counted, and the message stored
// cut). It never fails.
func (w *FrameWriter) Write(p []byte) (int, error) {
	if w == nil || len(p) == 0 {
		return len(p), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	limit := int64(w.s.r.opts.MaxMessageSize)
	kept := int64(len(w.cur))
	if w.file != nil {
		kept = w.file.n
	}
	w.total += int64(n)
	if room := limit - kept; int64(len(p)) > room {
		p = p[:max(room, 0)]
	}
	if len(p) == 0 {
		return n, nil
	}
	if w.file == nil && len(w.cur)+len(p) > streamSpillAt && w.s.r.opts.SpillDir != "" {
		if f, err := newFrameFile(w.s.r.opts.SpillDir); err == nil {
			if _, err := f.Write(w.cur); err == nil {
				w.file, w.cur = f, nil
			} else {
				f.Close()
			}
		}
	}
	if w.file != nil {
		if _, err := w.file.Write(p); err != nil {
			// The disk refuses: what was spilled is kept, the rest is
			// counted in total, and the message stored cut.
			w.file.failed = true
		}
		return n, nil
	}
	w.cur = append(w.cur, p...)
	return n, nil
}

// End completes the frame in progress (a stdio leg's newline); an empty
// frame is a message too (an empty line).
func (w *FrameWriter) End() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.block == nil {
		w.block = &streamBlock{}
	}
	f := streamFrame{kind: w.kind, dir: w.dir, at: w.s.r.opts.Now(), total: w.total}
	if w.file != nil {
		f.file = w.file
		w.file = nil
	} else {
		f.off, f.n = len(w.block.data), len(w.cur)
		w.block.data = append(w.block.data, w.cur...)
	}
	w.block.frames = append(w.block.frames, f)
	if cap(w.cur) > 64<<10 {
		w.cur = nil // a long line's memory goes with it
	} else {
		w.cur = w.cur[:0]
	}
	w.total = 0
	if len(w.block.data) >= blockFlushAt {
		w.flush()
	}
}

// Flush hands the frames completed since the last Flush to the recorder
// (queued, never waited for).
func (w *FrameWriter) Flush() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flush()
}

func (w *FrameWriter) flush() {
	if w.block == nil || len(w.block.frames) == 0 {
		return
	}
	b := w.block
	w.block = nil
	w.s.handOff(b)
}

// Pending reports whether a frame is in progress: bytes written since the
// last End.
func (w *FrameWriter) Pending() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total > 0
}

// streamBlock is frames a FrameWriter handed over at once: one event.
type streamBlock struct {
	frames []streamFrame
	data   []byte // the frames' bytes held in memory, one after the other
}

// streamFrame is one frame of a block: its bytes are data[off:off+n], or
// file's.
type streamFrame struct {
	kind   evKind // evLine or evStderr
	dir    protocol.Direction
	at     time.Time
	off, n int
	file   *frameFile
	total  int64 // the frame's length on the wire, all of it
}

// frameWeight is what a frame costs the recorder's queue beyond its bytes.
const frameWeight = 64

func (b *streamBlock) weight() int64 {
	return int64(len(b.data)) + int64(len(b.frames))*frameWeight
}

// release closes the files of frames that will not be recorded.
func (b *streamBlock) release() {
	if b == nil {
		return
	}
	for _, f := range b.frames {
		if f.file != nil {
			f.file.Close()
		}
	}
}
