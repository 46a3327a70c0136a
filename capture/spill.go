package capture

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/mcptape/mcptape/protocol"
)

// spillFile is a protocol.SpillFile on disk, removed at Close. One that
// holds exactly a message (protocol.Event.TakeSpill) goes on with it as
// its Message.File, which the store may move into place as the message's
// blob: a large result is then written to disk once, not twice. A killed
// recorder's files are removed at the next start (prepareSpillDir).
type spillFile struct {
	*os.File
	n, reserved int64 // bytes written; disk blocks allocated ahead of them
	moved       bool
}

// Write appends b, allocating the file's disk blocks ahead of it first
// (see reserve): as many again as the file holds, from 1 MiB to 8 MiB at a
// time. What is allocated past the end is given back when the file is
// moved (MoveTo) or removed (Close).
func (s *spillFile) Write(b []byte) (int, error) {
	if end := s.n + int64(len(b)); end > s.reserved {
		s.reserved = end + min(max(end, 1<<20), 8<<20)
		reserve(s.File, s.n, s.reserved-s.n)
	}
	n, err := s.File.Write(b)
	s.n += int64(n)
	return n, err
}

// spill makes a spill file for the exchange's SSE parser
// (RecorderOptions.SpillDir).
func (xs *exchange) spill() (protocol.SpillFile, error) {
	f, err := os.CreateTemp(xs.out.o.SpillDir, "sse-*")
	if err != nil {
		return nil, err
	}
	return &spillFile{File: f}, nil
}

// MoveTo implements RawFile.
func (s *spillFile) MoveTo(path string) (*os.File, error) {
	if s.moved {
		return nil, errors.New("spill file moved already")
	}
	if s.reserved > s.n {
		// Truncating to its own size frees the blocks allocated past
		// the file's end.
		if err := s.File.Truncate(s.n); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(s.Name(), path); err != nil {
		return nil, err
	}
	s.moved = true
	return s.File, nil
}

func (s *spillFile) Close() error {
	if s.moved {
		return nil // the file is its new owner's
	}
	err := s.File.Close()
	_ = os.Remove(s.Name())
	return err
}

// prepareSpillDir creates dir, removing spill files a killed recorder left
// in it.
func prepareSpillDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "sse-*"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	return nil
}
