package bench

import (
	"runtime"
	"slices"
	"time"

	"github.com/bulkmilter/bulkmilter/lab/sample"
)

// CPUTime is the process's user and system CPU time so far.
func CPUTime() time.Duration { return sample.CPUTime() }

// Corpus and Message are the sample the measurements run on.
type (
	Corpus  = sample.Corpus
	Message = sample.Message
)

// PipelineResult is one in-process measurement.
type PipelineResult struct {
	Name     string  `json:"name"`
	Messages int64   `json:"messages"`
	Bytes    int64   `json:"bytes"`
	Wall     float64 `json:"wall_seconds"`
	CPU      float64 `json:"cpu_seconds"`
	// MsgsPerCoreSec is messages per second of process CPU: the
	// throughput of one core, GC on other cores included.
	MsgsPerCoreSec float64 `json:"msgs_per_core_second"`
	MBPerCoreSec   float64 `json:"mb_per_core_second"` // raw message bytes
	MsgsPerSecWall float64 `json:"msgs_per_second_wall"`
	CPUNsPerMsg    float64 `json:"cpu_ns_per_msg"`
	AllocsPerMsg   float64 `json:"allocs_per_msg"`
	BytesPerMsg    float64 `json:"alloc_bytes_per_msg"`
	KeysPerMsg     float64 `json:"keys_per_msg"`
	// Per-message wall time, from the first pass over the sample: the
	// latency the work itself adds, heavy messages included.
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
	MaxUs float64 `json:"max_us"`
}

// Pipeline runs fn over the corpus, one message after the other on one
// goroutine, until at least minMessages messages and minTime have passed
// (one whole pass at least), and reports per-message figures. fn returns
// the number of keys it made of the message.
func Pipeline(name string, c *Corpus, minMessages int64, minTime time.Duration, fn func(m *Message) int) PipelineResult {
	// Warm up: pools, lazily built tables, the CPU's caches.
	for i := range min(len(c.Messages), 200) {
		fn(&c.Messages[i])
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, t0 := CPUTime(), time.Now()
	var n, bytes, keys int64
	per := make([]time.Duration, 0, len(c.Messages))
	for i := 0; ; i++ {
		if i == len(c.Messages) {
			i = 0
		}
		m := &c.Messages[i]
		if len(per) < len(c.Messages) {
			t := time.Now()
			keys += int64(fn(m))
			per = append(per, time.Since(t))
		} else {
			keys += int64(fn(m))
		}
		n++
		bytes += int64(len(m.Raw))
		if n >= int64(len(c.Messages)) && n >= minMessages && n%64 == 0 && time.Since(t0) >= minTime {
			break
		}
	}
	wall, cpu := time.Since(t0), CPUTime()-cpu0
	runtime.ReadMemStats(&m1)
	r := PipelineResult{
		Name: name, Messages: n, Bytes: bytes, Wall: wall.Seconds(), CPU: cpu.Seconds(),
		AllocsPerMsg: float64(m1.Mallocs-m0.Mallocs) / float64(n),
		BytesPerMsg:  float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n),
		KeysPerMsg:   float64(keys) / float64(n),
		CPUNsPerMsg:  float64(cpu.Nanoseconds()) / float64(n),
	}
	slices.Sort(per)
	q := func(f float64) float64 {
		return float64(per[min(len(per)-1, int(f*float64(len(per))))].Nanoseconds()) / 1e3
	}
	r.P50us, r.P99us, r.MaxUs = q(0.5), q(0.99), float64(per[len(per)-1].Nanoseconds())/1e3
	if cpu > 0 {
		r.MsgsPerCoreSec = float64(n) / cpu.Seconds()
		r.MBPerCoreSec = float64(bytes) / 1e6 / cpu.Seconds()
	}
	if wall > 0 {
		r.MsgsPerSecWall = float64(n) / wall.Seconds()
	}
	return r
}
