package badgerstore_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/badgerstore"
	"github.com/mcptape/mcptape/protocol"
)

const benchBatch = 256

// benchMessages is one batch of typical traffic: tools/call requests and
// their SSE-carried results, about 400 bytes of raw JSON each, with text
// that compresses about as well as real tool output (2-3x with Snappy).
func benchMessages(sid string, batch int) []*capture.Message {
	ms := make([]*capture.Message, benchBatch)
	x := uint64(batch)*0x9e3779b97f4a7c15 + 1
	text := func(n int) string {
		var b []byte
		for len(b) < n {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			b = append(b, benchWords[x%uint64(len(benchWords))]...)
			b = append(b, ' ')
			if x%7 == 0 {
				b = strconv.AppendUint(b, x%100000, 10)
				b = append(b, ' ')
			}
		}
		return string(b[:n])
	}
	for i := range ms {
		id := strconv.Itoa(batch*benchBatch/2 + i/2)
		m := &capture.Message{
			SessionID:  sid,
			ExchangeID: uint64(i/2 + 1),
			Time:       time.Now().Round(time.Microsecond),
			ID:         json.RawMessage(id),
			Batch:      -1,
		}
		if i%2 == 0 {
			m.Direction, m.Kind, m.Method, m.Name = protocol.ClientToServer, protocol.KindRequest, "tools/call", "search"
			m.Raw = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"search","arguments":{"query":%q}}}`, id, text(300))
		} else {
			m.Direction, m.Kind = protocol.ServerToClient, protocol.KindResult
			m.Raw = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%q}]}}`, id, text(315))
			m.SSE = &capture.SSEInfo{ID: "ev" + id, Type: "message", Prefix: []byte("event: message\ndata: "), Suffix: []byte("\n\n")}
			m.Links.Request = uint64(i)
		}
		m.Size = len(m.Raw)
		ms[i] = m
	}
	return ms
}

var benchWords = strings.Fields(`the quick brown fox jumps over lazy dog tool call result content text
	type image resource uri file path error code message progress token sampling model claude
	elicitation roots list changed notification request id params arguments name value README.md
	src/main.go func return nil if err != { } ( ) := package import "fmt" 2026-07-28 https://example.com`)

// BenchmarkWrite writes batches of 256 messages (~400 B raw each) and one
// session update, as the recorder's writer does, to a store on disk.
func BenchmarkWrite(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts badgerstore.Options
	}{
		{"disk", badgerstore.Options{}},
		{"disk-sync", badgerstore.Options{SyncWrites: true}},
		{"memory", badgerstore.Options{InMemory: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			if bc.opts.InMemory {
				dir = ""
			}
			s, err := badgerstore.Open(dir, &bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sess := &capture.Session{ID: "01KB8ZJ4R2V6C3W9ZK1ZP7M0QX", Start: time.Now()}
			// Rotate through distinct batches, so that compression sees
			// new text, not the same 256 messages again.
			batches := make([]*capture.Batch, 16)
			var raw int
			for i := range batches {
				batches[i] = &capture.Batch{Sessions: []*capture.Session{sess}, Messages: benchMessages(sess.ID, i)}
				for _, m := range batches[i].Messages {
					raw += len(m.Raw)
				}
			}
			b.SetBytes(int64(raw / len(batches)))
			ctx := b.Context()
			seq := uint64(0)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				batch := batches[i%len(batches)]
				for _, m := range batch.Messages {
					seq++
					m.Seq = seq
				}
				sess.Messages = int(seq)
				if err := s.Write(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "msgs/s")
			if hwm := peakRSS(); hwm > 0 {
				b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MiB")
			}
		})
	}
}

// peakRSS is the process's peak resident set size in bytes, 0 if unknown.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
