package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is everything one "bulklab bench" run measured.
type Report struct {
	Started  time.Time        `json:"started"`
	Machine  Machine          `json:"machine"`
	Corpus   CorpusInfo       `json:"corpus"`
	Pipeline []PipelineResult `json:"pipeline,omitempty"`
	EndToEnd []EndToEndResult `json:"end_to_end,omitempty"`
	Summary  []Summary        `json:"end_to_end_summary,omitempty"`
	// PeerLearned is the fuzzy digests the peer stored during the run.
	PeerLearned int64          `json:"peer_learned,omitempty"`
	Memory      []MemoryResult `json:"memory,omitempty"`
	Targets     []Target       `json:"targets,omitempty"`
}

// Machine says where the figures come from.
type Machine struct {
	CPU        string `json:"cpu"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	Load       string `json:"loadavg"` // /proc/loadavg at the start
	LoadEnd    string `json:"loadavg_end,omitempty"`
	Sessions   int    `json:"sessions,omitempty"`
}

// CorpusInfo describes the sample.
type CorpusInfo struct {
	Sources  []string `json:"sources"`
	Messages int      `json:"messages"`
	AvgBytes float64  `json:"avg_bytes"`
}

// Target is one of issue 9's targets and whether this run met it.
type Target struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Met    bool   `json:"met"`
	Missed string `json:"missed_by,omitempty"`
}

// ThisMachine describes the machine now.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), Load: LoadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// LoadAvg is the first three fields of /proc/loadavg, or "".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Info describes a corpus.
func Info(c *Corpus) CorpusInfo {
	return CorpusInfo{Sources: c.Sources, Messages: len(c.Messages), AvgBytes: float64(c.Bytes) / float64(len(c.Messages))}
}

// Names of the end-to-end rows (paced rows add " @ N/s").
const (
	NameBaseline = "do-nothing milter"
	NameEmbedded = "bulkmilter, embedded store"
	NameRedis    = "bulkmilter, Redis"
	NamePeer     = "Rspamd 3.4 (fuzzy_check, inline learning)"
)

// Evaluate fills r.Targets from the measurements (issue 19's targets; the
// Redis round trips and memory of issue 9).
func (r *Report) Evaluate() {
	r.Targets = nil
	add := func(t Target, missed string) {
		if !t.Met {
			t.Missed = missed
		}
		r.Targets = append(r.Targets, t)
	}
	for _, p := range r.Pipeline {
		if p.Name != "all families" {
			continue
		}
		add(Target{Name: "in process, all default families", Want: "≥ 6,000 msgs/s per core",
			Got: fmt.Sprintf("%.0f msgs/s per core (%.0f µs/msg)", p.MsgsPerCoreSec, p.CPUNsPerMsg/1e3), Met: p.MsgsPerCoreSec >= 6000},
			fmt.Sprintf("%.0f %%", 100*(1-p.MsgsPerCoreSec/6000)))
		add(Target{Name: "in process, allocations", Want: "≤ 159 per message (half of 318)",
			Got: fmt.Sprintf("%.0f per message", p.AllocsPerMsg), Met: p.AllocsPerMsg <= 159},
			fmt.Sprintf("%.0f allocations", p.AllocsPerMsg-159))
	}
	for _, s := range r.Summary {
		base, _, _ := strings.Cut(s.Name, " @ ")
		if base != NameRedis && base != NameEmbedded {
			continue
		}
		if s.Rate > 0 {
			add(Target{Name: s.Name + ": p99 latency", Want: "within 2 ms of the do-nothing milter (median of rounds)",
				Got: fmt.Sprintf("%+.2f ms (%+.2f to %+.2f)", s.P99Delta.Median, s.P99Delta.Min, s.P99Delta.Max), Met: s.P99Delta.Median <= 2},
				fmt.Sprintf("%.2f ms", s.P99Delta.Median-2))
			continue
		}
		want := 0.90
		if base == NameRedis {
			want = 0.70
		}
		add(Target{Name: s.Name + ": throughput", Want: fmt.Sprintf("≥ %.2f of the do-nothing milter (median of rounds)", want),
			Got: fmt.Sprintf("%.2f (%.2f–%.2f)", s.Ratio.Median, s.Ratio.Min, s.Ratio.Max), Met: s.Ratio.Median >= want},
			fmt.Sprintf("%.2f", want-s.Ratio.Median))
		if base == NameRedis && s.PeerRatio.Median > 0 {
			add(Target{Name: s.Name + ": against Rspamd", Want: "≥ 2× Rspamd's throughput (median of rounds)",
				Got: fmt.Sprintf("%.2f× (%.2f–%.2f)", s.PeerRatio.Median, s.PeerRatio.Min, s.PeerRatio.Max), Met: s.PeerRatio.Median >= 2},
				fmt.Sprintf("%.2f×", 2-s.PeerRatio.Median))
		}
	}
	var trips, scripts, n float64
	var opened, sites, over int64
	met := true
	for _, e := range r.EndToEnd {
		if e.Redis != nil {
			trips, scripts, n = max(trips, e.Redis.RoundTrips), max(scripts, e.Redis.Scripts), n+1
			opened, sites = opened+e.Redis.Connections, sites+e.Redis.SiteCounts
			extra, ok := extraRoundTrips(e.Stored, e.Redis)
			met, over = met && ok, over+extra
		}
	}
	if n > 0 {
		add(Target{Name: "Redis round trips", Want: "exactly 1 per message in every run, besides the handshakes of connections opened and the site's counts",
			Got: fmt.Sprintf("at most %.3f per message (%.3f scripts) over %.0f runs, %d connections opened, %d site counts, %d writes beyond what they allow",
				trips, scripts, n, opened, sites, over),
			Met: met}, fmt.Sprintf("%d writes", over))
	}
	for _, m := range r.Memory {
		if m.Store != "redis" {
			continue
		}
		t := Target{Name: "Redis memory", Want: "≤ 300 B per message over the default window",
			Got: fmt.Sprintf("%.1f B/msg (%d messages, %d keys each)", m.BytesPerMsg, m.Messages, m.Keys), Met: m.BytesPerMsg <= 300}
		if m.Messages < 250000 {
			t.Got += "; fewer than 250,000 messages: an upper bound"
		}
		add(t, fmt.Sprintf("%.1f B/msg", m.BytesPerMsg-300))
	}
}

// WriteText writes the report as tables.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	fmt.Fprintf(w, "machine: %s, %d CPUs, GOMAXPROCS %d, %s, load average %s at start, %s at end\n",
		r.Machine.CPU, r.Machine.CPUs, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.Load, r.Machine.LoadEnd)
	fmt.Fprintf(w, "corpus: %d messages, %.0f bytes on average, from %s\n\n",
		r.Corpus.Messages, r.Corpus.AvgBytes, strings.Join(r.Corpus.Sources, ", "))
	if len(r.Pipeline) > 0 {
		fmt.Fprintln(w, "In process (one goroutine; per core = per second of process CPU):")
		p("pipeline\tmsgs\tmsgs/s/core\tMB/s/core\tcpu µs/msg\tmsgs/s wall\tallocs/msg\tKB alloc/msg\tkeys/msg\tp50 µs\tp99 µs\tmax µs\t\n")
		for _, x := range r.Pipeline {
			p("%s\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t\n", x.Name, x.Messages, x.MsgsPerCoreSec, x.MBPerCoreSec,
				x.CPUNsPerMsg/1e3, x.MsgsPerSecWall, x.AllocsPerMsg, x.BytesPerMsg/1024, x.KeysPerMsg, x.P50us, x.P99us, x.MaxUs)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if len(r.EndToEnd) > 0 {
		fmt.Fprintf(w, "End to end over the milter protocol, each round in turn (%d concurrent sessions, loopback; CPU µs/msg of the load client, the milter's processes, the store's):\n", r.Machine.Sessions)
		p("round\tmilter\toffered\tanswered\tfailed\tmsgs/s\tratio\tCPU ratio\tvs peer\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\tΔp99 ms\tclient\tmilter\tstore\t\n")
		for _, x := range r.EndToEnd {
			ratio, cpu, dp, offered, peer := "", "", "", "max", ""
			if x.Ratio > 0 {
				ratio, dp = fmt.Sprintf("%.2f", x.Ratio), fmt.Sprintf("%+.2f", x.P99Delta)
			}
			if x.CPURatio > 0 {
				cpu = fmt.Sprintf("%.2f", x.CPURatio)
			}
			if x.PeerRatio > 0 {
				peer = fmt.Sprintf("%.2f", x.PeerRatio)
			}
			if x.Rate > 0 {
				offered = fmt.Sprintf("%.0f/s", x.Rate)
			}
			p("%d\t%s\t%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%.0f\t%.0f\t%.0f\t\n", x.Round, x.Name, offered, x.Answered, x.Failed,
				x.MsgsPerSec, ratio, cpu, peer, x.P50, x.P99, x.P999, x.Max, dp, x.CPUPerMsg, x.MilterCPUPerMsg, x.StoreCPUPerMsg)
		}
		tw.Flush()
		if len(r.Summary) > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "Medians over the rounds (range); ratios taken within each round:")
			p("milter\trounds\tmsgs/s\tratio\tCPU ratio\tvs peer\tp99 ms\tΔp99 ms\tclient µs\tmilter µs\tstore µs\tmilter reads\twrites\t\n")
			rng := func(x Spread, f string) string {
				if x.Median == 0 && x.Min == 0 && x.Max == 0 {
					return "—"
				}
				return fmt.Sprintf(f+" ("+f+" to "+f+")", x.Median, x.Min, x.Max)
			}
			for _, s := range r.Summary {
				dp := "—"
				if s.Ratio.Median > 0 {
					dp = rng(s.P99Delta, "%+.2f")
				}
				p("%s\t%d\t%s\t%s\t%s\t%s\t%.2f\t%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t\n", s.Name, s.Rounds, rng(s.MsgsPerS, "%.0f"),
					rng(s.Ratio, "%.2f"), rng(s.CPURatio, "%.2f"), rng(s.PeerRatio, "%.2f"), s.P99.Median, dp, s.ClientCPU.Median, s.MilterCPU.Median, s.StoreCPU.Median,
					s.MilterReads.Median, s.MilterWrites.Median)
			}
			tw.Flush()
		}
		if slices.ContainsFunc(r.Summary, func(s Summary) bool { return s.Runtime != nil }) {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "The milter process's Go runtime over each row (runtime/metrics), medians over the rounds; sched = time a goroutine waited runnable, pause = the collector's stop-the-world; check = the pipeline's time from end of message to verdict, store = its store call's:")
			p("milter\tallocs/msg\tKB/msg\tGC/1000 msgs\tGC CPU µs/msg\tsched p99 µs\tsched p99.9 µs\tmax GC pause µs\tcheck p50/p99 ms\tstore p50/p99 ms\t\n")
			for _, s := range r.Summary {
				if x := s.Runtime; x != nil {
					p("%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.2f / %.2f\t%.2f / %.2f\t\n", s.Name, x.AllocsPerMsg.Median, x.KBPerMsg.Median, x.GCPer1000.Median,
						x.GCCPUus.Median, x.SchedP99us.Median, x.SchedP999us.Median, x.GCPauseMaxUs.Median,
						x.CheckP50ms.Median, x.CheckP99ms.Median, x.StoreP50ms.Median, x.StoreP99ms.Median)
				}
			}
			tw.Flush()
		}
		if r.PeerLearned > 0 {
			fmt.Fprintf(w, "  the peer stored %d fuzzy digests\n", r.PeerLearned)
		}
		for _, x := range r.EndToEnd {
			if len(x.Verdicts) > 0 {
				fmt.Fprintf(w, "  %s verdicts: %v\n", x.Name, x.Verdicts)
			}
			for _, e := range x.Errors {
				fmt.Fprintf(w, "  %s error: %s\n", x.Name, e)
			}
		}
		fmt.Fprintln(w)
		var redis []EndToEndResult
		for _, x := range r.EndToEnd {
			if x.Redis != nil {
				redis = append(redis, x)
			}
		}
		if len(redis) > 0 {
			fmt.Fprintln(w, "Redis per signed message (INFO commandstats, cpu, stats, memory; unsigned messages never reach the store):")
			p("run\tround trips\tscript calls\tcommands\tRedis CPU µs\tin commands µs\tscript p50/p99 µs\tused_memory B\tconnections opened (run)\t\n")
			for _, x := range redis {
				p("%s\t%.3f\t%.3f\t%.2f\t%.1f\t%.1f\t≤%d / ≤%d\t%.1f\t%d\t\n", x.Name, x.Redis.RoundTrips, x.Redis.Scripts, x.Redis.Commands,
					x.Redis.CPUus, x.Redis.Usec, x.Redis.ScriptP50us, x.Redis.ScriptP99us, x.Redis.Memory, x.Redis.Connections)
			}
			tw.Flush()
			fmt.Fprintln(w)
		}
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w, "Store memory (distinct messages at the density of a million a day):")
		p("store\tmessages\tkeys/msg\tspan h\tbytes/msg\tMB per million msgs\tfile bytes/msg\t\n")
		for _, m := range r.Memory {
			file := ""
			if m.FileBytesPerMsg > 0 {
				file = fmt.Sprintf("%.1f", m.FileBytesPerMsg)
			}
			p("%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%s\t\n", m.Store, m.Messages, m.Keys, m.Span, m.BytesPerMsg, m.PerMillionMB, file)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "Targets (issue 19; Redis round trips and memory: issue 9):")
		for _, t := range r.Targets {
			mark := "MET   "
			if !t.Met {
				mark = "MISSED"
			}
			fmt.Fprintf(w, "  %s %s: want %s, got %s", mark, t.Name, t.Want, t.Got)
			if t.Missed != "" {
				fmt.Fprintf(w, " (missed by %s)", t.Missed)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// extraRoundTrips judges one run's Redis round trips on its whole counts:
// every stored message makes exactly one script call (EVALSHA; an EVAL is
// a script the server did not hold, a second call); besides them a
// connection the pool opens (a busy machine may find every pooled
// connection in use) costs its handshake (HELLO and two CLIENT SETINFO:
// at most 3 replies), and the adaptive threshold's site count (once a
// minute or 4,096 recipients) is one pipeline of at most 6 commands
// (store.Redis.CountSite: PFADD, PEXPIRE, SETNX, PEXPIRE, PFCOUNT, GET).
// Redis flushes a client's replies once per event-loop pass, so a
// pipeline split across TCP reads is answered in up to one write per
// command: up to 6, not 1. It returns the writes beyond that allowance.
func extraRoundTrips(stored int64, rd *RedisPerMsg) (int64, bool) {
	allowed := rd.ScriptCallsTotal + 3*rd.Connections + 6*rd.SiteCounts
	extra := max(rd.Writes-allowed, 0)
	return extra, stored > 0 && rd.ScriptCallsTotal == stored && rd.Writes >= stored && extra == 0
}
