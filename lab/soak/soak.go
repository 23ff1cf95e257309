// Package soak holds a milter daemon under many concurrent MTA sessions
// for a while and checks that it neither leaks nor loses anything: every
// message answered, the daemon's own message and store counts equal to
// what was sent, and goroutines and memory back where they were once the
// load stops. "bulklab soak" wires it to a daemon it spawns or one that
// already runs; a short version runs in CI.
//
// It may import internal/mtaclient and lab/load; the daemon under test is a separate
// process.
package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/lab/load"
)

// Options describe a soak run.
type Options struct {
	Network, Addr string // the milter
	MetricsURL    string // the daemon's /metrics, e.g. http://127.0.0.1:9357/metrics
	Sessions      int    // concurrent MTA connections
	PerSession    int    // messages per connection before it is reopened (default 20)
	// Warmup runs the same load before the start sample, so that start
	// and end are both taken after a burst of the same concurrency and
	// the store holds every key the run will touch.
	Warmup   time.Duration
	Duration time.Duration
	// Messages, when set, ends the warm-up after one pass over the pool
	// and the run after that many messages, whatever the time: counts
	// that do not depend on how busy the machine is (the CI test).
	Messages int64
	// Settle is how long to wait after the load for goroutines to end and
	// memory to come back (default 5 s); the samples are polled until
	// they are within bounds or Settle ends.
	Settle time.Duration
	// Pool is the number of distinct messages (default 2000): the load
	// cycles through them so that the store's size is bounded and memory
	// growth means a leak.
	Pool int
	// Rate paces the load at that many messages per second in all (0:
	// as fast as the daemon answers). A closed loop of hundreds of
	// sessions saturates the daemon, and its latency is then sessions
	// divided by throughput, whatever the daemon does; a rate below
	// capacity measures the daemon's own latency.
	Rate float64
	// Progress, when set, gets a line every Every (default 10 s).
	Progress io.Writer
	Every    time.Duration
	// Bounds on growth from start to end.
	MaxGoroutineGrowth float64 // default 5
	MaxHeapGrowth      float64 // live heap, bytes; default 16 MiB or a quarter of the start, whichever is larger
	MaxRSSGrowth       float64 // bytes; default 32 MiB or a quarter of the start, whichever is larger
}

// Sample is what the daemon's /metrics said at one moment.
type Sample struct {
	At         time.Time
	Goroutines float64 // go_goroutines less bulkmilter_pool_goroutines (kept, bounded)
	RSS        float64 // process_resident_memory_bytes
	HeapInuse  float64 // go_memstats_heap_inuse_bytes
	// LiveHeap is the heap the last garbage collection kept,
	// go_memstats_next_gc_bytes / (1 + go_gc_gogc_percent/100). Heap in
	// use also holds the garbage made since, up to as much again, so it
	// depends on where the load stopped in the GC cycle; the live heap
	// does not.
	LiveHeap  float64
	Messages  float64 // sum of bulkmilter_messages_total
	Unsigned  float64 // bulkmilter_messages_total{verdict="unsigned"}
	Observed  float64 // store observe requests
	StoreErrs float64 // sum of bulkmilter_store_errors_total
	Sessions  float64 // bulkmilter_sessions_active
}

func (s Sample) String() string {
	return fmt.Sprintf("goroutines %.0f, RSS %.1f MiB, heap in use %.1f MiB, live heap %.1f MiB, messages %.0f, store observes %.0f, store errors %.0f",
		s.Goroutines, s.RSS/(1<<20), s.HeapInuse/(1<<20), s.LiveHeap/(1<<20), s.Messages, s.Observed, s.StoreErrs)
}

// Report is the outcome of a run.
type Report struct {
	Load       *load.Report
	Asked      int64 // Options.Messages: the load must send exactly that many
	Start, End Sample
	// Problems lists every check that failed; empty means the soak held.
	Problems []string
}

// OK reports whether every check held.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "load:  %s\n", r.Load)
	fmt.Fprintf(&b, "start: %s\n", r.Start)
	fmt.Fprintf(&b, "end:   %s\n", r.End)
	fmt.Fprintf(&b, "daemon counted %.0f messages, %.0f store observes (+%.0f unsigned) for %d sent\n",
		r.End.Messages-r.Start.Messages, r.End.Observed-r.Start.Observed, r.End.Unsigned-r.Start.Unsigned, r.Load.Sent)
	if r.OK() {
		b.WriteString("soak held: every message answered, counts exact, no growth\n")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "FAILED: %s\n", p)
	}
	return b.String()
}

// Run warms up, samples, runs the load, settles, samples again and
// checks. It returns an error only when the run could not be made (bad
// options, metrics unreachable); failed checks are in the report.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if opt.Sessions <= 0 || (opt.Duration <= 0 && opt.Messages <= 0) || opt.Addr == "" || opt.MetricsURL == "" {
		return nil, errors.New("soak: sessions, duration or messages, milter address and metrics URL are required")
	}
	if opt.Settle <= 0 {
		opt.Settle = 5 * time.Second
	}
	if opt.Pool <= 0 {
		opt.Pool = 2000
	}
	if opt.Every <= 0 {
		opt.Every = 10 * time.Second
	}
	if opt.MaxGoroutineGrowth <= 0 {
		opt.MaxGoroutineGrowth = 5
	}
	pool := Pool(opt.Pool)
	lopt := load.Options{
		Network: opt.Network, Addr: opt.Addr, Sessions: opt.Sessions, PerSession: opt.PerSession,
		Next:  func(i int64) load.Message { return pool[i%int64(len(pool))] },
		Check: hasVerdict,
	}
	paced := func(o load.Options) load.Options {
		o.Next = load.Paced(opt.Rate, o.Next)
		return o
	}
	var warm int64
	if opt.Warmup > 0 || opt.Messages > 0 {
		w := lopt
		// Long enough for a pass over the pool, the store then holds
		// every key the run touches (the embedded store is in the
		// daemon's memory).
		w.Duration = opt.Warmup
		if opt.Messages > 0 {
			w.Duration, w.Messages = 0, int64(opt.Pool)
		}
		wr, err := load.Run(ctx, paced(w))
		if err != nil {
			return nil, err
		}
		warm = wr.Sent
	}
	// Start: once the daemon has counted the warm-up and closed its
	// sessions (Settle bounds the wait).
	start, err := settle(ctx, opt.MetricsURL, opt.Settle, func(s Sample) bool { return s.Sessions == 0 && s.Messages >= float64(warm) })
	if err != nil {
		return nil, err
	}
	r := &Report{Start: start, Asked: opt.Messages}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	if opt.Progress != nil {
		go func() {
			t := time.NewTicker(opt.Every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					if s, err := Scrape(runCtx, opt.MetricsURL); err == nil {
						fmt.Fprintf(opt.Progress, "%6s  %s\n", time.Since(start.At).Round(time.Second), s)
					}
				}
			}
		}()
	}
	lopt.Duration, lopt.Messages = opt.Duration, opt.Messages
	if opt.Messages > 0 {
		lopt.Duration = 0
	}
	r.Load, err = load.Run(runCtx, paced(lopt))
	close(done)
	if err != nil {
		return nil, err
	}

	heapBound := bound(opt.MaxHeapGrowth, start.LiveHeap, 16<<20)
	rssBound := bound(opt.MaxRSSGrowth, start.RSS, 32<<20)
	sent := float64(r.Load.Sent)
	r.End, err = settle(ctx, opt.MetricsURL, opt.Settle, func(s Sample) bool {
		return s.Messages-start.Messages >= sent && s.Goroutines-start.Goroutines <= opt.MaxGoroutineGrowth &&
			s.LiveHeap-start.LiveHeap <= heapBound && s.RSS-start.RSS <= rssBound
	})
	if err != nil {
		return nil, err
	}
	r.Problems = check(r, opt.MaxGoroutineGrowth, heapBound, rssBound)
	return r, nil
}

func bound(set, start, floor float64) float64 {
	if set > 0 {
		return set
	}
	return max(floor, start/4)
}

// check lists what failed.
func check(r *Report, goroutines, heap, rss float64) []string {
	var p []string
	l := r.Load
	if l.Sent == 0 {
		p = append(p, "no message was sent")
	}
	if r.Asked > 0 && l.Sent != r.Asked {
		p = append(p, fmt.Sprintf("%d messages sent, %d asked", l.Sent, r.Asked))
	}
	if l.Failed > 0 || l.Answered != l.Sent {
		p = append(p, fmt.Sprintf("%d of %d messages got no reply or no verdict; first errors: %q", l.Sent-l.Answered, l.Sent, l.Errors))
	}
	if got := r.End.Messages - r.Start.Messages; got != float64(l.Sent) {
		p = append(p, fmt.Sprintf("the daemon counted %.0f messages (bulkmilter_messages_total), %d were sent", got, l.Sent))
	}
	if got := (r.End.Observed - r.Start.Observed) + (r.End.Unsigned - r.Start.Unsigned); got != float64(l.Sent) {
		p = append(p, fmt.Sprintf("the store observed %.0f messages (+ unsigned), %d were sent", got, l.Sent))
	}
	if e := r.End.StoreErrs - r.Start.StoreErrs; e != 0 {
		p = append(p, fmt.Sprintf("%.0f store errors", e))
	}
	if g := r.End.Goroutines - r.Start.Goroutines; g > goroutines {
		p = append(p, fmt.Sprintf("goroutines grew by %.0f (%.0f → %.0f), bound %.0f", g, r.Start.Goroutines, r.End.Goroutines, goroutines))
	}
	if g := r.End.LiveHeap - r.Start.LiveHeap; g > heap {
		p = append(p, fmt.Sprintf("live heap grew by %.1f MiB, bound %.1f MiB", g/(1<<20), heap/(1<<20)))
	}
	if g := r.End.RSS - r.Start.RSS; g > rss {
		p = append(p, fmt.Sprintf("resident memory grew by %.1f MiB, bound %.1f MiB", g/(1<<20), rss/(1<<20)))
	}
	return p
}

// settle polls /metrics until ok holds or d has passed, and returns the
// last sample.
func settle(ctx context.Context, url string, d time.Duration, ok func(Sample) bool) (Sample, error) {
	deadline := time.Now().Add(d)
	for {
		s, err := Scrape(ctx, url)
		if err != nil {
			return s, err
		}
		if ok(s) || !time.Now().Before(deadline) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// hasVerdict fails an answer without the verdict header, or that is not
// a plain continue (the soak's messages are never tempfailed).
func hasVerdict(i int64, res mtaclient.Result) error {
	if v, ok := res.Header("X-Bulk"); !ok || v == "" {
		return fmt.Errorf("no verdict header; modifications %v", res.Mods)
	}
	return nil
}

// Scrape reads one sample from a /metrics page.
func Scrape(ctx context.Context, url string) (Sample, error) {
	m, err := scrapeMetrics(ctx, url)
	if err != nil {
		return Sample{}, err
	}
	s := sampleOf(m)
	if s.Goroutines == 0 {
		return s, fmt.Errorf("scrape %s: no go_goroutines sample", url)
	}
	return s, nil
}

func sampleOf(m Metrics) Sample {
	s := Sample{
		At:         time.Now(),
		Goroutines: m.Get("go_goroutines") - m.Get("bulkmilter_pool_goroutines"),
		RSS:        m.Get("process_resident_memory_bytes"),
		HeapInuse:  m.Get("go_memstats_heap_inuse_bytes"),
		Messages:   m.Sum("bulkmilter_messages_total"),
		Unsigned:   m.Get(`bulkmilter_messages_total{verdict="unsigned"}`),
		Observed:   m.Get(`bulkmilter_store_request_duration_seconds_count{op="observe"}`),
		StoreErrs:  m.Sum("bulkmilter_store_errors_total"),
		Sessions:   m.Get("bulkmilter_sessions_active"),
	}
	if gogc := m.Get("go_gc_gogc_percent"); gogc > 0 {
		s.LiveHeap = m.Get("go_memstats_next_gc_bytes") / (1 + gogc/100)
	}
	return s
}

func scrapeMetrics(ctx context.Context, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// Metrics are the samples of a Prometheus text page, by their full name
// with labels as written, e.g. `bulkmilter_messages_total{verdict="bulk"}`.
type Metrics map[string]float64

// ParseMetrics reads the Prometheus (or OpenMetrics) text format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the last space outside the labels; an
		// OpenMetrics timestamp or exemplar is not used by the daemon.
		end := strings.LastIndexByte(line, '}')
		sp := strings.IndexByte(line[end+1:], ' ')
		if sp < 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		name := line[:end+1+sp]
		val := strings.Fields(line[end+1+sp:])[0]
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		m[name] = v
	}
	return m, sc.Err()
}

// Get returns one sample, 0 when absent.
func (m Metrics) Get(sample string) float64 { return m[sample] }

// Sum adds every sample of a metric name, whatever its labels.
func (m Metrics) Sum(name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}
