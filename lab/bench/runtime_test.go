package bench

import (
	"runtime"
	"testing"
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
