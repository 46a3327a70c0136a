//go:build linux

package proxy

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// socketExists reports whether this network namespace has a TCP socket
// whose own end is local and whose peer is remote, from the system's
// socket tables (/proc/net/tcp and tcp6); false when they cannot be read.
func socketExists(local, remote netip.AddrPort) bool {
	// Either table: an IPv4 connection of a socket open for both
	// families is in tcp6, with its addresses IPv4-mapped.
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if inTable(name, local, remote) {
			return true
		}
	}
	return false
}

func inTable(name string, local, remote netip.AddrPort) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// "  0: 0100007F:1F90 0100007F:C350 01 ...": slot, local, remote.
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		l, ok := procAddr(fields[1])
		if !ok || l != local {
			continue
		}
		if r, ok := procAddr(fields[2]); ok && r == remote {
			return true
		}
	}
	return false
}

// procAddr reads an address of /proc/net/tcp: the address's bytes as
// 32-bit words in the machine's byte order, in hex, then the port in hex.
func procAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	words, err := hex.DecodeString(h)
	if err != nil || (len(words) != 4 && len(words) != 16) {
		return netip.AddrPort{}, false
	}
	b := make([]byte, len(words))
	for i := 0; i < len(words); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(words[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), true
}
