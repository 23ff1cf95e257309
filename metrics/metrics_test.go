package metrics

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md")

// exercise calls every helper once so every metric has a sample.
func exercise(m *Metrics) {
	m.Message("bulk", time.Millisecond)
	m.Action("header")
	m.Signature("imatch", "signed")
	m.Volume("imatch", 12)
	m.Error("store")
	m.SlowAnalysis()
	m.Level(7, "undeclared")
	m.Held(1 << 20)
	m.MemoryLimited()
	m.Defect("bad-charset")
	m.Truncated()
	m.ObserveRequest("observe", time.Millisecond, errors.New("x"))
	m.StoreAhead("observation", 1)
	m.ObserveClusterFallback("read")
	m.Vote("not_bulk")
	m.FeedbackRejected("untrusted")
	m.Override("user", "not_bulk")
	m.SenderExempt("bulk")
	m.SessionOpened()
	m.MessageStarted()
	m.Panic("EndOfMessage")
	m.ConfigLoaded()
	m.Reload(true)
	m.SignatureSet("s0123456789")
	m.Refiled(time.Second)
	m.RefileSkipped("not_in_inbox", 2)
	m.RefileFailed(1)
	m.RefileQueue(3, 40)
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
	if len(ours) != described+2 { // +2: build_info and pool_goroutines are not in collectors()
		t.Fatalf("%d bulkmilter metrics gathered, %d described: exercise() misses a helper", len(ours), described+2)
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
	want := testenv.Golden(t, path, []byte(b.String()), *update)
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
	m.Message("bulk", time.Millisecond)
	m.Message("bulk", time.Millisecond)
	m.Message("not_bulk", time.Millisecond)
	if got := testutil.ToFloat64(m.messages.WithLabelValues("bulk")); got != 2 {
		t.Errorf("bulk messages = %v, want 2", got)
	}
	m.SessionOpened()
	m.SessionOpened()
	m.SessionClosed()
	if got := testutil.ToFloat64(m.sessionsActive); got != 1 {
		t.Errorf("sessions_active = %v, want 1", got)
	}
	var nilM *Metrics
	nilM.Message("bulk", time.Second) // must not panic
}

// A failed reload flips config_last_reload_successful without touching
// the success timestamp; a new signature set replaces the old info series.
func TestReloadAndSignatureSet(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.ConfigLoaded()
	m.SignatureSet("s0000000001")
	m.Reload(true)
	m.Reload(false)
	m.SignatureSet("s0000000002")
	m.MessageStarted()
	m.MessageStarted()
	m.MessageDone()
	want := `
# HELP bulkmilter_config_last_reload_successful Whether the last configuration load succeeded (1) or failed and the previous one still runs (0).
# TYPE bulkmilter_config_last_reload_successful gauge
bulkmilter_config_last_reload_successful 0
# HELP bulkmilter_config_reloads_total Configuration reloads, by result (success, failure).
# TYPE bulkmilter_config_reloads_total counter
bulkmilter_config_reloads_total{result="failure"} 1
bulkmilter_config_reloads_total{result="success"} 1
# HELP bulkmilter_messages_in_progress Messages between MAIL FROM and their end-of-message reply; a drain waits for these.
# TYPE bulkmilter_messages_in_progress gauge
bulkmilter_messages_in_progress 1
# HELP bulkmilter_signature_set_info Constant 1, labelled by the version of the running signature set; counts start afresh when it changes.
# TYPE bulkmilter_signature_set_info gauge
bulkmilter_signature_set_info{version="s0000000002"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"bulkmilter_config_last_reload_successful", "bulkmilter_config_reloads_total",
		"bulkmilter_messages_in_progress", "bulkmilter_signature_set_info"); err != nil {
		t.Error(err)
	}
	if ts := testutil.ToFloat64(m.reloadTime); ts < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("config_last_reload_success_timestamp_seconds = %v, want about now", ts)
	}
}

// The memoized children are the vectors' own series, labelled as the
// vector would, under concurrent use, and a message's records allocate
// nothing once each series exists.
func TestChildrenMemo(t *testing.T) {
	m := New(prometheus.NewRegistry())
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				m.Signature("imatch", "signed")
				m.Signature("imatch", "too_short")
				m.Signature("sift", "signed")
				m.Level(7, "undeclared")
				m.Level(7, "declared")
				m.Volume("imatch", 3)
				m.ObserveRequest("observe", time.Millisecond, nil)
			}
		}()
	}
	for range 4 {
		<-done
	}
	for _, c := range []struct {
		got  prometheus.Collector
		want float64
	}{
		{m.signatures.WithLabelValues("imatch", "signed"), 400},
		{m.signatures.WithLabelValues("imatch", "too_short"), 400},
		{m.signatures.WithLabelValues("sift", "signed"), 400},
		{m.levels.WithLabelValues("7", "undeclared"), 400},
		{m.levels.WithLabelValues("7", "declared"), 400},
	} {
		if got := testutil.ToFloat64(c.got); got != c.want {
			t.Errorf("%v: %v, want %v", c.got, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.signatures); n != 3 {
		t.Errorf("%d signature series, want 3", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		m.Signature("imatch", "signed")
		m.Volume("imatch", 3)
		m.Level(7, "undeclared")
		m.ObserveRequest("observe", time.Millisecond, nil)
		m.Message("bulk", time.Millisecond)
	}); n != 0 {
		t.Errorf("a message's records allocate %.0f objects", n)
	}
}
