package soak

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/lab/load"
)

func TestParseMetrics(t *testing.T) {
	page := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 17
bulkmilter_messages_total{verdict="bulk"} 3
bulkmilter_messages_total{verdict="not_bulk"} 4.5e+01
bulkmilter_messages_total{verdict="we}ird x"} 2
bulkmilter_store_request_duration_seconds_count{op="observe"} 48 1700000000
# EOF
`
	m, err := ParseMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if m.Get("go_goroutines") != 17 || m.Sum("bulkmilter_messages_total") != 50 ||
		m.Get(`bulkmilter_store_request_duration_seconds_count{op="observe"}`) != 48 || m.Get("absent") != 0 {
		t.Errorf("parsed %v", m)
	}
	if _, err := ParseMetrics(strings.NewReader("go_goroutines\n")); err == nil {
		t.Error("a line without a value parsed")
	}
	if _, err := ParseMetrics(strings.NewReader("go_goroutines x\n")); err == nil {
		t.Error("a non-numeric value parsed")
	}
}

// Each failed property is reported; a clean run reports nothing.
func TestCheck(t *testing.T) {
	start := Sample{Goroutines: 20, RSS: 100 << 20, LiveHeap: 40 << 20, Messages: 10, Observed: 9, Unsigned: 1}
	good := Sample{Goroutines: 22, RSS: 110 << 20, LiveHeap: 45 << 20, Messages: 110, Observed: 108, Unsigned: 2}
	r := &Report{Load: &load.Report{Sent: 100, Answered: 100, Latency: new(load.Histogram)}, Start: start, End: good}
	if p := check(r, 5, 16<<20, 32<<20); len(p) != 0 {
		t.Errorf("clean run: %q", p)
	}
	bad := Sample{Goroutines: 200, RSS: 300 << 20, LiveHeap: 140 << 20, Messages: 105, Observed: 100, Unsigned: 1, StoreErrs: 3}
	r = &Report{Load: &load.Report{Sent: 100, Answered: 98, Failed: 2, Latency: new(load.Histogram)}, Asked: 120, Start: start, End: bad}
	p := check(r, 5, 16<<20, 32<<20)
	for _, want := range []string{"100 messages sent, 120 asked", "2 of 100 messages", "counted 95 messages", "store observed 91", "3 store errors", "goroutines grew by 180", "live heap grew", "resident memory grew"} {
		if !strings.Contains(strings.Join(p, "\n"), want) {
			t.Errorf("problems %q lack %q", p, want)
		}
	}
}

func TestPoolDistinctAndStable(t *testing.T) {
	a, b := Pool(300), Pool(300)
	seen := map[string]bool{}
	for i := range a {
		if !bytes.Equal(a[i].Raw, b[i].Raw) {
			t.Fatalf("message %d differs between two pools", i)
		}
		if seen[string(a[i].Raw)] {
			t.Fatalf("message %d repeated", i)
		}
		seen[string(a[i].Raw)] = true
	}
}

// The mixed soak's checks: a lost message, counts that do not add up, and
// growth of the mean per cycle of faults are reported; the swing within a
// cycle is not.
func TestMixedCheck(t *testing.T) {
	mib := func(v float64) Sample { return Sample{RSS: v * (1 << 20), Goroutines: 12} }
	// Two faults a cycle: after the first RSS is about 40 MiB, after the
	// second (say a reload) about 55 MiB; the first two rounds warm up.
	swing := []Sample{mib(30), mib(50), mib(40), mib(55), mib(41), mib(56), mib(40), mib(54)}
	good := &TargetStats{Name: "good", Sent: 10, Answered: 9, Excused: 1, Samples: swing}
	grow := &TargetStats{Name: "grow", Sent: 10, Answered: 10,
		Samples: []Sample{mib(30), mib(50), mib(40), mib(50), mib(45), mib(55), mib(50), mib(60)}}
	lost := &TargetStats{Name: "lost", Sent: 10, Answered: 8, Failed: 1, NoReply: 1, Samples: swing}
	// Goroutines: a transient sample (30) is not growth; a rising floor is.
	transient := &TargetStats{Name: "transient", Sent: 1, Answered: 1, Samples: slices.Clone(swing)}
	transient.Samples[5].Goroutines = 30
	leak := &TargetStats{Name: "leak", Sent: 1, Answered: 1, Samples: slices.Clone(swing)}
	leak.Samples[6].Goroutines, leak.Samples[7].Goroutines = 20, 20
	p := mixedCheck(&MixedReport{Targets: []*TargetStats{good, grow, lost, transient, leak}}, 2, 2, true)
	all := strings.Join(p, "\n")
	for _, want := range []string{"grow: mean RSS per cycle 45.0–55.0 MiB", "lost: 1 messages lost", "lost: sent 10 ≠ answered 8 + failed 1 + excused 0", "leak: least goroutines per cycle 12–20"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems %q lack %q", p, want)
		}
	}
	if strings.Contains(all, "good") || strings.Contains(all, "transient") || len(p) != 4 {
		t.Errorf("problems %q, want exactly the four above", p)
	}
	if len(good.Cycles) != 3 || good.RSSMin != 47*(1<<20) || good.RSSMax != 48.5*(1<<20) {
		t.Errorf("good: %d cycles, RSS %v–%v, want 3, 47–48.5 MiB", len(good.Cycles), good.RSSMin/(1<<20), good.RSSMax/(1<<20))
	}
}
