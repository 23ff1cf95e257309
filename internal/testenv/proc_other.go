//go:build !linux

package testenv

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive asks the kernel; zombies count as alive here.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

func startProcessUTS(cmd *exec.Cmd) (*process, error) {
	return nil, errors.New("UTS namespaces are Linux only")
}

// ProcessCPU is Linux only (/proc).
func ProcessCPU(pid int) (time.Duration, error) {
	return 0, errors.New("a process's CPU time is read from Linux's /proc")
}
