//go:build unix

package testenv

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A port from FreePort is not handed out again while its test runs: not
// by this process, not by another (here flock(1), as another test binary's
// FreePort would try it); the test's cleanup frees it.
func TestPortReservation(t *testing.T) {
	flock := Program(t, "flock")
	var p int
	t.Run("holder", func(t *testing.T) {
		p = FreePort(t)
		if release, err := reserveFree(p); release != nil || err != nil {
			t.Fatalf("port %d handed out twice in one process (err %v)", p, err)
		}
		lock := filepath.Join(portLockDir, strconv.Itoa(p))
		if out, err := exec.Command(flock, "-n", lock, "true").CombinedOutput(); err == nil {
			t.Fatalf("another process took the reservation of port %d: %s", p, out)
		}
	})
	release, err := reservePorts([]int{p})
	if err != nil {
		t.Fatalf("port %d still reserved after its test's cleanup: %v", p, err)
	}
	release()
}
