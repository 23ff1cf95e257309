package bench

import (
	"slices"
)

// Spread is the median of a figure over rounds, with its range.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spread(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	v = slices.Clone(v)
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Spread{Median: m, Min: v[0], Max: v[len(v)-1]}
}

// Summary is one milter's rows over the alternating rounds of a run:
// medians of figures each taken within its round (ratios to the
// do-nothing milter and to the peer of the same round, not of medians).
type Summary struct {
	Name      string  `json:"name"`
	Rate      float64 `json:"offered_rate,omitempty"`
	Rounds    int     `json:"rounds"`
	MsgsPerS  Spread  `json:"msgs_per_second"`
	Ratio     Spread  `json:"ratio_to_baseline"`
	CPURatio  Spread  `json:"cpu_ratio_to_baseline"`
	PeerRatio Spread  `json:"ratio_to_peer"`
	P99       Spread  `json:"p99_ms"`
	P99Delta  Spread  `json:"p99_minus_baseline_ms"`
	ClientCPU Spread  `json:"process_cpu_us_per_msg"`
	MilterCPU Spread  `json:"milter_cpu_us_per_msg"`
	StoreCPU  Spread  `json:"store_cpu_us_per_msg"`
	// MilterReads and MilterWrites are the milter's read and write
	// system calls a message.
	MilterReads  Spread `json:"milter_reads_per_msg"`
	MilterWrites Spread `json:"milter_writes_per_msg"`
	// Runtime is the medians of the rows' RowRuntime, when the milter
	// reported it.
	Runtime *RuntimeSummary `json:"milter_runtime,omitempty"`
}

// RuntimeSummary is RowRuntime over the rounds.
type RuntimeSummary struct {
	AllocsPerMsg Spread `json:"allocs_per_msg"`
	KBPerMsg     Spread `json:"kb_per_msg"`
	GCPer1000    Spread `json:"gc_per_1000_msgs"`
	GCCPUus      Spread `json:"gc_cpu_us_per_msg"`
	SchedP99us   Spread `json:"sched_latency_p99_us"`
	SchedP999us  Spread `json:"sched_latency_p999_us"`
	GCPauseMaxUs Spread `json:"gc_pause_max_us"`
	CheckP50ms   Spread `json:"check_p50_ms"`
	CheckP99ms   Spread `json:"check_p99_ms"`
	StoreP50ms   Spread `json:"store_p50_ms"`
	StoreP99ms   Spread `json:"store_p99_ms"`
}

// Summarize groups rows by name, in the order names first appear.
func Summarize(rows []EndToEndResult) []Summary {
	var names []string
	by := map[string][]EndToEndResult{}
	for _, r := range rows {
		if _, ok := by[r.Name]; !ok {
			names = append(names, r.Name)
		}
		by[r.Name] = append(by[r.Name], r)
	}
	out := make([]Summary, 0, len(names))
	for _, n := range names {
		rs := by[n]
		col := func(f func(EndToEndResult) float64) Spread {
			v := make([]float64, 0, len(rs))
			for _, r := range rs {
				v = append(v, f(r))
			}
			return spread(v)
		}
		var rt *RuntimeSummary
		if rs[0].MilterRuntime != nil {
			rcol := func(f func(*RowRuntime) float64) Spread {
				v := make([]float64, 0, len(rs))
				for _, r := range rs {
					if r.MilterRuntime != nil {
						v = append(v, f(r.MilterRuntime))
					}
				}
				return spread(v)
			}
			rt = &RuntimeSummary{
				AllocsPerMsg: rcol(func(r *RowRuntime) float64 { return r.AllocsPerMsg }),
				KBPerMsg:     rcol(func(r *RowRuntime) float64 { return r.KBPerMsg }),
				GCPer1000:    rcol(func(r *RowRuntime) float64 { return r.GCPer1000 }),
				GCCPUus:      rcol(func(r *RowRuntime) float64 { return r.GCCPUus }),
				SchedP99us:   rcol(func(r *RowRuntime) float64 { return r.SchedP99us }),
				SchedP999us:  rcol(func(r *RowRuntime) float64 { return r.SchedP999us }),
				GCPauseMaxUs: rcol(func(r *RowRuntime) float64 { return r.GCPauseMaxUs }),
				CheckP50ms:   rcol(func(r *RowRuntime) float64 { return r.CheckP50ms }),
				CheckP99ms:   rcol(func(r *RowRuntime) float64 { return r.CheckP99ms }),
				StoreP50ms:   rcol(func(r *RowRuntime) float64 { return r.StoreP50ms }),
				StoreP99ms:   rcol(func(r *RowRuntime) float64 { return r.StoreP99ms }),
			}
		}
		out = append(out, Summary{
			Runtime: rt,
			Name:    n, Rate: rs[0].Rate, Rounds: len(rs),
			MsgsPerS:     col(func(r EndToEndResult) float64 { return r.MsgsPerSec }),
			Ratio:        col(func(r EndToEndResult) float64 { return r.Ratio }),
			CPURatio:     col(func(r EndToEndResult) float64 { return r.CPURatio }),
			PeerRatio:    col(func(r EndToEndResult) float64 { return r.PeerRatio }),
			P99:          col(func(r EndToEndResult) float64 { return r.P99 }),
			P99Delta:     col(func(r EndToEndResult) float64 { return r.P99Delta }),
			ClientCPU:    col(func(r EndToEndResult) float64 { return r.CPUPerMsg }),
			MilterCPU:    col(func(r EndToEndResult) float64 { return r.MilterCPUPerMsg }),
			StoreCPU:     col(func(r EndToEndResult) float64 { return r.StoreCPUPerMsg }),
			MilterReads:  col(func(r EndToEndResult) float64 { return r.MilterReadsPerMsg }),
			MilterWrites: col(func(r EndToEndResult) float64 { return r.MilterWritesPerMsg }),
		})
	}
	return out
}
