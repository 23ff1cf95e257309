//go:build unix

package testenv

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
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

// fatalTB records a Fatalf and ends its goroutine, as testing's does.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// startOnFreePort tries again only while the port was taken (a server's
// own words or Redis's errAddrInUse), three times at the most.
func TestStartOnFreePort(t *testing.T) {
	inUse := errors.New("bind: Address already in use")
	other := errors.New("no such file")
	for _, tt := range []struct {
		name  string
		errs  []error
		calls int
		fatal string
	}{
		{"first try", []error{nil}, 1, ""},
		{"taken twice", []error{inUse, fmt.Errorf("port 1: %w", errAddrInUse), nil}, 3, ""},
		{"taken thrice", []error{inUse, inUse, inUse, nil}, 3, "testenv: start srv: " + inUse.Error()},
		{"other failure", []error{other, nil}, 1, "testenv: start srv: no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tb, calls := &fatalTB{TB: t}, 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				startOnFreePort(tb, "srv", func() error { calls++; return tt.errs[calls-1] })
			}()
			<-done
			if calls != tt.calls || tb.fatal != tt.fatal {
				t.Errorf("got %d calls and fatal %q, want %d and %q", calls, tb.fatal, tt.calls, tt.fatal)
			}
		})
	}
}
