package bench

import (
	"math"
	"runtime/metrics"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RuntimeStats is what a Go milter process's runtime has done so far
// (runtime/metrics, cumulative since it started): the bench milter
// processes report it before and after each end-to-end row, so that a
// row's allocations, collections and scheduling delays are its own.
type RuntimeStats struct {
	GCCycles     uint64  `json:"gc_cycles"`
	AllocBytes   uint64  `json:"alloc_bytes"`
	AllocObjects uint64  `json:"alloc_objects"`
	GCCPU        float64 `json:"gc_cpu_seconds"`    // /cpu/classes/gc/total
	TotalCPU     float64 `json:"total_cpu_seconds"` // /cpu/classes/total (an estimate)
	// CPU is the process's user and system CPU (getrusage, all its
	// threads, to the microsecond): /proc's figure counts 10 ms ticks,
	// a tenth of a row's ratio at a few thousand messages.
	CPU float64 `json:"process_cpu_seconds"`
	// SchedLatency is how long goroutines waited runnable before they
	// ran; GCPauses the stop-the-world pauses of the collector.
	SchedLatency Histogram `json:"sched_latency"`
	GCPauses     Histogram `json:"gc_pauses"`
	// Check is the pipeline's time from the end of a message to its
	// verdict (bulkmilter_processing_duration_seconds) and Store the store
	// calls' within it (bulkmilter_store_request_duration_seconds,
	// op="observe"): what of a paced row's latency is the pipeline's and
	// the store round trip's. Empty for the do-nothing milter.
	Check Histogram `json:"check,omitempty"`
	Store Histogram `json:"store,omitempty"`
}

// Histogram is a runtime/metrics histogram of seconds: Counts[i] values
// fell in [Bounds[i], Bounds[i+1]); infinite bounds are kept as ±1e9 so
// that it travels as JSON.
type Histogram struct {
	Counts []uint64  `json:"counts"`
	Bounds []float64 `json:"bounds"`
}

var runtimeSamples = []string{
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/allocs:bytes",
	"/gc/heap/allocs:objects",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/sched/latencies:seconds",
	"/sched/pauses/total/gc:seconds",
}

// ReadRuntimeStats reads this process's runtime statistics.
func ReadRuntimeStats() RuntimeStats {
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, n := range runtimeSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	f := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			return s[i].Value.Float64()
		}
		return 0
	}
	h := func(i int) Histogram {
		if s[i].Value.Kind() != metrics.KindFloat64Histogram {
			return Histogram{}
		}
		v := s[i].Value.Float64Histogram()
		b := make([]float64, len(v.Buckets))
		for j, x := range v.Buckets {
			b[j] = max(min(x, 1e9), -1e9)
		}
		return Histogram{Counts: append([]uint64(nil), v.Counts...), Bounds: b}
	}
	return RuntimeStats{GCCycles: u(0), AllocBytes: u(1), AllocObjects: u(2), GCCPU: f(3), TotalCPU: f(4),
		SchedLatency: h(5), GCPauses: h(6), CPU: CPUTime().Seconds()}
}

// Sub returns what happened between before and r.
func (r RuntimeStats) Sub(before RuntimeStats) RuntimeStats {
	return RuntimeStats{
		GCCycles: r.GCCycles - before.GCCycles, AllocBytes: r.AllocBytes - before.AllocBytes,
		AllocObjects: r.AllocObjects - before.AllocObjects, GCCPU: r.GCCPU - before.GCCPU, TotalCPU: r.TotalCPU - before.TotalCPU,
		CPU:          r.CPU - before.CPU,
		SchedLatency: r.SchedLatency.Sub(before.SchedLatency), GCPauses: r.GCPauses.Sub(before.GCPauses),
		Check: r.Check.Sub(before.Check), Store: r.Store.Sub(before.Store),
	}
}

// ReadLatencies reads Check and Store from the daemon's metrics in g,
// from their native histograms (10 % buckets, not the classic ones'
// factor of 2 to 2.5).
func ReadLatencies(g prometheus.Gatherer) (check, store Histogram, err error) {
	mfs, err := g.Gather()
	if err != nil {
		return check, store, err
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "bulkmilter_processing_duration_seconds":
				check = nativeHistogram(m.GetHistogram())
			case "bulkmilter_store_request_duration_seconds":
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" && l.GetValue() == "observe" {
						store = nativeHistogram(m.GetHistogram())
					}
				}
			}
		}
	}
	return check, store, nil
}

// nativeHistogram turns a native histogram of positive values into a
// Histogram on a fixed grid of its buckets from 1 µs to 100 s, so that two
// readings subtract bucket by bucket; values outside the grid fall in its
// first or last bucket, the zero bucket's in the first.
func nativeHistogram(h *dto.Histogram) Histogram {
	if h == nil || h.GetSchema() < -4 || h.GetSchema() > 8 {
		return Histogram{}
	}
	scale := math.Exp2(float64(h.GetSchema())) // buckets per doubling
	lo, hi := int(math.Floor(math.Log2(1e-6)*scale)), int(math.Ceil(math.Log2(100)*scale))
	out := Histogram{Counts: make([]uint64, hi-lo+1), Bounds: make([]float64, hi-lo+2)}
	for i := range out.Bounds {
		// Bucket i of the native histogram holds (base^(i-1), base^i].
		out.Bounds[i] = math.Exp2(float64(lo+i-1) / scale)
	}
	out.Counts[0] = h.GetZeroCount()
	idx, count := 0, int64(0)
	deltas := h.GetPositiveDelta()
	for _, sp := range h.GetPositiveSpan() {
		idx += int(sp.GetOffset())
		for range sp.GetLength() {
			if len(deltas) == 0 {
				return out
			}
			count += deltas[0]
			deltas = deltas[1:]
			out.Counts[min(max(idx-lo, 0), hi-lo)] += uint64(max(count, 0))
			idx++
		}
	}
	return out
}

// Sub returns the counts of h less those of before (the same buckets).
func (h Histogram) Sub(before Histogram) Histogram {
	out := Histogram{Counts: append([]uint64(nil), h.Counts...), Bounds: h.Bounds}
	if len(before.Counts) == len(h.Counts) {
		for i := range out.Counts {
			out.Counts[i] -= before.Counts[i]
		}
	}
	return out
}

// Quantile returns the upper bound of the bucket that holds the q-th
// quantile, in seconds (the histogram's resolution, never less than the
// value), and 0 when the histogram is empty.
func (h Histogram) Quantile(q float64) float64 {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 || len(h.Bounds) != len(h.Counts)+1 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= max(want, 1) {
			return h.Bounds[i+1]
		}
	}
	return h.Bounds[len(h.Bounds)-1]
}

// Total is the number of values in the histogram.
func (h Histogram) Total() uint64 {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	return total
}
