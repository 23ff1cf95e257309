package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr {
	// Pdeathsig fires when the OS thread that forked exits; the Go runtime
	// only retires threads locked with LockOSThread, which this package
	// never does, so in practice it fires when the test binary dies.
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupAlive reports whether a process of group pgid is alive. Zombies do
// not count: they hold no sockets, and orphans are reaped by init, which
// here can take a second or two.
func groupAlive(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		// Fields after "(comm)": state ppid pgrp ...; comm may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(b[i+1:])
		if len(fields) < 3 {
			continue
		}
		if g, err := strconv.Atoi(string(fields[2])); err == nil && g == pgid && string(fields[0]) != "Z" {
			return true
		}
	}
	return false
}

// startProcessUTS starts cmd like startProcess, in a new UTS namespace (its
// own host name; needs CAP_SYS_ADMIN).
func startProcessUTS(cmd *exec.Cmd) (*process, error) {
	attr := sysProcAttr()
	attr.Cloneflags = syscall.CLONE_NEWUTS
	return startWith(cmd, attr)
}

// ProcessCPU returns the user and system CPU time process pid and the
// children it has waited for have used, from /proc/PID/stat (10 ms
// resolution): what bounds or measures a program's work on a busy machine
// where its wall time does not.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold blanks: utime, stime, cutime, cstime are 14 to 17 (1-based).
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:15] {
		v, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil // USER_HZ is 100 on Linux
}
