package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	gomilter "github.com/d--j/go-milter"
	"github.com/redis/go-redis/v9"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
	"github.com/bulkmilter/bulkmilter/lab/load"
	"github.com/bulkmilter/bulkmilter/lab/redisinfo"
	"github.com/bulkmilter/bulkmilter/milter"
)

// Baseline is a milter that does nothing (go-milter's NoOpMilter) and
// negotiates exactly what bulkmilter's server does: the protocol's own
// cost, against which our overhead is a ratio.
type Baseline struct {
	srv *gomilter.Server
	ln  net.Listener
}

// StartBaseline serves the do-nothing milter on a loopback port.
func StartBaseline() (*Baseline, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("baseline milter: %w", err)
	}
	o := append(milter.ProtocolOptions(), gomilter.WithMilter(func() gomilter.Milter { return gomilter.NoOpMilter{} }))
	b := &Baseline{srv: gomilter.NewServer(o...), ln: ln}
	go b.srv.Serve(ln) //nolint:errcheck // ends with Close
	return b, nil
}

// Addr is the milter's address.
func (b *Baseline) Addr() string { return b.ln.Addr().String() }

// Close stops the server.
func (b *Baseline) Close() error {
	if err := b.srv.Close(); err != nil && !errors.Is(err, gomilter.ErrServerClosed) {
		return err
	}
	return nil
}

// EndToEndOptions describe one end-to-end run.
type EndToEndOptions struct {
	Name       string
	Addr       string // the milter, TCP
	Sessions   int
	PerSession int
	Messages   int64
	Duration   time.Duration
	// Rate, when positive, paces the load at that many messages a second
	// in all (open loop): the latency then is what the milter adds to a
	// message, not the queueing of a saturated closed loop.
	Rate   float64
	Corpus *Corpus
	// Recipients per message, each message to new ones from a population
	// of 200,000.
	Recipients int
	// Header, when set, must be added to every message (the verdict
	// header): a message without it counts as failed.
	Header string
	// Redis, when set, is read before and after for round trips and CPU.
	Redis redis.UniversalClient
	// MilterPids returns the processes serving the milter and StorePids
	// those of its store (redis-server), for CPU per process; empty when
	// they run in this process.
	MilterPids, StorePids func() []int
	// MilterStats, when set, returns the milter process's runtime
	// statistics so far (a Go milter; RuntimeStats).
	MilterStats func() (RuntimeStats, error)
	// Round numbers the run among alternating rounds.
	Round int
}

// EndToEndResult is one end-to-end run.
type EndToEndResult struct {
	Name       string   `json:"name"`
	Round      int      `json:"round,omitempty"`
	Rate       float64  `json:"offered_rate,omitempty"` // 0: as fast as it answers
	Sent       int64    `json:"sent"`
	Answered   int64    `json:"answered"`
	Failed     int64    `json:"failed"`
	Errors     []string `json:"errors,omitempty"`
	Wall       float64  `json:"wall_seconds"`
	MsgsPerSec float64  `json:"msgs_per_second"`
	P50        float64  `json:"p50_ms"`
	P99        float64  `json:"p99_ms"`
	P999       float64  `json:"p999_ms"`
	Max        float64  `json:"max_ms"`
	// CPUPerMsg is the benchmark process's CPU per message: the load
	// client, and the milter too unless it runs in a process of its own,
	// whose CPU is then MilterCPUPerMsg; StoreCPUPerMsg is the store's
	// processes' (redis-server). All in µs. A Go milter's CPU is its own
	// getrusage (RuntimeStats.CPU), to the microsecond; other processes'
	// comes from /proc, in 10 ms ticks.
	CPUPerMsg       float64 `json:"process_cpu_us_per_msg"`
	MilterCPUPerMsg float64 `json:"milter_cpu_us_per_msg,omitempty"`
	StoreCPUPerMsg  float64 `json:"store_cpu_us_per_msg,omitempty"`
	// MilterReadsPerMsg and MilterWritesPerMsg are the read and write
	// system calls of the milter's processes a message (ProcessIO), when
	// it runs in processes of its own.
	MilterReadsPerMsg  float64 `json:"milter_reads_per_msg,omitempty"`
	MilterWritesPerMsg float64 `json:"milter_writes_per_msg,omitempty"`
	// MilterRuntime is what the milter process's Go runtime did in the
	// row, when it reports it (EndToEndOptions.MilterStats).
	MilterRuntime *RowRuntime `json:"milter_runtime,omitempty"`
	// Ratio is MsgsPerSec over the baseline's; P99Delta the p99 over the
	// baseline's p99 (ms). Zero for the baseline itself. PeerRatio is
	// MsgsPerSec over the peer's (Rspamd) in the same round.
	Ratio float64 `json:"ratio_to_baseline,omitempty"`
	// CPURatio is the do-nothing milter's CPU a message over this row's,
	// the milter's and its store's together (same round): the throughput
	// ratio of a host whose cores both are saturated by the milter. It
	// does not depend on how busy the machine is, as a throughput does.
	CPURatio  float64 `json:"cpu_ratio_to_baseline,omitempty"`
	P99Delta  float64 `json:"p99_minus_baseline_ms,omitempty"`
	PeerRatio float64 `json:"ratio_to_peer,omitempty"`
	// Stored is the answered messages that reached the store (signed);
	// the Redis figures are per stored message.
	Stored   int64            `json:"stored,omitempty"`
	Redis    *RedisPerMsg     `json:"redis,omitempty"`
	Verdicts map[string]int64 `json:"verdicts,omitempty"`
}

// unsignedVerdict is the verdict of a message no family could sign.
const unsignedVerdict = "no (unsigned)"

// RedisPerMsg is what Redis did per message that reached the store.
type RedisPerMsg struct {
	// RoundTrips is replies the server wrote (total_writes_processed): one
	// per pipeline or lone command.
	RoundTrips float64 `json:"round_trips"`
	// Scripts is EVALSHA and EVAL calls.
	Scripts float64 `json:"script_calls"`
	// Commands counts every command, those a script calls included.
	Commands float64 `json:"commands"`
	// Connections is the connections the store opened during the run
	// (HELLO calls, in all, not per message): each adds a round trip or
	// two of its own.
	Connections int64 `json:"connections_opened"`
	// SiteCounts is the site's recipient counts the adaptive threshold
	// sent (SETNX calls: no script makes one): each is a round trip of
	// its own, once a minute or 4,096 recipients, not a message's.
	SiteCounts int64 `json:"site_counts"`
	// Writes, ScriptCallsTotal and EvalCalls are the run's whole counts
	// (not per message): reply flushes, EVALSHA and EVAL calls together,
	// and EVAL calls alone (a script the server did not hold). The
	// round-trip target is judged on them, not on the per-message floats.
	Writes           int64   `json:"writes"`
	ScriptCallsTotal int64   `json:"script_calls_total"`
	EvalCalls        int64   `json:"eval_calls"`
	CPUus            float64 `json:"cpu_us"`   // used_cpu_user + used_cpu_sys
	Usec             float64 `json:"cmd_usec"` // time in commands (commandstats)
	Memory           float64 `json:"memory_b"` // used_memory growth
	// ScriptP50us and ScriptP99us are quantiles of the script calls'
	// time inside the server (LATENCY HISTOGRAM evalsha; µs, the upper
	// bound of a power-of-2 bucket): against the milter's store call,
	// what of the round trip is Redis running the script.
	ScriptP50us int64 `json:"script_p50_us,omitempty"`
	ScriptP99us int64 `json:"script_p99_us,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// RowRuntime is a milter process's runtime statistics over one row.
type RowRuntime struct {
	AllocsPerMsg float64 `json:"allocs_per_msg"`
	KBPerMsg     float64 `json:"kb_per_msg"`
	// GCPer1000 is collections per 1,000 messages; GCCPUus the
	// collector's CPU a message (runtime/metrics' estimate, µs).
	GCPer1000 float64 `json:"gc_per_1000_msgs"`
	GCCPUus   float64 `json:"gc_cpu_us_per_msg"`
	// SchedP99us and SchedP999us are quantiles of how long a goroutine
	// waited runnable before it ran (µs, the bucket's upper bound): the
	// queueing for a CPU inside the milter process.
	SchedP99us  float64 `json:"sched_latency_p99_us"`
	SchedP999us float64 `json:"sched_latency_p999_us"`
	// GCPauses is the stop-the-world pauses, GCPauseMaxUs the longest
	// (µs, the bucket's upper bound).
	GCPauses     uint64  `json:"gc_pauses"`
	GCPauseMaxUs float64 `json:"gc_pause_max_us"`
	// CheckP50ms and CheckP99ms are quantiles of the pipeline's time
	// from the end of a message to its verdict, StoreP50ms and StoreP99ms
	// of the store call's within it (ms, the upper bound of a 9 % bucket):
	// the rest of a row's latency is the protocol and the waits for a CPU
	// outside the pipeline. Zero for the do-nothing milter.
	CheckP50ms float64 `json:"check_p50_ms,omitempty"`
	CheckP99ms float64 `json:"check_p99_ms,omitempty"`
	StoreP50ms float64 `json:"store_p50_ms,omitempty"`
	StoreP99ms float64 `json:"store_p99_ms,omitempty"`
}

func rowRuntime(d RuntimeStats, n float64) *RowRuntime {
	return &RowRuntime{
		AllocsPerMsg: float64(d.AllocObjects) / n, KBPerMsg: float64(d.AllocBytes) / 1024 / n,
		GCPer1000: float64(d.GCCycles) * 1000 / n, GCCPUus: d.GCCPU * 1e6 / n,
		SchedP99us: d.SchedLatency.Quantile(0.99) * 1e6, SchedP999us: d.SchedLatency.Quantile(0.999) * 1e6,
		GCPauses: d.GCPauses.Total(), GCPauseMaxUs: d.GCPauses.Quantile(1) * 1e6,
		CheckP50ms: d.Check.Quantile(0.5) * 1e3, CheckP99ms: d.Check.Quantile(0.99) * 1e3,
		StoreP50ms: d.Store.Quantile(0.5) * 1e3, StoreP99ms: d.Store.Quantile(0.99) * 1e3,
	}
}

// EndToEnd drives the milter at o.Addr with lab/load.
func EndToEnd(ctx context.Context, o EndToEndOptions) (EndToEndResult, error) {
	if o.Recipients <= 0 {
		o.Recipients = 1
	}
	msgs := o.Corpus.Messages
	next := func(i int64) load.Message {
		m := &msgs[i%int64(len(msgs))]
		rcpts := make([]string, o.Recipients)
		for j := range rcpts {
			rcpts[j] = fmt.Sprintf("user%d@example.test", (i*int64(o.Recipients)+int64(j))%200000)
		}
		return load.Message{From: "sender@example.org", Rcpts: rcpts, Raw: m.Raw}
	}
	verdicts := newCounter()
	var check func(int64, mtaclient.Result) error
	if o.Header != "" {
		check = func(i int64, res mtaclient.Result) error {
			v, ok := res.Header(o.Header)
			if !ok {
				return fmt.Errorf("no %s header", o.Header)
			}
			kind, _, _ := strings.Cut(v, ";")
			switch {
			case strings.Contains(v, "error="):
				kind += " (store error)"
			case strings.Contains(v, "unsigned"):
				kind = unsignedVerdict
			}
			verdicts.add(kind)
			return nil
		}
	}
	// Warm up, unmeasured: connections to the store opened, the script
	// loaded, pools and buffers grown, as in a daemon that has run a while.
	if _, err := load.Run(ctx, load.Options{
		Network: "tcp", Addr: o.Addr, Sessions: o.Sessions, PerSession: o.PerSession,
		Messages: int64(4 * o.Sessions), Next: func(i int64) load.Message { return next(i + 1<<40) },
	}); err != nil {
		return EndToEndResult{}, err
	}
	var before redisinfo.Snapshot
	var lat0 redisinfo.Latency
	if o.Redis != nil {
		// The histogram first: the INFO snapshot counts every reply
		// written after it, and the bench's own reads must not be among
		// them (LATENCY's reply after it was one round trip more).
		var err error
		if lat0, err = redisinfo.ReadLatency(ctx, o.Redis, "evalsha"); err != nil {
			return EndToEndResult{}, err
		}
		if before, err = redisinfo.Read(ctx, o.Redis); err != nil {
			return EndToEndResult{}, err
		}
	}
	pids := func(f func() []int) []int {
		if f == nil {
			return nil
		}
		return f()
	}
	milterPids, storePids := pids(o.MilterPids), pids(o.StorePids)
	mcpu0, scpu0 := ProcessCPU(milterPids...), ProcessCPU(storePids...)
	mr0, mw0 := ProcessIO(milterPids...)
	var rt0 RuntimeStats
	if o.MilterStats != nil {
		var err error
		if rt0, err = o.MilterStats(); err != nil {
			return EndToEndResult{}, err
		}
	}
	cpu0 := CPUTime()
	rep, err := load.Run(ctx, load.Options{
		Network: "tcp", Addr: o.Addr, Sessions: o.Sessions, PerSession: o.PerSession,
		Messages: o.Messages, Duration: o.Duration, Next: load.Paced(o.Rate, next), Check: check,
	})
	if err != nil {
		return EndToEndResult{}, err
	}
	cpu := CPUTime() - cpu0
	mcpu, scpu := ProcessCPU(milterPids...)-mcpu0, ProcessCPU(storePids...)-scpu0
	mr, mw := ProcessIO(milterPids...)
	var rt RuntimeStats
	if o.MilterStats != nil {
		if rt, err = o.MilterStats(); err != nil {
			return EndToEndResult{}, err
		}
	}
	r := EndToEndResult{
		Name: o.Name, Round: o.Round, Rate: o.Rate, Sent: rep.Sent, Answered: rep.Answered, Failed: rep.Failed, Errors: rep.Errors,
		Wall: rep.Elapsed.Seconds(), MsgsPerSec: rep.PerSecond(),
		P50: ms(rep.Latency.Quantile(0.5)), P99: ms(rep.Latency.Quantile(0.99)),
		P999: ms(rep.Latency.Quantile(0.999)), Max: ms(rep.Latency.Max()),
	}
	if rep.Answered > 0 {
		n := float64(rep.Answered)
		r.CPUPerMsg = float64(cpu.Microseconds()) / n
		r.MilterCPUPerMsg = float64(mcpu.Microseconds()) / n
		r.StoreCPUPerMsg = float64(scpu.Microseconds()) / n
		r.MilterReadsPerMsg, r.MilterWritesPerMsg = float64(mr-mr0)/n, float64(mw-mw0)/n
		if o.MilterStats != nil {
			d := rt.Sub(rt0)
			r.MilterRuntime = rowRuntime(d, n)
			r.MilterCPUPerMsg = d.CPU * 1e6 / n
		}
		// Unsigned messages (no family could sign them) never reach the
		// store: Redis figures are per message that did.
		if o.Header != "" {
			n -= float64(verdicts.get(unsignedVerdict))
			r.Stored = int64(n)
		}
		if o.Redis != nil && n > 0 {
			after, err := redisinfo.Read(ctx, o.Redis)
			if err != nil {
				return r, err
			}
			lat, err := redisinfo.ReadLatency(ctx, o.Redis, "evalsha")
			if err != nil {
				return r, err
			}
			d := after.Sub(before)
			r.Redis = &RedisPerMsg{
				ScriptP50us: lat.Quantile(lat0, 0.5), ScriptP99us: lat.Quantile(lat0, 0.99),
				RoundTrips:       float64(d.Writes) / n,
				Scripts:          float64(d.Commands["evalsha"].Calls+d.Commands["eval"].Calls) / n,
				Commands:         float64(d.Calls()) / n,
				CPUus:            d.CPU * 1e6 / n,
				Usec:             float64(d.Usec()) / n,
				Memory:           float64(d.UsedMemory) / n,
				Connections:      d.Commands["hello"].Calls,
				SiteCounts:       d.Commands["setnx"].Calls,
				Writes:           d.Writes,
				ScriptCallsTotal: d.Commands["evalsha"].Calls + d.Commands["eval"].Calls,
				EvalCalls:        d.Commands["eval"].Calls,
			}
		}
	}
	if o.Header != "" {
		r.Verdicts = verdicts.snapshot()
	}
	return r, nil
}

// Compare fills r's ratios to the baseline.
func (r *EndToEndResult) Compare(base EndToEndResult) {
	if base.MsgsPerSec > 0 {
		r.Ratio = r.MsgsPerSec / base.MsgsPerSec
	}
	r.P99Delta = r.P99 - base.P99
	if c := r.MilterCPUPerMsg + r.StoreCPUPerMsg; c > 0 {
		r.CPURatio = base.MilterCPUPerMsg / c
	}
}

// ComparePeer fills r's ratio to the peer's throughput.
func (r *EndToEndResult) ComparePeer(peer EndToEndResult) {
	if peer.MsgsPerSec > 0 {
		r.PeerRatio = r.MsgsPerSec / peer.MsgsPerSec
	}
}
