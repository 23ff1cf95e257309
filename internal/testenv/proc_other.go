//go:build !linux

package testenv

import "syscall"

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive asks the kernel; zombies count as alive here.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
