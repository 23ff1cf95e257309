package bench

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmilter/bulkmilter/metrics"
)

func TestHistogramQuantile(t *testing.T) {
	h := Histogram{Counts: []uint64{0, 90, 9, 1}, Bounds: []float64{-1e9, 0.001, 0.002, 0.004, 1e9}}
	for _, c := range []struct {
		q, want float64
	}{{0.5, 0.002}, {0.9, 0.002}, {0.99, 0.004}, {1, 1e9}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (Histogram{Counts: []uint64{0, 0}, Bounds: []float64{0, 1, 2}}).Quantile(0.99); got != 0 {
		t.Errorf("empty: got %v, want 0", got)
	}
	d := h.Sub(Histogram{Counts: []uint64{0, 90, 0, 0}, Bounds: h.Bounds})
	if got := d.Quantile(0.5); got != 0.004 || d.Total() != 10 {
		t.Errorf("after Sub: Quantile(0.5) = %v, total %d; want 0.004, 10", got, d.Total())
	}
}

var sink [][]byte

func TestReadRuntimeStatsCounts(t *testing.T) {
	before := ReadRuntimeStats()
	for range 1000 {
		sink = append(sink, make([]byte, 64))
	}
	runtime.GC()
	d := ReadRuntimeStats().Sub(before)
	sink = nil
	if d.AllocObjects < 1000 || d.AllocBytes < 64_000 {
		t.Errorf("got %d objects, %d bytes allocated; want at least 1000 and 64000", d.AllocObjects, d.AllocBytes)
	}
	if d.GCCycles < 1 || d.GCPauses.Total() < 1 {
		t.Errorf("got %d GC cycles, %d pauses after runtime.GC; want at least 1 each", d.GCCycles, d.GCPauses.Total())
	}
	if len(d.SchedLatency.Bounds) != len(d.SchedLatency.Counts)+1 {
		t.Errorf("scheduling latency: %d bounds for %d counts", len(d.SchedLatency.Bounds), len(d.SchedLatency.Counts))
	}
}

// TestReadRuntimeStatsCPU: the process's CPU agrees with the kernel's
// account in /proc (10 ms ticks, read at other instants: two ticks).
func TestReadRuntimeStatsCPU(t *testing.T) {
	pid := os.Getpid()
	before, proc0 := ReadRuntimeStats(), ProcessCPU(pid)
	var x uint64
	for ProcessCPU(pid)-proc0 < 50*time.Millisecond {
		for i := range 100_000 {
			x += uint64(i) * x
		}
	}
	d, proc := ReadRuntimeStats().Sub(before), ProcessCPU(pid)-proc0
	if got := time.Duration(d.CPU * 1e9); got < proc-2*clockTick || got > proc+2*clockTick {
		t.Errorf("CPU %v, /proc %v (x %d): want within two ticks", got, proc, x)
	}
}

// TestReadLatencies: the daemon's two latency histograms, read from a
// registry twice and subtracted, give the row's quantiles to within a
// bucket (9 %).
func TestReadLatencies(t *testing.T) {
	reg := prometheus.NewRegistry()
	met := metrics.New(reg)
	for range 100 {
		met.ObserveRequest("observe", 2*time.Millisecond, nil) // before the row
	}
	_, before, err := ReadLatencies(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		met.ObserveRequest("observe", time.Duration(100+i)*time.Microsecond, nil)
		met.ObserveRequest("vote", time.Second, nil)
	}
	check, after, err := ReadLatencies(reg)
	if err != nil {
		t.Fatal(err)
	}
	if check.Total() != 0 {
		t.Errorf("check histogram holds %d values, want 0", check.Total())
	}
	row := after.Sub(before)
	if row.Total() != 1000 {
		t.Fatalf("row holds %d values, want 1000", row.Total())
	}
	for _, q := range []struct{ q, want float64 }{{0.5, 600e-6}, {0.99, 1090e-6}} {
		if got := row.Quantile(q.q); got < q.want || got > q.want*1.1 {
			t.Errorf("quantile %.2f = %.0f µs, want %.0f to %.0f", q.q, got*1e6, q.want*1e6, q.want*1.1e6)
		}
	}
}
