package protocol

// SSESplitter cuts a Server-Sent Events stream into its blocks without
// decoding them: each block is its lines up to and including the blank
// line that ends it, as [SSEParser] frames them (a line ends at CRLF, LF
// or CR; a blank line ends a block, and one with nothing before it is a
// block of its own), so the bytes emitted are the stream's, in order,
// none lost. It is for a forwarder that must see whole events before it
// passes them on (a proxy that rewrites or holds one): a blank line that
// ends in CR is emitted at once, not held to see whether LF follows (the
// LF then leads the next block).
//
// Max bounds what it holds: a block that grows past Max bytes is emitted
// in pieces as they arrive (whole false), up to its end. Zero means no
// bound.
type SSESplitter struct {
	Max int

	pend      []byte
	scanned   int  // bytes of pend already scanned
	lineStart bool // the last byte scanned ended a line
	cr        bool // the last byte scanned was CR
	through   bool // passing an oversize block through
	started   bool
}

// Feed scans b and calls emit for each whole block (whole true) and for
// the pieces of one past Max (whole false). What emit gets is only valid
// during the call.
func (s *SSESplitter) Feed(b []byte, emit func(block []byte, whole bool)) {
	if !s.started {
		s.started, s.lineStart = true, true
	}
	s.pend = append(s.pend, b...)
	start := 0 // where the block in progress begins in pend
	for i := s.scanned; i < len(s.pend); i++ {
		c := s.pend[i]
		if s.cr && c == '\n' {
			s.cr = false
			continue // the LF of a CRLF
		}
		s.cr = false
		if c != '\r' && c != '\n' {
			s.lineStart = false
			continue
		}
		s.cr = c == '\r'
		if !s.lineStart {
			s.lineStart = true
			continue
		}
		// A blank line: the block ends here (with the LF of a CRLF, when
		// it has come).
		end := i + 1
		if c == '\r' && end < len(s.pend) && s.pend[end] == '\n' {
			end++
			s.cr = false
		}
		emit(s.pend[start:end], !s.through)
		s.through = false
		start, i = end, end-1
	}
	if start > 0 {
		s.pend = s.pend[:copy(s.pend, s.pend[start:])]
	}
	s.scanned = len(s.pend)
	if s.Max > 0 && len(s.pend) > s.Max || s.through && len(s.pend) > 0 {
		emit(s.pend, false)
		s.through = true
		s.pend, s.scanned = s.pend[:0], 0
	}
}

// Rest is what is left of a block the stream ended in the middle of (nil
// when none); the splitter starts afresh after it.
func (s *SSESplitter) Rest() []byte {
	if len(s.pend) == 0 {
		return nil
	}
	r := s.pend
	*s = SSESplitter{Max: s.Max}
	return r
}
