package capture

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/mcptape/mcptape/protocol"
)

// spillFile is a protocol.SpillFile on disk. Where the system allows it,
// the file is removed as soon as it is created (it stays readable through
// the open handle, and a killed recorder leaves nothing behind); elsewhere
// at Close.
type spillFile struct {
	*os.File
	removed bool
}

// spill makes a spill file for an SSE parser (RecorderOptions.SpillDir).
func (p *pipeline) spill() (protocol.SpillFile, error) {
	f, err := os.CreateTemp(p.o.SpillDir, "sse-*")
	if err != nil {
		return nil, err
	}
	sf := &spillFile{File: f}
	if runtime.GOOS != "windows" && os.Remove(f.Name()) == nil {
		sf.removed = true
	}
	return sf, nil
}

func (s *spillFile) Close() error {
	err := s.File.Close()
	if !s.removed {
		_ = os.Remove(s.Name())
	}
	return err
}

// prepareSpillDir creates dir, removing spill files a killed recorder left
// in it (on systems where they outlive their process).
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
