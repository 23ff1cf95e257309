package testenv

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// ProcessCPU reads the fields the kernel's own accounting gives getrusage:
// for this process and the children it waited for, after it burnt CPU, the two agree within a tick or
// two (a field read off by one, a start time or a count of page faults,
// would not), and a process that is gone is an error.
func TestProcessCPU(t *testing.T) {
	// This process's and its waited-for children's (the servers other
	// tests of the package started), as ProcessCPU counts.
	rusage := func() time.Duration {
		var cpu time.Duration
		for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
			var ru syscall.Rusage
			if err := syscall.Getrusage(who, &ru); err != nil {
				t.Fatal(err)
			}
			cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		return cpu
	}
	for start := rusage(); rusage()-start < 300*time.Millisecond; {
	}
	before := rusage()
	cpu, err := ProcessCPU(os.Getpid())
	after := rusage()
	if err != nil {
		t.Fatal(err)
	}
	if cpu < before-50*time.Millisecond || cpu > after+50*time.Millisecond {
		t.Errorf("ProcessCPU = %v; getrusage %v before, %v after", cpu, before, after)
	}
	if _, err := ProcessCPU(1 << 30); err == nil {
		t.Error("ProcessCPU of a pid that cannot exist: no error")
	}
}
