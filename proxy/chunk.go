package proxy

import (
	"errors"
	"io"
	"net/http/httputil"
)

// newChunked decodes a chunked request body.
func newChunked(r io.Reader) io.Reader { return httputil.NewChunkedReader(r) }

// errChunked is a response body whose chunked framing is malformed.
var errChunked = errors.New("malformed chunked encoding in the response")

// chunkScanner follows the chunked framing of a response body as its raw
// bytes stream by (the engine forwards them unchanged): it hands out the
// data, and says where the body ends.
type chunkScanner struct {
	state  uint8
	size   int64
	digits int
}

const (
	csSize        = iota // hex digits of a chunk size
	csExt                // a chunk extension, up to the line end
	csSizeLF             // after CR of a size line
	csData               // chunk data
	csDataCR             // CR after chunk data
	csDataLF             // LF after chunk data
	csTrailer            // at the start of a trailer line
	csTrailerLine        // inside a trailer line
	csEndLF              // LF of the blank line that ends the body
	csDone
)

// scan consumes p. It calls data with each run of body data, and returns how
// many bytes of p belong to the body and whether the body ended.
func (s *chunkScanner) scan(p []byte, data func([]byte)) (used int, done bool, err error) {
	i := 0
	for i < len(p) {
		c := p[i]
		switch s.state {
		case csSize:
			switch {
			case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
				if s.digits++; s.digits > 15 {
					return i, false, errChunked
				}
				s.size = s.size<<4 | int64(hexVal(c))
			case c == ';' || c == ' ' || c == '\t':
				s.state = csExt
			case c == '\r':
				s.state = csSizeLF
			case c == '\n':
				s.sizeDone()
			default:
				return i, false, errChunked
			}
			i++
		case csExt:
			if c == '\n' {
				s.sizeDone()
			} else if c == '\r' {
				s.state = csSizeLF
			}
			i++
		case csSizeLF:
			if c != '\n' {
				return i, false, errChunked
			}
			s.sizeDone()
			i++
		case csData:
			n := min(int64(len(p)-i), s.size)
			data(p[i : i+int(n)])
			i += int(n)
			if s.size -= n; s.size == 0 {
				s.state = csDataCR
			}
		case csDataCR:
			switch c {
			case '\r':
				s.state = csDataLF
			case '\n':
				s.state = csSize
			default:
				return i, false, errChunked
			}
			i++
		case csDataLF:
			if c != '\n' {
				return i, false, errChunked
			}
			s.state = csSize
			i++
		case csTrailer:
			switch c {
			case '\r':
				s.state = csEndLF
			case '\n':
				s.state = csDone
				return i + 1, true, nil
			default:
				s.state = csTrailerLine
			}
			i++
		case csTrailerLine:
			if c == '\n' {
				s.state = csTrailer
			}
			i++
		case csEndLF:
			if c != '\n' {
				return i, false, errChunked
			}
			s.state = csDone
			return i + 1, true, nil
		case csDone:
			return i, true, nil
		}
	}
	return i, s.state == csDone, nil
}

func (s *chunkScanner) sizeDone() {
	if s.digits == 0 {
		s.state = csSize // tolerate a stray blank line
		return
	}
	s.digits = 0
	if s.size == 0 {
		s.state = csTrailer
		return
	}
	s.state = csData
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
