package protocol_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcptape/mcptape/protocol"
)

// The splitter's blocks are the stream's bytes, cut where SSEParser ends
// its blocks, however the stream is split into reads; a block past Max
// goes on in pieces, and what follows it is cut as before.
func TestSSESplitter(t *testing.T) {
	for _, c := range []struct {
		name, in string
		max      int
		want     []string // "~" prefix: a piece of an oversize block
	}{
		{"LF", "data: a\n\ndata: b\n\n", 0, []string{"data: a\n\n", "data: b\n\n"}},
		{"CRLF", "id: 1\r\ndata: a\r\n\r\ndata: b\r\n\r\n", 0, []string{"id: 1\r\ndata: a\r\n\r\n", "data: b\r\n\r\n"}},
		{"CR", "data: a\r\rdata: b\r\r", 0, []string{"data: a\r\r", "data: b\r\r"}},
		{"leading blank line", "\ndata: a\n\n", 0, []string{"\n", "data: a\n\n"}},
		{"comment and retry", ": hi\nretry: 10\n\n", 0, []string{": hi\nretry: 10\n\n"}},
		{"unfinished", "data: a\n\ndata: b\n", 0, []string{"data: a\n\n", "rest:data: b\n"}},
		{"oversize", "data: " + strings.Repeat("x", 20) + "\n\ndata: b\n\n", 16, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for step := 1; step <= len(c.in); step++ {
				s := protocol.SSESplitter{Max: c.max}
				var got []string
				var all bytes.Buffer
				emit := func(b []byte, whole bool) {
					all.Write(b)
					if whole {
						got = append(got, string(b))
					} else {
						got = append(got, "~"+string(b))
					}
				}
				for i := 0; i < len(c.in); i += step {
					s.Feed([]byte(c.in[i:min(i+step, len(c.in))]), emit)
				}
				if r := s.Rest(); r != nil {
					all.Write(r)
					got = append(got, "rest:"+string(r))
				}
				if all.String() != c.in {
					t.Fatalf("reads of %d: the bytes came out as %q, want %q", step, all.String(), c.in)
				}
				if c.want == nil { // oversize: in pieces when read in small ones, then the next block whole
					if last := got[len(got)-1]; last != "data: b\n\n" || step == 1 && !strings.HasPrefix(got[0], "~") {
						t.Fatalf("reads of %d: %q", step, got)
					}
					continue
				}
				// A blank line ending in CR goes at once: when its LF comes
				// in the next read, it leads the next block.
				for i := 1; i < len(got); i++ {
					lf := strings.TrimPrefix(got[i], "rest:")
					if strings.HasSuffix(got[i-1], "\r") && strings.HasPrefix(lf, "\n") {
						got[i-1] += "\n"
						if got[i] = strings.TrimPrefix(got[i], "\n"); got[i] == "rest:\n" {
							got = got[:i]
						} else if strings.HasPrefix(got[i], "rest:") {
							got[i] = "rest:" + lf[1:]
						}
					}
				}
				if strings.Join(got, "|") != strings.Join(c.want, "|") {
					t.Fatalf("reads of %d: %q, want %q", step, got, c.want)
				}
			}
		})
	}
}
