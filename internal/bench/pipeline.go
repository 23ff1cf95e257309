package bench

import (
	"runtime"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/sample"
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
	for i := 0; ; i++ {
		if i == len(c.Messages) {
			i = 0
		}
		m := &c.Messages[i]
		keys += int64(fn(m))
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
	if cpu > 0 {
		r.MsgsPerCoreSec = float64(n) / cpu.Seconds()
		r.MBPerCoreSec = float64(bytes) / 1e6 / cpu.Seconds()
	}
	if wall > 0 {
		r.MsgsPerSecWall = float64(n) / wall.Seconds()
	}
	return r
}
