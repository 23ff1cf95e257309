package detect_test

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/bulkmilter/bulkmilter/detect"
)

// TestTail is a measuring tool, not a check; it runs only with -tail:
//
//	go test ./detect -run TestTail -tail -tail.rounds 20 -v
//
// It prints one SHA-256 over every output of the analysis of the bench
// corpus (keys, explanations, tokens, letters, domains, stats): a speed
// change that claims "output unchanged" shows the same hash before and
// after. Then the thread CPU of each message (the least of -tail.rounds
// runs on one locked thread, so that other processes' slices do not count)
// and the slowest messages, where the long tail of the CPU is.
var (
	tailFlag   = flag.Bool("tail", false, "measure the per-message CPU tail and the output hash of the bench corpus")
	tailRounds = flag.Int("tail.rounds", 7, "runs per message; the least thread CPU counts")
	tailTop    = flag.Int("tail.top", 30, "slowest messages listed")
	tailText   = flag.Int("tail.text", 0, "analyse at most this many bytes of decoded text (limits.max_text_bytes; 0: the default) and count the messages whose keys change")
)

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
// Linux), finer than getrusage's.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// gapSample is where a process's CPU went (runtime/metrics' CPU classes,
// estimates the runtime keeps) beside what getrusage counted.
type gapSample struct {
	process time.Duration // getrusage: user + system, every thread
	classes []float64     // gapClasses, in seconds
	gcs     uint64
	bytes   uint64
}

var gapClasses = []string{
	"/cpu/classes/user:cpu-seconds",
	"/cpu/classes/gc/mark/assist:cpu-seconds",
	"/cpu/classes/gc/mark/dedicated:cpu-seconds",
	"/cpu/classes/gc/mark/idle:cpu-seconds",
	"/cpu/classes/gc/pause:cpu-seconds",
	"/cpu/classes/scavenge/total:cpu-seconds",
	"/cpu/classes/idle:cpu-seconds",
}

func readGap() gapSample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := make([]metrics.Sample, len(gapClasses)+2)
	for i, n := range gapClasses {
		s[i].Name = n
	}
	s[len(gapClasses)].Name = "/gc/cycles/total:gc-cycles"
	s[len(gapClasses)+1].Name = "/gc/heap/allocs:bytes"
	metrics.Read(s)
	g := gapSample{process: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	for i := range gapClasses {
		g.classes = append(g.classes, s[i].Value.Float64())
	}
	g.gcs = s[len(gapClasses)].Value.Uint64()
	g.bytes = s[len(gapClasses)+1].Value.Uint64()
	return g
}

func (g gapSample) minus(o gapSample) gapSample {
	d := gapSample{process: g.process - o.process, gcs: g.gcs - o.gcs, bytes: g.bytes - o.bytes}
	for i := range g.classes {
		d.classes = append(d.classes, g.classes[i]-o.classes[i])
	}
	return d
}

// logGap accounts for the process's CPU a message beyond the analysing
// thread's: the runtime's own estimate of each CPU class, a message.
func logGap(t *testing.T, d gapSample, thread time.Duration, n int) {
	us := func(sec float64) float64 { return sec * 1e6 / float64(n) }
	t.Logf("gap: %d analyses; process CPU %.1f µs a message, the analysing thread's %.1f µs (every run, not the least); %d GC cycles, %.1f KB allocated a message",
		n, us(d.process.Seconds()), us(thread.Seconds()), d.gcs, float64(d.bytes)/1024/float64(n))
	for i, name := range gapClasses {
		t.Logf("gap: %-45s %8.1f µs a message", name, us(d.classes[i]))
	}
}

func TestTail(t *testing.T) {
	if !*tailFlag {
		t.Skip("a measuring tool: run with -tail")
	}
	c := loadBenchCorpus(t)
	e := benchEngine(t, nil)
	if *tailText > 0 {
		def := e
		lim := detect.DefaultLimits
		lim.Text.MaxTextBytes = *tailText
		e = benchEngineLimits(t, nil, lim)
		changed, lost := 0, 0
		for i := range c.Messages {
			a, b := def.Analyze(benchMessage(&c.Messages[i], i)), e.Analyze(benchMessage(&c.Messages[i], i))
			if !slices.Equal(a.Keys, b.Keys) {
				changed++
				for _, k := range a.Keys {
					if !slices.Contains(b.Keys, k) {
						lost++
					}
				}
			}
		}
		t.Logf("text cut at %d bytes: keys change in %d of %d messages (%d keys of the default lost)",
			*tailText, changed, len(c.Messages), lost)
	}

	h := sha256.New()
	for i := range c.Messages {
		a := e.Analyze(benchMessage(&c.Messages[i], i))
		fmt.Fprintf(h, "%d\x00%v\x00%v\x00%q\x00%q\x00%q\x00%+v\x00",
			i, a.Keys, a.Explains, a.Doc.Tokens, a.Doc.Letters, a.Doc.Domains, a.Doc.Stats)
	}
	t.Logf("output sha256 %x (%d messages)", h.Sum(nil), len(c.Messages))

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	type row struct {
		i     int
		cpu   time.Duration
		bytes int
	}
	rows := make([]row, len(c.Messages))
	for i := range rows {
		rows[i] = row{i: i, cpu: time.Hour, bytes: len(c.Messages[i].Raw)}
	}
	g0 := readGap()
	var threadSum time.Duration
	for r := 0; r < *tailRounds; r++ {
		for i := range c.Messages {
			m := benchMessage(&c.Messages[i], i)
			t0 := threadCPU()
			_ = e.Analyze(m)
			d := threadCPU() - t0
			threadSum += d
			rows[i].cpu = min(rows[i].cpu, d)
		}
	}
	logGap(t, readGap().minus(g0), threadSum, *tailRounds*len(c.Messages))
	var sum time.Duration
	for _, r := range rows {
		sum += r.cpu
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.cpu - a.cpu) })
	n := min(*tailTop, len(rows))
	var top time.Duration
	for _, r := range rows[:n] {
		top += r.cpu
	}
	pct := func(p float64) time.Duration { return rows[int(float64(len(rows))*(1-p))].cpu }
	t.Logf("thread CPU a message (least of %d runs): mean %v, median %v, p99 %v, p99.9 %v, max %v; the %d slowest take %.1f %%",
		*tailRounds, sum/time.Duration(len(rows)), pct(0.5), pct(0.99), pct(0.999), rows[0].cpu, n, 100*float64(top)/float64(sum))
	for _, r := range rows[:n] {
		m := &c.Messages[r.i]
		a := e.Analyze(benchMessage(m, r.i))
		ct := m.Header.Get("Content-Type")
		t.Logf("%5d %8v %7d B %6.1f ns/B tokens %5d  %.60s", r.i, r.cpu, r.bytes,
			float64(r.cpu.Nanoseconds())/float64(r.bytes), len(a.Doc.Tokens), ct)
	}
}
