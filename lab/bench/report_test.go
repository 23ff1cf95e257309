package bench

import (
	"strings"
	"testing"
)

// The targets are judged from the measurements: the per-core rate of all
// families, Redis throughput from the run at full speed, p99 from the
// paced run when there is one, round trips from both, memory.
func TestEvaluate(t *testing.T) {
	r := &Report{
		Pipeline: []PipelineResult{
			{Name: "imatch", MsgsPerCoreSec: 9000},
			{Name: "all families", MsgsPerCoreSec: 4500, CPUNsPerMsg: 222e3},
		},
		EndToEnd: []EndToEndResult{
			{Name: "do-nothing milter", MsgsPerSec: 1000, P99: 50},
			{Name: "bulkmilter, Redis", MsgsPerSec: 750, Ratio: 0.75, P99: 70, P99Delta: 20,
				Redis: &RedisPerMsg{RoundTrips: 1, Scripts: 1}},
			{Name: "do-nothing milter @ 150/s", Rate: 150, MsgsPerSec: 150, P99: 4},
			{Name: "bulkmilter, Redis @ 150/s", Rate: 150, MsgsPerSec: 150, Ratio: 1, P99: 8, P99Delta: 4,
				Redis: &RedisPerMsg{RoundTrips: 1.002, Scripts: 1}},
		},
		Memory: []MemoryResult{{Store: "redis", Messages: 250000, Keys: 29, BytesPerMsg: 310}},
	}
	r.Evaluate()
	got := map[string]Target{}
	for _, tg := range r.Targets {
		got[tg.Name] = tg
	}
	want := map[string]bool{
		"in process, all default families":             false,
		"bulkmilter, Redis: throughput":                true,
		"bulkmilter, Redis: Redis round trips":         true,
		"bulkmilter, Redis @ 150/s: p99 latency":       true,
		"bulkmilter, Redis @ 150/s: Redis round trips": false,
		"Redis memory": false,
	}
	if len(got) != len(want) {
		t.Errorf("targets %v, want %v", r.Targets, want)
	}
	for name, met := range want {
		tg, ok := got[name]
		if !ok || tg.Met != met {
			t.Errorf("%s: %+v, want met=%v", name, tg, met)
		}
		if ok && !tg.Met && tg.Missed == "" && !strings.Contains(name, "round trips") {
			t.Errorf("%s: missed without saying by how much", name)
		}
	}
	if m := got["in process, all default families"].Missed; !strings.HasPrefix(m, "10 % short") {
		t.Errorf("in-process shortfall %q", m)
	}
	if _, ok := got["bulkmilter, Redis: p99 latency"]; ok {
		t.Error("p99 judged at saturation although a paced run exists")
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil || !strings.Contains(b.String(), "MISSED Redis memory") {
		t.Errorf("report text: %v\n%s", err, b.String())
	}
}
