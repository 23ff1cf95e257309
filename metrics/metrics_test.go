package metrics

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md")

// exercise calls every helper once so every metric has a sample.
func exercise(m *Metrics) {
	m.Message(VerdictBulk, time.Millisecond)
	m.Action("header")
	m.Signature("imatch", "signed")
	m.Volume("imatch", 12)
	m.Error(StageStore)
	m.Defect("bad-charset")
	m.Truncated()
	m.ObserveRequest("observe", time.Millisecond, errors.New("x"))
	m.Vote("not_bulk")
	m.FeedbackRejected("untrusted")
	m.Override("user", "not_bulk")
	m.SessionOpened()
	m.Panic("EndOfMessage")
	m.Reload(true)
}

// TestMetricsDoc keeps docs/metrics.md generated from the registry, so the
// docs never name a metric the code does not have.
func TestMetricsDoc(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	exercise(m)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}

	// Every registered bulkmilter metric must have been exercised above.
	descs := make(chan *prometheus.Desc, 100)
	go func() {
		for _, c := range m.collectors() {
			c.Describe(descs)
		}
		close(descs)
	}()
	var described int
	for range descs {
		described++
	}
	var ours []*dto.MetricFamily
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), namespace+"_") {
			ours = append(ours, f)
		}
	}
	if len(ours) != described+1 { // +1: build_info is not in collectors()
		t.Fatalf("%d bulkmilter metrics gathered, %d described: exercise() misses a helper", len(ours), described+1)
	}

	var b strings.Builder
	b.WriteString("# Metrics\n\nGenerated from the registry by `go test ./metrics -update`; do not edit.\n")
	b.WriteString("Go runtime (`go_*`) and process (`process_*`) collectors are exported too.\n\n")
	b.WriteString("| name | type | labels | help |\n|---|---|---|---|\n")
	sort.Slice(ours, func(i, j int) bool { return ours[i].GetName() < ours[j].GetName() })
	for _, f := range ours {
		var labels []string
		if len(f.Metric) > 0 {
			for _, l := range f.Metric[0].Label {
				labels = append(labels, l.GetName())
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.GetName(), strings.ToLower(f.GetType().String()),
			strings.Join(labels, ", "), f.GetHelp())
	}
	const path = "../docs/metrics.md"
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./metrics -update)", err)
	}
	if string(want) != b.String() {
		t.Errorf("%s is out of date; run go test ./metrics -update", path)
	}
}

func TestLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	exercise(New(reg))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, namespace) {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestHelpersCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Message(VerdictBulk, time.Millisecond)
	m.Message(VerdictBulk, time.Millisecond)
	m.Message(VerdictNotBulk, time.Millisecond)
	if got := testutil.ToFloat64(m.messages.WithLabelValues(VerdictBulk)); got != 2 {
		t.Errorf("bulk messages = %v, want 2", got)
	}
	m.SessionOpened()
	m.SessionOpened()
	m.SessionClosed()
	if got := testutil.ToFloat64(m.sessionsActive); got != 1 {
		t.Errorf("sessions_active = %v, want 1", got)
	}
	var nilM *Metrics
	nilM.Message(VerdictBulk, time.Second) // must not panic
}
