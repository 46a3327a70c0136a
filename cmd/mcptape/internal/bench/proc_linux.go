package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// benchSupported reports whether `mcptape bench` can run here: it reads
// /proc.
const benchSupported = true

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. The
// kernel fixes it at 100 for user space on every architecture Go supports.
const clockTicks = 100

// childSysProcAttr puts a child in its own process group, so that the
// terminal's Ctrl-C reaches only the bench (which then stops the group),
// and kills it if the bench dies without cleaning up.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup signals the process group led by pid.
func killGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// procStat returns the fields of /proc/PID/stat after the command name
// (field 3, the state, is index 0).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	// The command name is in parentheses and may hold spaces or ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, os.ErrInvalid
	}
	return strings.Fields(string(b[i+1:])), nil
}

// procCPUTicks is utime+stime of pid, in clock ticks.
func procCPUTicks(pid int) int64 {
	f, err := procStat(pid)
	if err != nil || len(f) < 13 {
		return 0
	}
	// utime and stime are fields 14 and 15 of stat, 11 and 12 here.
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// procStatusKB reads a "Key:  N kB" line of /proc/PID/status.
func procStatusKB(pid int, key string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// resetPeakRSS resets VmHWM to the current RSS (clear_refs 5, Linux 4.0+).
func resetPeakRSS(pid int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

// procChildren lists the processes whose parent is pid.
func procChildren(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	want := strconv.Itoa(pid)
	var out []int
	for _, d := range dirs {
		n, err := strconv.Atoi(filepath.Base(d))
		if err != nil || n == pid {
			continue
		}
		f, err := procStat(n)
		if err == nil && len(f) > 1 && f[1] == want {
			out = append(out, n)
		}
	}
	return out
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return "Linux " + strings.TrimSpace(string(b))
}
