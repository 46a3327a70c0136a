package badgerstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// Keys. See the package documentation for the layout.

const (
	prefixSession  = "s/"
	prefixTime     = "t/"
	prefixExchange = "x/"
	prefixXIndex   = "xi/"
	prefixMessage  = "m/"
	prefixRaw      = "r/"
	prefixPackEnd  = "p/"
	keyVersion     = "meta/version"
	keyLast        = "meta/last"

	timeKeyLen = 12
)

// timeKey is a time in 12 bytes that sort like the times: seconds since
// 1970 with the sign bit flipped, then nanoseconds, both big-endian. It
// covers every time.Time, the zero value included (it sorts first).
type timeKey [timeKeyLen]byte

func makeTimeKey(t time.Time) timeKey {
	var k timeKey
	binary.BigEndian.PutUint64(k[:8], uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(k[8:], uint32(t.Nanosecond()))
	return k
}

func (k timeKey) time() time.Time {
	return unixTime(int64(binary.BigEndian.Uint64(k[:8])^(1<<63)), int64(binary.BigEndian.Uint32(k[8:])))
}

// zeroUnix is time.Time{}.Unix().
const zeroUnix = -62135596800

// unixTime is time.Unix, except that it returns the zero time.Time for the
// zero time's instant, so that IsZero and == time.Time{} hold after a round
// trip.
func unixTime(sec, nsec int64) time.Time {
	if sec == zeroUnix && nsec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, nsec)
}

// appendSID appends a session ID as it appears inside keys and values: its
// length as a uvarint, then its bytes. The length makes the encoding
// prefix-free, so the keys of session "a" never share a prefix scan with
// those of "a/b".
func appendSID(b []byte, sid string) []byte {
	b = binary.AppendUvarint(b, uint64(len(sid)))
	return append(b, sid...)
}

// splitSID splits what appendSID wrote off the front of b.
func splitSID(b []byte) (sid string, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, errCorrupt
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

func be8(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// packEndKey is the key of a pack's recorded end (see trimPacks).
func packEndKey(id uint64) []byte { return be8([]byte(prefixPackEnd), id) }

func sessionKey(sid string) []byte { return append([]byte(prefixSession), sid...) }

func timeIndexKey(b []byte, k timeKey, sid string) []byte {
	b = append(b, prefixTime...)
	b = append(b, k[:]...)
	return append(b, sid...)
}

func exchangePrefix(b []byte, sid string) []byte {
	return appendSID(append(b, prefixExchange...), sid)
}

func exchangeKey(b []byte, sid string, id uint64) []byte { return be8(exchangePrefix(b, sid), id) }

func xindexKey(b []byte, id uint64) []byte { return be8(append(b, prefixXIndex...), id) }

func messagePrefix(b []byte, sid string) []byte {
	return appendSID(append(b, prefixMessage...), sid)
}

func messageKey(b []byte, sid string, seq uint64) []byte { return be8(messagePrefix(b, sid), seq) }

func rawKey(b []byte, seq uint64) []byte { return be8(append(b, prefixRaw...), seq) }

// rawChunkKey is the key of chunk i ≥ 1 of a message's raw bytes; chunk 0
// is under rawKey, which is a prefix of the others.
func rawChunkKey(b []byte, seq uint64, i uint32) []byte {
	return binary.BigEndian.AppendUint32(rawKey(b, seq), i)
}

// rawHead is the value under rawKey: the session ID, the number of further
// chunks, then the first chunk.
func appendRawHead(b []byte, sid string, chunks uint32) []byte {
	return binary.AppendUvarint(appendSID(b, sid), uint64(chunks))
}

func splitRawHead(v []byte) (sid string, chunks uint32, first []byte, err error) {
	sid, rest, err := splitSID(v)
	if err != nil {
		return "", 0, nil, err
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > math.MaxUint32 {
		return "", 0, nil, errCorrupt
	}
	return sid, uint32(n), rest[k:], nil
}

// rawHeadMax bounds len(appendRawHead(nil, sid, n)) for any n.
func rawHeadMax(sid string) int { return len(sid) + 2*binary.MaxVarintLen32 }

// chunkRaw splits raw into the first chunk and the rest, so that the head
// value and every chunk stay within limit bytes.
func chunkRaw(raw []byte, sid string, limit int) (first []byte, rest [][]byte) {
	n := max(limit-rawHeadMax(sid), 1)
	if len(raw) <= n {
		return raw, nil
	}
	first, raw = raw[:n], raw[n:]
	for len(raw) > 0 {
		c := min(len(raw), limit)
		rest = append(rest, raw[:c:c])
		raw = raw[c:]
	}
	return first, rest
}

// tail8 is the big-endian number at the end of a key.
func tail8(key []byte) uint64 { return binary.BigEndian.Uint64(key[len(key)-8:]) }

// Records. Each is a sequence of fields in a fixed order: unsigned numbers
// as uvarints, signed ones as zig-zag varints, enums as one byte, strings
// and byte strings as a uvarint length and the bytes, times as a varint of
// Unix seconds and a uvarint of nanoseconds. IDs that are in the key are not
// repeated in the value. Changing a field, its order or an enum's numeric
// value needs a new schemaVersion.

var errCorrupt = fmt.Errorf("badgerstore: corrupt record: %w", capture.ErrDamaged)

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendFindings(b []byte, fs []capture.Finding) []byte {
	b = binary.AppendUvarint(b, uint64(len(fs)))
	for _, f := range fs {
		b = appendString(b, string(f.Kind))
		b = appendString(b, f.Message)
	}
	return b
}

func appendHeader(b []byte, h http.Header) []byte {
	b = binary.AppendUvarint(b, uint64(len(h)))
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic bytes for the same header
	for _, k := range keys {
		b = appendString(b, k)
		vs := h[k]
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	return b
}

func appendImpl(b []byte, i protocol.Implementation) []byte {
	b = appendString(b, i.Name)
	b = appendString(b, i.Version)
	return appendString(b, i.Title)
}

// appendSession encodes a session but its ID. It starts with the Start's
// timeKey so that an upsert can find the old time index key cheaply.
func appendSession(b []byte, s *capture.Session) []byte {
	k := makeTimeKey(s.Start)
	b = append(b, k[:]...)
	b = append(b, byte(s.Era))
	b = appendString(b, s.Version)
	b = appendImpl(b, s.Client)
	b = appendImpl(b, s.Server)
	b = appendBytes(b, s.ClientCapabilities)
	b = appendBytes(b, s.ServerCapabilities)
	b = appendString(b, s.Upstream)
	b = appendString(b, s.Path)
	b = appendString(b, s.Key)
	b = appendString(b, s.Opening)
	b = appendTime(b, s.End)
	for _, n := range [...]int{s.Exchanges, s.Messages, s.Calls, s.Errors, s.Findings} {
		b = binary.AppendVarint(b, int64(n))
	}
	b = append(b, byte(s.Status))
	b = binary.AppendVarint(b, int64(s.Lost))
	b = appendString(b, s.LossReason)
	b = binary.AppendUvarint(b, uint64(len(s.Labels)))
	for _, l := range s.Labels {
		b = appendString(b, l)
	}
	// Schema version 3: the leg, written only when it is not a reverse
	// route's single upstream, so that those records are as before.
	if s.Leg != capture.LegReverse || s.Route != "" || s.Command != nil {
		b = append(b, byte(s.Leg))
		b = appendString(b, s.Route)
		b = appendCommand(b, s.Command)
	}
	return b
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendCommand(b []byte, c *capture.Command) []byte {
	if c == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = appendStrings(b, c.Args)
	b = appendStrings(b, c.Env)
	b = appendString(b, c.Dir)
	b = binary.AppendVarint(b, int64(c.PID))
	return appendString(b, c.Exit)
}

// appendExchange encodes an exchange but its ID and SessionID.
func appendExchange(b []byte, x *capture.Exchange) []byte {
	b = appendString(b, x.Method)
	b = appendString(b, x.URL)
	b = binary.AppendVarint(b, int64(x.Status))
	b = appendHeader(b, x.RequestHeader)
	b = appendHeader(b, x.ResponseHeader)
	b = appendTime(b, x.Start)
	b = appendTime(b, x.FirstByte)
	b = appendTime(b, x.End)
	b = append(b, byte(x.RequestBody), byte(x.ResponseBody))
	b = binary.AppendVarint(b, x.RequestBytes)
	b = binary.AppendVarint(b, x.ResponseBytes)
	b = binary.AppendVarint(b, int64(x.Events))
	b = appendBool(b, x.Aborted)
	b = appendBool(b, x.Truncated)
	b = appendString(b, x.Error)
	b = appendBool(b, x.Synthesized)
	b = appendFindings(b, x.FindingList)
	// Schema version 2.
	b = appendTime(b, x.Forwarded)
	b = appendTime(b, x.UpstreamHeaders)
	// Written only when set, so that other records are as before.
	if x.Rewritten != "" {
		b = appendString(b, x.Rewritten)
	}
	return b
}

// appendMessage encodes a message's index record: everything but its Seq
// and SessionID (in the key) and Raw (under its own key).
func appendMessage(b []byte, m *capture.Message) []byte {
	b = binary.AppendUvarint(b, m.ExchangeID)
	b = append(b, byte(m.Direction))
	b = appendTime(b, m.Time)
	b = append(b, byte(m.Kind))
	b = appendString(b, m.Method)
	b = appendBytes(b, m.ID)
	b = appendString(b, m.Name)
	b = binary.AppendVarint(b, int64(m.Batch))
	b = binary.AppendVarint(b, int64(m.Size))
	if m.SSE == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendString(b, m.SSE.ID)
		b = appendString(b, m.SSE.Type)
		b = appendBytes(b, m.SSE.Prefix)
		b = appendBytes(b, m.SSE.Suffix)
		b = appendBytes(b, m.SSE.Whole)
	}
	b = appendFindings(b, m.Findings)
	b = binary.AppendUvarint(b, m.Links.Request)
	b = binary.AppendUvarint(b, m.Links.Parent)
	b = binary.AppendUvarint(b, m.Links.Previous)
	b = binary.AppendUvarint(b, m.Links.Task)
	// Edited came later: it is written only when set, so that records of
	// messages never edited elsewhere are as before and old records
	// decode as Edited 0.
	if m.Edited != 0 {
		b = binary.AppendVarint(b, int64(m.Edited))
	}
	return b
}

// decoder reads what the append functions wrote. It owns b: byte fields it
// returns are capacity-limited slices of b, not copies, so b must not be
// reused. The first error sticks; every later read returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v := d.varint()
	if v < math.MinInt || v > math.MaxInt {
		d.fail()
		return 0
	}
	return int(v)
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bool() bool { return d.byte() != 0 }

// count reads a length or element count, failing when it exceeds what is
// left (each element takes at least min bytes), so corrupt input cannot
// make us allocate wildly.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) raw(n int) []byte {
	if n > len(d.b) {
		d.fail()
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) bytes() []byte {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	return d.raw(n)
}

func (d *decoder) string() string { return string(d.bytes()) }

// strings is appendStrings' list; nil when empty.
func (d *decoder) strings() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.string()
	}
	return ss
}

func (d *decoder) time() time.Time {
	sec := d.varint()
	nsec := d.uvarint()
	if nsec >= 1e9 {
		d.fail()
		return time.Time{}
	}
	return unixTime(sec, int64(nsec))
}

func (d *decoder) findings() []capture.Finding {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	fs := make([]capture.Finding, n)
	for i := range fs {
		fs[i] = capture.Finding{Kind: capture.FindingKind(d.string()), Message: d.string()}
	}
	return fs
}

func (d *decoder) header() http.Header {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	h := make(http.Header, n)
	for range n {
		k := d.string()
		vs := make([]string, d.count(1))
		for i := range vs {
			vs[i] = d.string()
		}
		h[k] = vs
	}
	return h
}

func (d *decoder) impl() protocol.Implementation {
	return protocol.Implementation{Name: d.string(), Version: d.string(), Title: d.string()}
}

// done reports the sticky error, or errCorrupt when bytes are left over.
func (d *decoder) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	if d.err != nil {
		return fmt.Errorf("%w: %s", d.err, what)
	}
	return nil
}

func decodeSession(id string, b []byte) (*capture.Session, error) {
	d := decoder{b: b}
	var k timeKey
	copy(k[:], d.raw(timeKeyLen))
	s := &capture.Session{ID: id, Start: k.time()}
	s.Era = protocol.Era(d.byte())
	s.Version = d.string()
	s.Client = d.impl()
	s.Server = d.impl()
	s.ClientCapabilities = d.bytes()
	s.ServerCapabilities = d.bytes()
	s.Upstream = d.string()
	s.Path = d.string()
	s.Key = d.string()
	s.Opening = d.string()
	s.End = d.time()
	s.Exchanges = d.int()
	s.Messages = d.int()
	s.Calls = d.int()
	s.Errors = d.int()
	s.Findings = d.int()
	s.Status = capture.Status(d.byte())
	s.Lost = d.int()
	s.LossReason = d.string()
	s.Labels = d.strings()
	if len(d.b) > 0 && d.err == nil {
		s.Leg = capture.Leg(d.byte())
		s.Route = d.string()
		if d.bool() {
			s.Command = &capture.Command{Args: d.strings(), Env: d.strings(), Dir: d.string(), PID: d.int(), Exit: d.string()}
		}
	}
	return s, d.done("session " + id)
}

func decodeExchange(id uint64, sid string, b []byte) (*capture.Exchange, error) {
	d := decoder{b: b}
	x := &capture.Exchange{ID: id, SessionID: sid}
	x.Method = d.string()
	x.URL = d.string()
	x.Status = d.int()
	x.RequestHeader = d.header()
	x.ResponseHeader = d.header()
	x.Start = d.time()
	x.FirstByte = d.time()
	x.End = d.time()
	x.RequestBody = capture.BodyKind(d.byte())
	x.ResponseBody = capture.BodyKind(d.byte())
	x.RequestBytes = d.varint()
	x.ResponseBytes = d.varint()
	x.Events = d.int()
	x.Aborted = d.bool()
	x.Truncated = d.bool()
	x.Error = d.string()
	x.Synthesized = d.bool()
	x.FindingList = d.findings()
	if len(d.b) > 0 { // a version 1 record ends here
		x.Forwarded = d.time()
		x.UpstreamHeaders = d.time()
	}
	if len(d.b) > 0 && d.err == nil {
		// Written only when set: an empty one here is not a record we wrote.
		if x.Rewritten = d.string(); x.Rewritten == "" {
			d.fail()
		}
	}
	return x, d.done(fmt.Sprintf("exchange %d", id))
}

func decodeMessage(seq uint64, sid string, b []byte) (*capture.Message, error) {
	d := decoder{b: b}
	m := &capture.Message{Seq: seq, SessionID: sid}
	m.ExchangeID = d.uvarint()
	m.Direction = protocol.Direction(d.byte())
	m.Time = d.time()
	m.Kind = protocol.Kind(d.byte())
	m.Method = d.string()
	m.ID = d.bytes()
	m.Name = d.string()
	m.Batch = d.int()
	m.Size = d.int()
	if d.bool() {
		m.SSE = &capture.SSEInfo{
			ID:     d.string(),
			Type:   d.string(),
			Prefix: d.bytes(),
			Suffix: d.bytes(),
			Whole:  d.bytes(),
		}
	}
	m.Findings = d.findings()
	m.Links.Request = d.uvarint()
	m.Links.Parent = d.uvarint()
	m.Links.Previous = d.uvarint()
	m.Links.Task = d.uvarint()
	if len(d.b) > 0 {
		// Written only when set: a zero here is not a record we wrote.
		if m.Edited = d.int(); m.Edited == 0 {
			d.fail()
		}
	}
	return m, d.done(fmt.Sprintf("message %d", seq))
}
