//go:build unix

package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// portLockDir holds one lock file per reserved port, shared by every test
// process on the machine. The files are never removed: removing a file
// another process is about to lock would give two holders.
var portLockDir = filepath.Join(os.TempDir(), "bulkmilter-test-ports")

// reservePorts takes an exclusive flock on each port's lock file, held
// until release (or until the process ends, when the kernel drops it). A
// flock is per open file, so a second reservation of the same port in this
// process fails as one from another process does: errPortReserved.
func reservePorts(ports []int) (release func(), err error) {
	if err := os.MkdirAll(portLockDir, 0o777); err != nil {
		return nil, fmt.Errorf("port reservations: %w", err)
	}
	// Writable by every user: tests may run as root and as others.
	_ = os.Chmod(portLockDir, 0o777|os.ModeSticky)
	var held []*os.File
	release = func() {
		for _, f := range held {
			f.Close() // drops the flock
		}
	}
	for _, p := range ports {
		// Read-only: a lock file another user created (0644 after the
		// umask) still opens, and flock needs no write access.
		f, err := os.OpenFile(filepath.Join(portLockDir, strconv.Itoa(p)), os.O_RDONLY|os.O_CREATE, 0o666)
		if err != nil {
			release()
			return nil, fmt.Errorf("port reservations: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			release()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, errPortReserved
			}
			return nil, fmt.Errorf("port reservations: flock %s: %w", f.Name(), err)
		}
		held = append(held, f)
	}
	return release, nil
}
