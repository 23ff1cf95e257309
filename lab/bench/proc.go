package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// ProcessCPU is the user and system CPU the processes have used so far
// (all their threads; children that exited and were waited for
// included), read from /proc; processes that are gone count 0.
func ProcessCPU(pids ...int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		f := procStat(pid)
		if len(f) < 17 {
			continue
		}
		var ticks int64
		// utime, stime, cutime, cstime: fields 14 to 17, 1-based.
		for _, s := range f[13:17] {
			v, _ := strconv.ParseInt(string(s), 10, 64)
			ticks += v
		}
		total += time.Duration(ticks) * clockTick
	}
	return total
}

// procStat returns the fields of /proc/PID/stat, the command name (which
// may hold blanks) counted as one.
func procStat(pid int) [][]byte {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return append([][]byte{nil, nil}, bytes.Fields(b[i+1:])...)
}

// processTree returns pid and all its descendants alive now.
func processTree(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pid}
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(p); len(f) > 3 {
			if pp, err := strconv.Atoi(string(f[3])); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// ProcessIO is the read and write system calls the processes have made so
// far (syscr and syscw of /proc/PID/io, all threads; a socket's read and
// write count, epoll, accept and close do not); processes that are gone,
// or whose io file cannot be read, count 0.
func ProcessIO(pids ...int) (reads, writes int64) {
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "io"))
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			name, value, ok := bytes.Cut(line, []byte(":"))
			if !ok {
				continue
			}
			v, _ := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64)
			switch string(name) {
			case "syscr":
				reads += v
			case "syscw":
				writes += v
			}
		}
	}
	return reads, writes
}
