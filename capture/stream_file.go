package capture

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
)

// RawReader holds a message's raw bytes on disk in place of Message.Raw: a
// long frame of a [Stream], which the recorder never holds in memory whole.
// It is a Message's File; Message.Raw is then nil and Message.Size its
// length.
type RawReader interface {
	RawFile
	io.ReaderAt
	// Len is the number of raw bytes.
	Len() int64
}

// RawReaderTaker is a Writer that takes messages whose raw bytes are in a
// RawReader (Message.File, with Raw nil), reading them itself. A recorder
// whose Writer is not one reads such bytes back into Raw before writing.
type RawReaderTaker interface {
	TakesRawReaders()
}

// frameFile is a long frame kept on disk (see streamSpillAt), in a file
// removed from its folder when it was made: nothing is left behind.
type frameFile struct {
	f      *os.File
	n      int64
	failed bool // a write failed: the file holds less than was written
}

var _ RawReader = (*frameFile)(nil)

func newFrameFile(dir string) (*frameFile, error) {
	f, err := tempUnlinked(dir, ".frame-*")
	if err != nil {
		return nil, err
	}
	return &frameFile{f: f}, nil
}

func (f *frameFile) Write(p []byte) (int, error) {
	if f.failed {
		return 0, errors.New("an earlier write failed")
	}
	n, err := f.f.Write(p)
	f.n += int64(n)
	if err != nil {
		f.failed = true
	}
	return n, err
}

// ReadAt implements io.ReaderAt.
func (f *frameFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

// Len implements RawReader.
func (f *frameFile) Len() int64 { return f.n }

// MoveTo implements RawFile: the file has no name to move.
func (f *frameFile) MoveTo(string) (*os.File, error) {
	return nil, errors.New("a stream frame's file cannot be moved")
}

// Close implements RawFile.
func (f *frameFile) Close() error {
	name := f.f.Name()
	err := f.f.Close()
	_ = os.Remove(name) // where it could not be removed when made
	return err
}

// head returns up to n bytes from the start of the file.
func (f *frameFile) head(n int) []byte {
	b := make([]byte, min(int64(n), f.n))
	k, _ := f.f.ReadAt(b, 0)
	return b[:k]
}

// readAll reads the file back into memory.
func (f *frameFile) readAll() ([]byte, error) {
	b := make([]byte, f.n)
	if _, err := f.f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// scrubFile is redactor.body for a frame on disk: it copies f into a new
// file with every learned secret replaced, reading a piece at a time.
// It returns f itself when nothing matched.
func (r *redactor) scrubFile(f *frameFile, dir string) (*frameFile, bool, error) {
	if r.opts.Disabled || len(r.learned) == 0 {
		return f, false, nil
	}
	longest := 0
	for _, s := range r.learned {
		longest = max(longest, len(s))
	}
	var out *frameFile
	w := func(b []byte) error {
		if out == nil {
			return nil
		}
		_, err := out.Write(b)
		return err
	}
	const piece = 256 << 10
	buf := make([]byte, 0, piece+longest)
	var off int64
	changed := false
	for {
		n, err := f.f.ReadAt(buf[len(buf):cap(buf)], off)
		off += int64(n)
		b := buf[:len(buf)+n]
		final := err != nil || off >= f.n
		safe := len(b)
		if !final {
			safe = max(len(b)-(longest-1), 0)
		}
		i := 0
		for i < safe {
			j, s := -1, []byte(nil)
			for _, l := range r.learned {
				if k := bytes.Index(b[i:], l); k >= 0 && (j < 0 || i+k < j) {
					j, s = i+k, l
				}
			}
			if j < 0 || j >= safe {
				break
			}
			if out == nil {
				// The first secret: copy what came before it.
				nf, err := newFrameFile(dir)
				if err != nil {
					return f, false, err
				}
				out = nf
				if _, err := io.Copy(out, io.NewSectionReader(f.f, 0, off-int64(len(b))+int64(i))); err != nil {
					out.Close()
					return f, false, err
				}
			}
			if err := w(b[i:j]); err != nil {
				out.Close()
				return f, false, err
			}
			if err := w([]byte(Redacted)); err != nil {
				out.Close()
				return f, false, err
			}
			changed = true
			i = j + len(s)
		}
		if final {
			if i < len(b) {
				if err := w(b[i:]); err != nil {
					out.Close()
					return f, false, err
				}
			}
			break
		}
		if i < safe {
			if err := w(b[i:safe]); err != nil {
				out.Close()
				return f, false, err
			}
			i = safe
		}
		rest := copy(buf[:cap(buf)], b[i:])
		buf = buf[:rest]
	}
	if !changed {
		return f, false, nil
	}
	f.Close()
	return out, true, nil
}

// skeletonKeep is the longest value a skeleton keeps as it is.
const skeletonKeep = 4 << 10

// skeletonDepth is how deep a skeleton looks into objects and arrays: the
// members of a message and of its params, result or error.
const skeletonDepth = 2

// maxNesting bounds the nesting of a frame the skeleton scanner accepts,
// as encoding/json does.
const maxNesting = 10000

// errNotJSON is the skeleton scanner's error for a frame that is not one
// JSON value.
var errNotJSON = errors.New("not a JSON value")

// skeleton reads one JSON value from r without holding it in memory, and
// returns its skeleton: the value with every member and element deeper
// than skeletonDepth, or longer than skeletonKeep, replaced by an empty one
// of its type ("", 0, {}, []). A JSON-RPC message's skeleton keeps what
// the recorder classifies and links it by (jsonrpc, id, method, params'
// name and _meta, result's isError, error's code), while a large result's
// content goes. It fails (errNotJSON) for what is not exactly one JSON
// value, as encoding/json would.
func skeleton(r io.Reader) ([]byte, error) {
	sc := &skelScanner{r: bufio.NewReaderSize(r, 64<<10)}
	out, err := sc.value(0)
	if err != nil {
		return nil, err
	}
	if c, err := sc.next(); err == nil || !errors.Is(err, io.EOF) {
		_ = c
		return nil, errNotJSON // something after the value
	}
	return out, nil
}

type skelScanner struct {
	r *bufio.Reader
}

// next returns the next byte that is not white space.
func (sc *skelScanner) next() (byte, error) {
	for {
		c, err := sc.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

// value scans one value at depth, returning its skeleton.
func (sc *skelScanner) value(depth int) ([]byte, error) {
	c, err := sc.next()
	if err != nil {
		return nil, errNotJSON
	}
	if depth < skeletonDepth && (c == '{' || c == '[') {
		return sc.container(c, depth)
	}
	keep := &capped{max: skeletonKeep}
	keep.add(c)
	if err := sc.skip(c, keep); err != nil {
		return nil, err
	}
	if !keep.over {
		return keep.b, nil
	}
	switch c {
	case '{':
		return []byte("{}"), nil
	case '[':
		return []byte("[]"), nil
	case '"':
		return []byte(`""`), nil
	}
	return []byte("0"), nil
}

// container scans an object or array shallow enough to keep its shape.
func (sc *skelScanner) container(open byte, depth int) ([]byte, error) {
	closer := byte('}')
	if open == '[' {
		closer = ']'
	}
	out := []byte{open}
	first := true
	for {
		c, err := sc.next()
		if err != nil {
			return nil, errNotJSON
		}
		if c == closer && first {
			return append(out, closer), nil
		}
		if !first {
			if c == closer {
				return append(out, closer), nil
			}
			if c != ',' {
				return nil, errNotJSON
			}
			out = append(out, ',')
			if c, err = sc.next(); err != nil {
				return nil, errNotJSON
			}
		}
		first = false
		if open == '{' {
			if c != '"' {
				return nil, errNotJSON
			}
			key := &capped{max: skeletonKeep}
			key.add(c)
			if err := sc.skip(c, key); err != nil {
				return nil, err
			}
			if key.over {
				key.b = []byte(`""`) // a key no message has
			}
			if c, err := sc.next(); err != nil || c != ':' {
				return nil, errNotJSON
			}
			out = append(append(out, key.b...), ':')
		} else if err := sc.r.UnreadByte(); err != nil {
			return nil, err
		}
		v, err := sc.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
}

// capped keeps bytes up to max, then only says it is over.
type capped struct {
	b    []byte
	max  int
	over bool
}

func (k *capped) addSlice(b []byte) {
	if k.over {
		return
	}
	if len(k.b)+len(b) > k.max {
		k.over, k.b = true, nil
		return
	}
	k.b = append(k.b, b...)
}

func (k *capped) add(c byte) {
	if k.over {
		return
	}
	if len(k.b) == k.max {
		k.over, k.b = true, nil
		return
	}
	k.b = append(k.b, c)
}

// skip scans the rest of the value that begins with c (already read and
// kept), handing its bytes to keep, with an explicit stack so that nesting
// costs a byte per level.
func (sc *skelScanner) skip(c byte, keep *capped) error {
	var stack []byte // the open brackets
	for {
		// c begins a value.
		ended := true
		switch {
		case c == '{' || c == '[':
			if len(stack) >= maxNesting {
				return errNotJSON
			}
			n, err := sc.nextKeep(keep)
			if err != nil {
				return err
			}
			if n == closing(c) {
				break // empty
			}
			stack = append(stack, c)
			if c == '{' {
				if n, err = sc.member(n, keep); err != nil {
					return err
				}
			}
			c, ended = n, false
		case c == '"':
			if err := sc.str(keep); err != nil {
				return err
			}
		case c == '-' || c >= '0' && c <= '9':
			if err := sc.number(c, keep); err != nil {
				return err
			}
		case c == 't':
			if err := sc.literal("rue", keep); err != nil {
				return err
			}
		case c == 'f':
			if err := sc.literal("alse", keep); err != nil {
				return err
			}
		case c == 'n':
			if err := sc.literal("ull", keep); err != nil {
				return err
			}
		default:
			return errNotJSON
		}
		if !ended {
			continue
		}
		// A value ended: a comma, or the ends of containers.
		for ended {
			if len(stack) == 0 {
				return nil
			}
			top := stack[len(stack)-1]
			n, err := sc.nextKeep(keep)
			if err != nil {
				return err
			}
			switch n {
			case ',':
				if c, err = sc.nextKeep(keep); err != nil {
					return err
				}
				if top == '{' {
					if c, err = sc.member(c, keep); err != nil {
						return err
					}
				}
				ended = false
			case closing(top):
				stack = stack[:len(stack)-1]
			default:
				return errNotJSON
			}
		}
	}
}

// member scans an object member's key, which begins with c, and its colon,
// returning the first byte of its value.
func (sc *skelScanner) member(c byte, keep *capped) (byte, error) {
	if c != '"' {
		return 0, errNotJSON
	}
	if err := sc.str(keep); err != nil {
		return 0, err
	}
	if c, err := sc.nextKeep(keep); err != nil || c != ':' {
		return 0, errNotJSON
	}
	return sc.nextKeep(keep)
}

// nextKeep is next, keeping the byte.
func (sc *skelScanner) nextKeep(keep *capped) (byte, error) {
	c, err := sc.next()
	if err != nil {
		return 0, errNotJSON
	}
	keep.add(c)
	return c, nil
}

func closing(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// str scans the rest of a string, its opening quote read, a buffer at a
// time: a long string is most of a long frame.
func (sc *skelScanner) str(keep *capped) error {
	esc, hexLeft := false, 0
	for {
		b, err := sc.r.ReadSlice('"')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return errNotJSON
		}
		keep.addSlice(b)
		for i, c := range b {
			switch {
			case hexLeft > 0:
				if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
					return errNotJSON
				}
				hexLeft--
			case esc:
				switch c {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					hexLeft = 4
				default:
					return errNotJSON
				}
				esc = false
			case c == '\\':
				esc = true
			case c < 0x20:
				return errNotJSON
			case c == '"':
				if i == len(b)-1 {
					return nil
				}
			}
		}
	}
}

// number scans the rest of a number that began with c.
func (sc *skelScanner) number(c byte, keep *capped) error {
	digits := func(atLeastOne bool) error {
		n := 0
		for {
			d, err := sc.r.ReadByte()
			if err != nil {
				break
			}
			if d < '0' || d > '9' {
				_ = sc.r.UnreadByte()
				break
			}
			keep.add(d)
			n++
		}
		if atLeastOne && n == 0 {
			return errNotJSON
		}
		return nil
	}
	if c == '-' {
		d, err := sc.r.ReadByte()
		if err != nil || d < '0' || d > '9' {
			return errNotJSON
		}
		keep.add(d)
		c = d
	}
	if c != '0' {
		if err := digits(false); err != nil {
			return err
		}
	}
	if d, err := sc.r.ReadByte(); err == nil {
		if d == '.' {
			keep.add(d)
			if err := digits(true); err != nil {
				return err
			}
			d, err = sc.r.ReadByte()
			if err != nil {
				return nil
			}
		}
		if d == 'e' || d == 'E' {
			keep.add(d)
			s, err := sc.r.ReadByte()
			if err != nil {
				return errNotJSON
			}
			if s == '+' || s == '-' {
				keep.add(s)
			} else {
				_ = sc.r.UnreadByte()
			}
			return digits(true)
		}
		_ = sc.r.UnreadByte()
	}
	return nil
}

func (sc *skelScanner) literal(rest string, keep *capped) error {
	for i := range len(rest) {
		c, err := sc.r.ReadByte()
		if err != nil || c != rest[i] {
			return errNotJSON
		}
		keep.add(c)
	}
	return nil
}

// ioSection reads a frame file from its start.
func ioSection(f *frameFile) io.Reader { return io.NewSectionReader(f.f, 0, f.n) }
