package detect_test

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"runtime"
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
	for r := 0; r < *tailRounds; r++ {
		for i := range c.Messages {
			m := benchMessage(&c.Messages[i], i)
			t0 := threadCPU()
			_ = e.Analyze(m)
			rows[i].cpu = min(rows[i].cpu, threadCPU()-t0)
		}
	}
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
