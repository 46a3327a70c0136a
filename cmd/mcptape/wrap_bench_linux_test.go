package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ownTicks is utime+stime of pid from /proc (in 1/100 s): its own CPU,
// not its children's.
func ownTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// BenchmarkWrapOverhead measures what `mcptape wrap` adds to a stdio
// server: the same ping round trips to the fixture server run directly and
// through wrap (recording into a spool), one at a time. It reports the p50
// of each, the added p50 per round trip, and the wrap process's own CPU per
// message (both directions counted; the server's CPU is not the wrap's).
func BenchmarkWrapOverhead(b *testing.B) {
	const trips = 2000
	data := b.TempDir()
	measure := func(args []string) (p50 time.Duration, cpuPerMsg time.Duration) {
		cmd := mcptapeCmd(b, args...)
		in, _ := cmd.StdinPipe()
		outPipe, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		out := bufio.NewReader(outPipe)
		send := func(line string) {
			if _, err := in.Write([]byte(line + "\n")); err != nil {
				b.Fatal(err)
			}
		}
		recv := func() {
			if _, err := out.ReadString('\n'); err != nil {
				b.Fatal(err)
			}
		}
		send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		recv()
		send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for i := 1; i <= 200; i++ { // warm up
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
			recv()
		}
		ticks := ownTicks(cmd.Process.Pid)
		lat := make([]time.Duration, 0, trips)
		for i := range trips {
			t0 := time.Now()
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 1000+i))
			recv()
			lat = append(lat, time.Since(t0))
		}
		ticks = ownTicks(cmd.Process.Pid) - ticks
		in.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		slices.Sort(lat)
		return lat[len(lat)/2], time.Duration(ticks) * 10 * time.Millisecond / (2 * trips)
	}
	server := []string{"fixture", "server", "--stdio"}
	for range b.N {
		direct, _ := measure(server)
		// utime and stime are the wrap process's own, apart from its
		// server's.
		wrapped, wrapCPU := measure(append([]string{"wrap", "--data", data, "--"}, mcptapeArgv(b, server...)...))
		b.ReportMetric(float64(direct.Microseconds()), "direct-p50-µs")
		b.ReportMetric(float64(wrapped.Microseconds()), "wrap-p50-µs")
		b.ReportMetric(float64((wrapped - direct).Microseconds()), "added-p50-µs")
		b.ReportMetric(float64(wrapCPU.Nanoseconds())/1000, "wrap-CPU-µs/msg")
	}
}
