package refile

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkRemember measures the milter's cost of remembering one copy
// and the heap one remembered copy holds (realistic address and
// Message-ID lengths), for docs/refile.md.
func BenchmarkRemember(b *testing.B) {
	r, err := New(Options{Mover: &inbox{}, MaxEntries: 200_000})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// Every copy its own strings, campaigns of ten copies, as the milter
	// hands them over; made before the timer starts.
	copies := make([][]Copy, b.N)
	campaigns := make([]string, b.N)
	for i := range copies {
		copies[i] = []Copy{{
			Recipient: fmt.Sprintf("firstname.lastname%d@example.com", i),
			MessageID: fmt.Sprintf("<20261126103000.%08d.campaign@mail.shop-example.com>", i),
		}}
		campaigns[i] = fmt.Sprintf("i%016x", i/10)
	}
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		r.Remember(campaigns[i], copies[i], now)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if _, rem := r.Pending(); rem > 0 && b.N >= 10_000 {
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(rem), "heap-B/copy")
	}
}
