package metrics

import (
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkMessageMetrics: what a judged message records, as the pipeline
// and the store report it: its verdict and time, each family's outcome and
// volume, its level and the store call.
//
//	go test ./metrics -run '^$' -bench MessageMetrics
func BenchmarkMessageMetrics(b *testing.B) {
	m := New(prometheus.NewRegistry())
	fams := []string{"imatch", "shingle", "charshingle", "termset", "sift", "links"}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		for _, f := range fams {
			m.Signature(f, "signed")
			m.Volume(f, 3)
		}
		m.Level(0, "undeclared")
		m.ObserveRequest("observe", 30*time.Microsecond, nil)
		m.Message("not_bulk", 200*time.Microsecond)
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's CPU so far: ns/op counts the waits for a core
// of a busy machine too.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
