package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type sseRecord struct {
	Raw, ID, Type, Data, Retry string
	HasID, HasData             bool
	Comments                   []string
	Oversize, Unterminated     bool
}

func parseAll(in []byte, chunk, max int) []sseRecord { return parseAllDetach(in, chunk, max, false) }

func parseAllDetach(in []byte, chunk, max int, detach bool) []sseRecord {
	return parseAllRope(in, chunk, max, 0, detach)
}

// parseAllRope parses with the rope taking over blocks from ropeAt bytes.
func parseAllRope(in []byte, chunk, max, ropeAt int, detach bool) []sseRecord {
	p := SSEParser{MaxEventSize: max, ropeAt: ropeAt}
	return parseWith(&p, in, chunk, p.Feed, func(e *Event, _ *sseRecord) {
		if detach {
			e.Detach()
		}
	})
}

// recordOf is what the tests compare of an event.
func recordOf(e *Event) sseRecord {
	return sseRecord{
		Raw: string(e.Raw), ID: e.ID, Type: e.Type, Data: string(e.Data), Retry: e.Retry,
		HasID: e.HasID, HasData: e.HasData, Comments: append([]string(nil), e.Comments...),
		Oversize: e.Oversize, Unterminated: e.Unterminated,
	}
}

// parseWith feeds in through feed (p's Feed or FeedOwned) in chunks of
// chunk bytes (all at once when chunk <= 0), closes p, and returns the
// events; each, if set, sees every event with its record as it is emitted.
func parseWith(p *SSEParser, in []byte, chunk int, feed func([]byte, func(*Event)), each func(*Event, *sseRecord)) []sseRecord {
	var out []sseRecord
	emit := func(e *Event) {
		out = append(out, recordOf(e))
		if each != nil {
			each(e, &out[len(out)-1])
		}
	}
	if chunk <= 0 {
		chunk = len(in) + 1
	}
	for len(in) > 0 {
		n := min(chunk, len(in))
		feed(in[:n], emit)
		in = in[n:]
	}
	p.Close(emit)
	return out
}

// memSpill is a SpillFile in memory that can fail its writes past a
// number of bytes, or its reads.
type memSpill struct {
	fs  *spills
	buf []byte
}

// spills makes memSpills and counts those not closed.
type spills struct {
	open, made int
	handed     int // files handed over with their block (Event.TakeSpill)
	failWrite  int // a write that would take a file past this many bytes fails; 0: never
	failRead   bool
}

func (s *spills) spill() (SpillFile, error) {
	s.open++
	s.made++
	return &memSpill{fs: s}, nil
}

func (m *memSpill) Write(b []byte) (int, error) {
	if m.fs.failWrite > 0 && len(m.buf)+len(b) > m.fs.failWrite {
		return 0, errors.New("disk full")
	}
	m.buf = append(m.buf, b...)
	return len(b), nil
}

func (m *memSpill) ReadAt(b []byte, off int64) (int, error) {
	if m.fs.failRead {
		return 0, errors.New("input/output error")
	}
	n := copy(b, m.buf[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memSpill) Close() error {
	m.fs.open--
	m.buf = nil
	return nil
}

// parseAllOwned is parseAllRope feeding each chunk (a copy of its own)
// with FeedOwned; it fails t unless every kept chunk comes back through
// Release once, unchanged, and none is kept after Close.
func parseAllOwned(t *testing.T, in []byte, chunk, max, ropeAt int, fs *spills) []sseRecord {
	given := map[*byte]string{} // every slice fed, as fed
	released := map[*byte]int{}
	var kept []*byte
	p := SSEParser{MaxEventSize: max, ropeAt: ropeAt}
	if fs != nil {
		p.Spill, p.SpillAt = fs.spill, 8
	}
	p.Release = func(b []byte) {
		k := &b[:1][0]
		want, ok := given[k]
		if !ok {
			t.Fatalf("Release of a slice never fed: %q", b)
		}
		if string(b) != want {
			t.Fatalf("a kept slice changed: %q, was %q", b, want)
		}
		released[k]++
	}
	out := parseWith(&p, in, chunk, func(b []byte, emit func(*Event)) {
		b = append([]byte(nil), b...)
		given[&b[0]] = string(b)
		if p.FeedOwned(b, emit) {
			kept = append(kept, &b[0])
		} else {
			if released[&b[0]] != 0 {
				t.Fatalf("a slice not kept was released: %q", b)
			}
			clear(b) // the caller's again: reusing it must not show
		}
	}, nil)
	for _, k := range kept {
		if released[k] != 1 {
			t.Fatalf("a kept slice was released %d times, want once", released[k])
		}
	}
	return out
}

// parseAllSpill is parseAllRope with a spill from spillAt bytes. It takes
// every spill file an event hands over: one that does not hold exactly the
// event's data shows in the record as a difference.
func parseAllSpill(in []byte, chunk, max, ropeAt, spillAt int, fs *spills) []sseRecord {
	p := SSEParser{MaxEventSize: max, ropeAt: ropeAt, Spill: fs.spill, SpillAt: spillAt}
	return parseWith(&p, in, chunk, p.Feed, func(e *Event, r *sseRecord) {
		if e.SpillErr != nil {
			r.Data = "lost: " + e.SpillErr.Error()
		}
		if f := e.TakeSpill(); f != nil {
			fs.handed++
			if got := string(f.(*memSpill).buf); got != r.Data {
				r.Data = fmt.Sprintf("handed a spill file of %d bytes that differ from the data", len(got))
			}
			_ = f.Close()
		}
	})
}

func TestSSEParser(t *testing.T) {
	stream := "id: p1\ndata:\n\n" + // priming
		": keep-alive\r\n\r\n" +
		"event: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" +
		"data: line1\ndata: line2\r\rretry: 3000\n\n" +
		"event: close\nretry: 500\n\n" +
		"data: tail-without-blank"
	got := parseAll([]byte(stream), 0, 0)
	if len(got) != 7 {
		t.Fatalf("got %d events, want 7: %+v", len(got), got)
	}
	if e := got[0]; !e.HasID || e.ID != "p1" || e.Data != "" || !e.HasData {
		t.Errorf("priming event = %+v", e)
	}
	if e := got[1]; len(e.Comments) != 1 || e.Comments[0] != "keep-alive" || e.Raw != ": keep-alive\r\n\r\n" {
		t.Errorf("comment event = %+v", e)
	}
	if e := got[2]; e.Type != "message" || e.ID != "s_1" || e.Data != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("message event = %+v", e)
	}
	if e := got[3]; e.Data != "line1\nline2" || e.Raw != "data: line1\ndata: line2\r\r" {
		t.Errorf("multi-line event = %+v", e)
	}
	if e := got[4]; e.Retry != "3000" || e.HasData {
		t.Errorf("retry-only event = %+v", e)
	}
	if e := got[5]; e.Type != "close" || e.Retry != "500" {
		t.Errorf("close event = %+v", e)
	}
	// The final unterminated block is reported, not dropped.
	if e := got[6]; !e.Unterminated || e.Data != "tail-without-blank" {
		t.Errorf("final block = %+v, want it reported as unterminated", e)
	}
}

func TestSSEUnterminated(t *testing.T) {
	got := parseAll([]byte("data: a\n\ndata: cut"), 0, 0)
	if len(got) != 2 || !got[1].Unterminated || got[1].Raw != "data: cut" || got[1].Data != "cut" {
		t.Fatalf("got %+v, want a final unterminated event holding the partial line", got)
	}
}

// Chunking must not change what is parsed, and the raw blocks must add up
// to the stream exactly.
func TestSSEChunkingInvariant(t *testing.T) {
	stream := []byte("id: 1\r\ndata: {\"a\":1}\r\n\r\n:c\n\nevent: x\rdata: y\r\r\ndata: z\n\n\n")
	whole := parseAll(stream, 0, 0)
	for chunk := 1; chunk < len(stream); chunk++ {
		got := parseAll(stream, chunk, 0)
		if len(got) != len(whole) {
			t.Fatalf("chunk %d: %d events, want %d", chunk, len(got), len(whole))
		}
		var raw strings.Builder
		for i := range got {
			if got[i].Raw != whole[i].Raw || got[i].Data != whole[i].Data || got[i].ID != whole[i].ID {
				t.Fatalf("chunk %d event %d = %+v, want %+v", chunk, i, got[i], whole[i])
			}
			raw.WriteString(got[i].Raw)
		}
		if raw.String() != string(stream) {
			t.Fatalf("chunk %d: raw blocks do not add up to the stream", chunk)
		}
	}
}

func TestSSEOversize(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1000)
	stream := append(append([]byte("data: "), big...), []byte("\n\ndata: next\n\n")...)
	for _, chunk := range []int{0, 1, 7, 100} {
		got := parseAll(stream, chunk, 100)
		if len(got) != 2 {
			t.Fatalf("chunk %d: %d events, want 2: %+v", chunk, len(got), got)
		}
		if !got[0].Oversize || len(got[0].Raw) != 100 {
			t.Errorf("chunk %d: first event oversize=%v raw %d bytes, want oversize with 100", chunk, got[0].Oversize, len(got[0].Raw))
		}
		if got[1].Data != "next" || got[1].Oversize {
			t.Errorf("chunk %d: the event after an oversize one = %+v", chunk, got[1])
		}
	}
}

func FuzzSSEChunking(f *testing.F) {
	f.Add([]byte("id: 1\ndata: x\n\n"), 3)
	f.Add([]byte("data: a\r\n\r\n:c\r\rretry: 1\n\n"), 1)
	f.Fuzz(func(t *testing.T, stream []byte, chunk int) {
		if bytes.HasPrefix(stream, []byte("\xEF")) || chunk <= 0 {
			return
		}
		whole := parseAll(stream, 0, 1<<20)
		got := parseAll(stream, chunk%17+1, 1<<20)
		for _, v := range []struct {
			name string
			recs []sseRecord
		}{
			{"detaching", parseAllDetach(stream, chunk%17+1, 1<<20, true)},
			{"with a rope from 4 bytes", parseAllRope(stream, chunk%17+1, 1<<20, 4, false)},
			{"with a rope from 1 byte, detaching", parseAllRope(stream, chunk%5+1, 1<<20, 1, true)},
			{"spilling from 8 bytes", parseAllSpill(stream, chunk%17+1, 1<<20, 4, 8, &spills{})},
			{"spilling from 2 bytes, writes failing past 16", parseAllSpill(stream, chunk%5+1, 1<<20, 1, 2, &spills{failWrite: 16})},
			{"owning chunks, with a rope from 4 bytes", parseAllOwned(t, stream, chunk%17+1, 1<<20, 4, nil)},
			{"owning chunks, spilling from 8 bytes", parseAllOwned(t, stream, chunk%7+1, 1<<20, 1, &spills{})},
		} {
			if len(v.recs) != len(got) {
				t.Fatalf("%d events %s, %d not", len(v.recs), v.name, len(got))
			}
			for i := range v.recs {
				if !reflect.DeepEqual(v.recs[i], got[i]) {
					t.Fatalf("event %d %s %+v, not %+v", i, v.name, v.recs[i], got[i])
				}
			}
		}
		var a, b strings.Builder
		for _, e := range whole {
			a.WriteString(e.Raw)
		}
		for _, e := range got {
			b.WriteString(e.Raw)
		}
		if a.String() != b.String() || a.String() != string(stream) {
			t.Fatalf("raw mismatch: whole %q chunked %q input %q", a.String(), b.String(), stream)
		}
		if len(whole) != len(got) {
			t.Fatalf("%d events whole, %d chunked", len(whole), len(got))
		}
	})
}

// With a small limit, oversize blocks must come out the same whatever the
// chunking.
func FuzzSSEOversizeChunking(f *testing.F) {
	f.Add([]byte("data: 0123456789abcdef0123\nid: x\n\ndata: y\n\n"), 5)
	f.Add([]byte("id: 1\r\ndata: aaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n:c\r\r"), 2)
	f.Fuzz(func(t *testing.T, stream []byte, chunk int) {
		if bytes.HasPrefix(stream, []byte("\xEF")) || chunk <= 0 {
			return
		}
		whole := parseAll(stream, 0, 16)
		got := parseAll(stream, chunk%7+1, 16)
		if rope := parseAllRope(stream, chunk%7+1, 16, 3, chunk%2 == 0); !reflect.DeepEqual(rope, got) {
			t.Fatalf("with a rope:\n%+v\nwithout:\n%+v", rope, got)
		}
		if len(whole) != len(got) {
			t.Fatalf("%d events whole, %d chunked:\n%+v\n%+v", len(whole), len(got), whole, got)
		}
		for i := range whole {
			w, g := whole[i], got[i]
			if w.Raw != g.Raw || w.Data != g.Data || w.ID != g.ID || w.HasID != g.HasID || w.Type != g.Type ||
				w.Oversize != g.Oversize || w.Unterminated != g.Unterminated || w.Retry != g.Retry || w.HasData != g.HasData {
				t.Fatalf("event %d: whole %+v chunked %+v", i, w, g)
			}
			if len(w.Raw) > 16 {
				t.Fatalf("event %d: raw of %d bytes over the limit", i, len(w.Raw))
			}
		}
	})
}

// A detached event keeps its bytes while the parser goes on.
func TestSSEDetach(t *testing.T) {
	var p SSEParser
	var kept [][]byte
	emit := func(e *Event) {
		if len(e.Data) > 3 {
			e.Detach()
			kept = append(kept, e.Data)
		}
	}
	p.Feed([]byte("data: first-event\n\ndata: second-"), emit)
	p.Feed([]byte("event\n\ndata: x\n\ndata: third-event\r\r"), emit)
	p.Close(emit)
	if len(kept) != 3 || string(kept[0]) != "first-event" || string(kept[1]) != "second-event" || string(kept[2]) != "third-event" {
		t.Fatalf("kept %q", kept)
	}
}

// A parser Reset between streams reads the next one as a fresh stream (a
// BOM at its start included, nothing of the previous one carried over)
// and keeps its buffer.
func TestSSEParserReset(t *testing.T) {
	p := SSEParser{MaxEventSize: 1 << 20}
	var got []string
	emit := func(e *Event) { got = append(got, string(e.Data)) }
	p.Feed([]byte("data: "+strings.Repeat("a", 8000)+"\n\ndata: cut"), emit)
	p.Close(emit)
	held := cap(p.buf)
	p.Reset()
	if cap(p.buf) != held || len(p.buf) != 0 {
		t.Errorf("after Reset the buffer is %d/%d bytes, want 0/%d", len(p.buf), cap(p.buf), held)
	}
	got = nil
	p.Feed([]byte("\xEF\xBB\xBFid: 7\ndata: two\n\n"), emit)
	p.Close(emit)
	if len(got) != 1 || got[0] != "two" {
		t.Errorf("second stream: %q, want one event with data two", got)
	}
}

// A block over the limit keeps only the limit, and the parser does not
// hold on to more than about that much memory for it.
func TestSSEParserOversizeMemory(t *testing.T) {
	const limit = 1 << 20
	p := SSEParser{MaxEventSize: limit}
	chunk := []byte(strings.Repeat("x", 32<<10))
	var raw []byte
	var oversize, emitted bool
	emit := func(e *Event) { raw, oversize, emitted = e.Raw, e.Oversize, true }
	p.Feed([]byte("data: "+strings.Repeat("x", 600<<10)), nil)
	peak := 0
	for range 128 { // 4.6 MiB of one data line
		p.Feed(chunk, emit)
		peak = max(peak, cap(p.buf), cap(p.over))
	}
	p.Feed([]byte("\n\n"), emit)
	if !emitted || !oversize || len(raw) != limit {
		t.Fatalf("emitted %v, oversize %v, %d raw bytes: want one oversize event of %d bytes", emitted, oversize, len(raw), limit)
	}
	if peak > limit+128<<10 {
		t.Errorf("the parser held %d bytes for a block cut at %d", peak, limit)
	}
	if p.over != nil {
		t.Error("the parser keeps the oversize block after dispatching it")
	}
}

// A large event read in network-sized chunks comes out whole, and the
// parser gives it a buffer of about its size, not the next power of two
// (a 10 MiB result recorded four at a time held 64 MiB of buffers before).
func TestSSELargeEventBuffer(t *testing.T) {
	for _, size := range []int{3 << 20, 10<<20 + 12345} {
		head := "event: message\nid: 7\ndata: "
		stream := []byte(head + strings.Repeat("y", size) + "\n\ndata: next\n\n")
		want := parseAll(stream, 0, 0)
		for _, chunk := range []int{32 << 10, 4093, 1 << 20} {
			var p SSEParser
			var raws [][]byte
			var recs []sseRecord
			emit := func(e *Event) {
				e.Detach()
				raws = append(raws, e.Raw)
				recs = append(recs, recordOf(e))
			}
			for in := stream; len(in) > 0; {
				n := min(chunk, len(in))
				p.Feed(in[:n], emit)
				in = in[n:]
			}
			p.Close(emit)
			if !reflect.DeepEqual(recs, want) {
				t.Fatalf("%d bytes in chunks of %d: the events differ from one Feed's", size, chunk)
			}
			// Kept events stay intact while the parser goes on (its rope's
			// chunks are reused for the next long line).
			for i, r := range raws {
				if string(r) != recs[i].Raw {
					t.Fatalf("%d bytes in chunks of %d: event %d changed after it was emitted", size, chunk, i)
				}
			}
			if c, n := cap(raws[0]), len(raws[0]); c > n+n/32+64<<10 {
				t.Errorf("%d bytes in chunks of %d: the event's buffer holds %d bytes for %d", size, chunk, c, n)
			}
		}
	}
}

// BenchmarkSSELargeEvent reports what one 10 MiB event read in 32 KiB
// chunks costs the parser (B/op is what it allocates along the way).
func BenchmarkSSELargeEvent(b *testing.B) {
	stream := []byte("event: message\ndata: " + strings.Repeat("y", 10<<20) + "\n\n")
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		var p SSEParser
		for in := stream; len(in) > 0; {
			n := min(32<<10, len(in))
			p.Feed(in[:n], func(e *Event) { e.Detach() })
			in = in[n:]
		}
		p.Close(nil)
	}
}

// A long line kept in a spill file comes out as it would from memory, the
// file is closed once the line ends, and a file that fails part-way keeps
// nothing from being parsed right; one that cannot be read back loses only
// its block, which is dispatched with SpillErr.
func TestSSESpill(t *testing.T) {
	long := strings.Repeat("x", 3<<20+17)
	stream := []byte("event: message\nid: 1\ndata: " + long + "\n\ndata: next\n\n" + "data: " + long + "\r\n\r\n")
	want := parseAll(stream, 0, 16<<20)
	for _, chunk := range []int{32 << 10, 4093} {
		fs := &spills{}
		if got := parseAllSpill(stream, chunk, 16<<20, 0, 0, fs); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks of %d: spilled events differ from in-memory ones", chunk)
		}
		if fs.made != 2 || fs.open != 0 || fs.handed != 2 {
			t.Errorf("chunks of %d: %d spill files made, %d left open, %d handed over with their event; want 2, 0 and 2",
				chunk, fs.made, fs.open, fs.handed)
		}
		fs = &spills{failWrite: 2 << 20}
		if got := parseAllSpill(stream, chunk, 16<<20, 0, 0, fs); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks of %d, spill writes failing: events differ from in-memory ones", chunk)
		}
		if fs.open != 0 || fs.handed != 0 {
			t.Errorf("chunks of %d, spill writes failing: %d spill files left open, %d handed over; want none", chunk, fs.open, fs.handed)
		}
		fs = &spills{failRead: true}
		got := parseAllSpill(stream, chunk, 16<<20, 0, 0, fs)
		if len(got) != 3 || got[1].Data != "next" {
			t.Fatalf("chunks of %d, spill reads failing: %d events, want 3 with the middle one whole", chunk, len(got))
		}
		for _, i := range []int{0, 2} {
			if !got[i].Oversize || got[i].Raw != "" || !strings.Contains(got[i].Data, "input/output error") {
				t.Errorf("chunks of %d, spill reads failing: event %d is %+v, want it lost with the read's error", chunk, i, got[i])
			}
		}
		if fs.open != 0 {
			t.Errorf("chunks of %d, spill reads failing: %d spill files left open", chunk, fs.open)
		}
	}
	// A file is handed over only when it holds the block's data exactly:
	// not with a second data line, nor for a block cut at the size limit
	// or by the stream's end; each is closed all the same.
	for _, in := range []string{
		"data: " + long + "\ndata: more\n\n",
		"data: " + long + "\n\n",
		"data: " + long + "\n",
		"data: " + long,
		"datum: " + long + "\n\n",
	} {
		fs := &spills{}
		max := 16 << 20
		if in == "data: "+long+"\n\n" {
			max = 3 << 20
		}
		got := parseAllSpill([]byte(in), 64<<10, max, 0, 0, fs)
		if want := parseAll([]byte(in), 0, max); !reflect.DeepEqual(got, want) {
			t.Fatalf("%.12q…: spilled events differ from in-memory ones", in)
		}
		if fs.made != 1 || fs.handed != 0 || fs.open != 0 {
			t.Errorf("%.12q…: %d spill files made, %d handed over, %d left open; want 1, 0 and 0", in, fs.made, fs.handed, fs.open)
		}
	}
	// A parser reset in the middle of a spilled line closes its file.
	fs := &spills{}
	p := SSEParser{Spill: fs.spill}
	for in := stream[:2<<20]; len(in) > 0; in = in[32<<10:] {
		p.Feed(in[:32<<10], nil)
	}
	if fs.open != 1 {
		t.Fatalf("%d spill files open in the middle of a 2 MiB line, want 1", fs.open)
	}
	p.Reset()
	if fs.open != 0 {
		t.Errorf("%d spill files open after Reset", fs.open)
	}
}

// A long line fed with FeedOwned keeps the caller's chunks instead of
// copying them, gives each back once, and the events are the same.
func TestSSEFeedOwned(t *testing.T) {
	stream := []byte("event: message\nid: 1\ndata: " + strings.Repeat("x", 3<<20) + "\n\ndata: next\n\n")
	want := parseAll(stream, 0, 16<<20)
	if got := parseAllOwned(t, stream, 128<<10, 16<<20, 0, nil); !reflect.DeepEqual(got, want) {
		t.Fatal("events differ from Feed's")
	}
	p := SSEParser{}
	kept := 0
	for in := stream[:2<<20]; len(in) > 0; in = in[128<<10:] {
		if p.FeedOwned(append([]byte(nil), in[:128<<10]...), nil) {
			kept++
		}
	}
	if kept < 10 {
		t.Errorf("%d of 16 chunks of a 2 MiB line kept, want most", kept)
	}
}

// A BOM at a stream's start is dropped however the stream is cut, and
// bytes that only begin like one are kept, however it is cut.
func TestSSEParserBOMSplit(t *testing.T) {
	for _, stream := range []string{"\xEF\xBB\xBFdata: one\n\n", "\xEF\xBBdata: one\n\n", "\xEFdata: one\n\n"} {
		want := parseAll([]byte(stream), 0, 1<<20)
		for cut1 := 0; cut1 <= 4; cut1++ {
			for cut2 := cut1; cut2 <= 5; cut2++ {
				p := SSEParser{MaxEventSize: 1 << 20}
				var got []sseRecord
				emit := func(e *Event) { got = append(got, recordOf(e)) }
				p.Feed([]byte(stream[:cut1]), emit)
				p.Feed([]byte(stream[cut1:cut2]), emit)
				p.Feed([]byte(stream[cut2:]), emit)
				p.Close(emit)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%q cut at %d and %d: %+v, want %+v", stream, cut1, cut2, got, want)
				}
			}
		}
	}
}

// A long line joined from its pieces, or read back from its spill file,
// goes into a buffer from SSEParser.Buffer, and Event.Buffer hands that
// buffer over with the block once the caller detaches it: only then, only
// for that block, and with the block's bytes in it. A buffer given back is
// used again.
func TestSSESpillBuffer(t *testing.T) {
	long, mid := strings.Repeat("x", 3<<20), strings.Repeat("y", 1<<20)
	stream := []byte("id: 1\ndata: " + long + "\n\ndata: next\n\n" + "data: " + long + "\n\n" + "data: " + mid + "\n\n")
	var given [][]byte
	fs := &spills{}
	p := SSEParser{Spill: fs.spill, MaxEventSize: 16 << 20}
	var free []byte
	p.Buffer = func(n int) []byte {
		b := free
		if cap(b) < n {
			b = make([]byte, 0, n)
		}
		free = nil
		given = append(given, b)
		return b[:0]
	}
	type seen struct {
		data   string
		handed bool
	}
	var got []seen
	detach := true
	emit := func(e *Event) {
		if e.Buffer() != nil {
			t.Errorf("event %d: a buffer before Detach", len(got))
		}
		if detach {
			e.Detach()
		}
		b := e.Buffer()
		s := seen{data: string(e.Data), handed: b != nil}
		if b != nil {
			if &b[:1][0] != &given[len(given)-1][:1][0] {
				t.Errorf("event %d: Buffer is not the buffer Buffer gave", len(got))
			}
			if &e.Raw[0] != &b[:1][0] || cap(b) < len(e.Raw) {
				t.Errorf("event %d: Raw does not begin the buffer", len(got))
			}
			free = b // given back: the next spilled block reads into it
		}
		got = append(got, s)
	}
	feed := func() {
		for in := stream; len(in) > 0; {
			n := min(64<<10, len(in))
			p.Feed(in[:n], emit)
			in = in[n:]
		}
		p.Close(emit)
	}
	feed()
	want := []seen{{long, true}, {"next", false}, {long, true}, {mid, true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events (data, handed over): %.40v, want %.40v", got, want)
	}
	if len(given) != 3 || &given[0][:1][0] != &given[1][:1][0] || &given[0][:1][0] != &given[2][:1][0] {
		t.Errorf("%d buffers given; want 3, the later ones the first given back", len(given))
	}
	if fs.made != 2 {
		t.Errorf("%d spill files made, want 2 (the 1 MiB line is joined in memory)", fs.made)
	}
	// Not detached: the parser keeps the buffer, and hands it to no one.
	p.Reset()
	detach, got, given = false, nil, nil
	feed()
	var handed []bool
	for _, s := range got {
		handed = append(handed, s.handed)
	}
	if len(got) != 4 || len(given) != 3 || slices.Contains(handed, true) {
		t.Errorf("not detached: %d events from %d buffers, handed over %v; want 4 from 3, none", len(got), len(given), handed)
	}
}

// Once emit has returned, nothing the parser keeps refers to a buffer it
// handed over: a caller that detaches every event, and after each Feed
// overwrites each buffer Event.Buffer handed it and gives it back through
// SSEParser.Buffer, gets every later event as a parser that never hands
// one over does, whatever the chunking: blocks after a long line in the
// same chunk, lines joined in memory and lines read back from a spill
// file, several data lines, CRLF, a cut stream.
func TestSSEHandedBufferNotKept(t *testing.T) {
	long, mid := strings.Repeat("x", 3<<20), strings.Repeat("y", 100<<10)
	stream := []byte("data: " + long + "\n\ndata: next\n\n" + "data: " + long + "\r\n\r\ndata: after\n\n" +
		"event: x\ndata: " + mid + "\ndata: two\n\n" + "data: " + mid + "\n\n: comment\n\n" +
		"id: 7\ndata: " + long + "\ndata: " + mid + "\n\ndata: " + mid + "\n\ndata: tail")
	want := parseAll(stream, 0, 16<<20)
	for _, chunk := range []int{4093, 32 << 10, 1<<20 + 3} {
		fs := &spills{}
		var free [][]byte
		handed := 0
		p := SSEParser{MaxEventSize: 16 << 20, Spill: fs.spill}
		p.Buffer = func(n int) []byte {
			for i, b := range free {
				if cap(b) >= n {
					free = append(free[:i], free[i+1:]...)
					return b[:0]
				}
			}
			return nil
		}
		var taken [][]byte
		feed := func(b []byte, emit func(*Event)) {
			p.Feed(b, emit)
			for _, b := range taken {
				b = b[:cap(b)]
				for i := range b {
					b[i] = 0xFF
				}
				free = append(free, b)
			}
			taken = taken[:0]
		}
		got := parseWith(&p, stream, chunk, feed, func(e *Event, _ *sseRecord) {
			e.Detach()
			if b := e.Buffer(); b != nil {
				handed++
				taken = append(taken, b)
			}
		})
		if !reflect.DeepEqual(got, want) {
			for i := range min(len(got), len(want)) {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("chunks of %d: event %d differs: data %.30q… (%d bytes), want %.30q… (%d bytes)",
						chunk, i, got[i].Data, len(got[i].Data), want[i].Data, len(want[i].Data))
					break
				}
			}
			t.Fatalf("chunks of %d: %d events, want %d, with every buffer overwritten once handed over", chunk, len(got), len(want))
		}
		if handed < 2 {
			// (A block whose buffer grew past a long line's, for a line
			// after it, hands over none.)
			t.Errorf("chunks of %d: %d buffers handed over, want one for each of the first two 3 MiB lines at least", chunk, handed)
		}
	}
}
