package proxy

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readPrefix reads a small declared body into a buffer of its exact size;
// what it returns is what the growing buffer returns for every body: one
// that ends as declared, early, late, past the bound or with an error, in
// reads of any size.
func TestReadPrefixExactSize(t *testing.T) {
	grown := func(body io.Reader, contentLength, max int64) ([]byte, bool, error) {
		var b bytes.Buffer
		_, err := b.ReadFrom(io.LimitReader(body, max+1))
		buf := b.Bytes()
		switch {
		case err != nil:
			return buf, false, err
		case int64(len(buf)) > max:
			return buf, false, nil
		case contentLength > 0 && int64(len(buf)) < contentLength:
			return buf, false, &errCut{io.ErrUnexpectedEOF, int64(len(buf)), contentLength}
		}
		return buf, true, nil
	}
	broken := errors.New("connection reset")
	readers := map[string]func(string) io.Reader{
		"whole":   func(s string) io.Reader { return strings.NewReader(s) },
		"bytes":   func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"halves":  func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"dataEOF": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
		"broken": func(s string) io.Reader {
			return io.MultiReader(strings.NewReader(s), iotest.ErrReader(broken))
		},
	}
	for name, r := range readers {
		for _, sent := range []int{1, 9, 10, 11, 12, 20, 4 << 10, 4<<10 + 1} {
			for _, declared := range []int64{10, 11, 4 << 10} {
				for _, max := range []int64{10, 11, 64 << 10} {
					body := strings.Repeat("x", sent)
					got, gotDone, gotErr := readPrefix(r(body), declared, max)
					want, wantDone, wantErr := grown(r(body), declared, max)
					if !bytes.Equal(got, want) || gotDone != wantDone || errString(gotErr) != errString(wantErr) {
						t.Errorf("%s, %d bytes sent, %d declared, max %d: got %d bytes, %v, %v; want %d bytes, %v, %v",
							name, sent, declared, max, len(got), gotDone, gotErr, len(want), wantDone, wantErr)
					}
				}
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
