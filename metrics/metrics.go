// Package metrics defines every Prometheus metric bulkmilter exports, on a
// registry passed in by main, with one typed helper per metric so label
// values cannot be passed in the wrong order. Only the daemon and the
// commands import it: store, detect, milter and feedback each define the
// small Observer interface of the events they report, *Metrics implements
// them all, and the daemon plugs it in. It imports internal/gopool only
// to read its goroutine count. The label values are those packages' constants
// (detect.OutcomeBulk, milter.StageAction, …).
//
// Label values are bounded: never a signature, an address, a message id or
// a queue id.
package metrics

import (
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/gopool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

const namespace = "bulkmilter"

// Metrics holds bulkmilter's metrics. The zero value is not usable; a nil
// *Metrics is, and records nothing (offline commands use it).
type Metrics struct {
	messages        *prometheus.CounterVec
	actions         *prometheus.CounterVec
	signatures      *prometheus.CounterVec
	volume          *prometheus.HistogramVec
	duration        prometheus.Histogram
	stageErrors     *prometheus.CounterVec
	defects         *prometheus.CounterVec
	truncated       prometheus.Counter
	slow            prometheus.Counter
	levels          *prometheus.CounterVec
	held            prometheus.Gauge
	memoryLimited   prometheus.Counter
	storeDuration   *prometheus.HistogramVec
	storeErrors     *prometheus.CounterVec
	storeAhead      *prometheus.CounterVec
	storeFallbacks  *prometheus.CounterVec
	votes           *prometheus.CounterVec
	feedbackRejects *prometheus.CounterVec
	overrides       *prometheus.CounterVec
	senderExempt    *prometheus.CounterVec
	sessionsActive  prometheus.Gauge
	sessions        prometheus.Counter
	inProgress      prometheus.Gauge
	panics          *prometheus.CounterVec
	reloads         *prometheus.CounterVec
	reloadTime      prometheus.Gauge
	reloadOK        prometheus.Gauge
	setInfo         *prometheus.GaugeVec
	refile          refileMetrics

	// The children a judged message records, memoized.
	messageBy   children[prometheus.Counter]
	signatureBy children[prometheus.Counter]
	volumeBy    children[prometheus.Observer]
	levelBy     children[prometheus.Counter]
	storeBy     children[prometheus.Observer]
}

// children memoizes a vector's children by their label values (one or
// two): a judged message records about 15 (its verdict, each family's
// outcome and volume, its level, the store call), and the vector's own
// lookup validates, hashes and compares the values and locks its map each
// time, ~70 % of recording a message (BenchmarkMessageMetrics). Label
// values are bounded, and so is the map.
type children[T any] struct {
	with func(...string) T
	two  bool
	mu   sync.RWMutex
	m    map[[2]string]T
}

func newChildren[T any](with func(...string) T, labels int) children[T] {
	return children[T]{with: with, two: labels == 2, m: map[[2]string]T{}}
}

func (c *children[T]) get(a, b string) T {
	k := [2]string{a, b}
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	if c.two {
		v = c.with(a, b)
	} else {
		v = c.with(a)
	}
	c.mu.Lock()
	c.m[k] = v
	c.mu.Unlock()
	return v
}

// New registers bulkmilter's metrics, the Go and process collectors and a
// build-info metric on reg.
func New(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		messages: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "messages_total",
			Help: "Messages that got a verdict, by verdict (bulk, not_bulk, unsigned, feedback, error).",
		}, []string{"verdict"}),
		actions: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "actions_total",
			Help: "Actions taken on messages, by action (header, subject_tag, recipient_detail, quarantine, tempfail, discard, remove_forged).",
		}, []string{"action"}),
		signatures: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "signatures_total",
			Help: "Signing outcomes per family: signed, or declined with its reason.",
		}, []string{"family", "outcome"}),
		volume: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "verdict_volume",
			Help:    "Highest volume (distinct recipients in the window) a family observed for a message, at verdict time.",
			Buckets: []float64{1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000},
		}, []string{"family"}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "processing_duration_seconds",
			Help:                        "Time from end of message to verdict: extraction, signing and store.",
			Buckets:                     []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
			NativeHistogramBucketFactor: 1.1,
		}),
		stageErrors: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "errors_total",
			Help: "Errors by pipeline stage (parse, sign, store, action, protocol).",
		}, []string{"stage"}),
		defects: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "message_defects_total",
			Help: "Defects found and worked around while reading messages, by kind.",
		}, []string{"kind"}),
		truncated: f.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "messages_truncated_total",
			Help: "Messages larger than the analysis limits; only their first part was analysed.",
		}),
		levels: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "message_levels_total",
			Help: "Judged messages by bulk level (0 not bulk, 5 and up bulk) and kind (declared: a verified signature covers its list headers; undeclared).",
		}, []string{"level", "kind"}),
		slow: f.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "analysis_slow_total",
			Help: "Messages whose analysis took longer than limits.max_analysis_time (a busy machine); they still got the store's verdict, marked \"slow\".",
		}),
		held: f.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "held_bytes",
			Help: "Bytes of messages all milter sessions keep now (header fields, body, recipients), bounded by limits.max_held_bytes.",
		}),
		memoryLimited: f.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "memory_limited_messages_total",
			Help: "Messages cut short because the sessions together held limits.max_held_bytes; each was analysed on what it had kept.",
		}),
		storeDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "store_request_duration_seconds",
			Help:                        "Duration of store requests, by operation.",
			Buckets:                     []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
			NativeHistogramBucketFactor: 1.1,
		}, []string{"op"}),
		storeErrors: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_errors_total",
			Help: "Failed store requests, by operation.",
		}, []string{"op"}),
		storeAhead: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_ahead_total",
			Help: "Times more than a bucket ahead of the store's clock: observations and votes so dated, counted at the store's present instead (what=observation, vote), and pointers and first sightings of buckets ahead of the clock dropped after the clock stepped back (what=bucket).",
		}, []string{"what"}),
		storeFallbacks: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_cluster_fallbacks_total",
			Help: "Script calls of a Redis Cluster's primary (a message's keys of every slot it serves) that it refused, a slot having moved or being migrated, sent again one call a slot, by call (read, write).",
		}, []string{"call"}),
		votes: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "feedback_votes_total",
			Help: "Feedback votes recorded, by kind (not_bulk, bulk).",
		}, []string{"kind"}),
		feedbackRejects: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "feedback_rejected_total",
			Help: "Feedback not recorded, by reason (untrusted, rate_limited, invalid, unsigned, store_error).",
		}, []string{"reason"}),
		overrides: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "feedback_overrides_total",
			Help: "Messages whose verdict feedback votes changed, by scope (global: enough distinct voters; user: the recipient's own vote) and kind (not_bulk, bulk).",
		}, []string{"scope", "kind"}),
		senderExempt: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "sender_exempt_messages_total",
			Help: "Messages never tagged because the site's verifier passed the DKIM signature of an actions.except_senders domain aligned with From, by the verdict they were spared (bulk, not_bulk, unsigned, error).",
		}, []string{"verdict"}),
		sessionsActive: f.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "sessions_active",
			Help: "Milter sessions (MTA connections) open now.",
		}),
		sessions: f.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "sessions_total",
			Help: "Milter sessions opened.",
		}),
		inProgress: f.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "messages_in_progress",
			Help: "Messages between MAIL FROM and their end-of-message reply; a drain waits for these.",
		}),
		panics: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "panics_recovered_total",
			Help: "Panics recovered, by milter callback; each got a safe reply.",
		}, []string{"callback"}),
		reloads: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "config_reloads_total",
			Help: "Configuration reloads, by result (success, failure).",
		}, []string{"result"}),
		reloadTime: f.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "config_last_reload_success_timestamp_seconds",
			Help: "When the configuration was last loaded successfully.",
		}),
		reloadOK: f.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "config_last_reload_successful",
			Help: "Whether the last configuration load succeeded (1) or failed and the previous one still runs (0).",
		}),
		setInfo: f.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "signature_set_info",
			Help: "Constant 1, labelled by the version of the running signature set; counts start afresh when it changes.",
		}, []string{"version"}),
	}
	m.refile = newRefileMetrics(f)
	m.messageBy = newChildren(m.messages.WithLabelValues, 1)
	m.signatureBy = newChildren(m.signatures.WithLabelValues, 2)
	m.volumeBy = newChildren(m.volume.WithLabelValues, 1)
	m.levelBy = newChildren(m.levels.WithLabelValues, 2)
	m.storeBy = newChildren(m.storeDuration.WithLabelValues, 1)
	version, goVersion := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, goVersion = bi.Main.Version, bi.GoVersion
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "pool_goroutines",
		Help: "Goroutines kept between messages to run their analysis and MTA sessions (bounded: a few per core; go_goroutines includes them).",
	}, func() float64 { return float64(gopool.Goroutines()) })
	f.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "A metric with constant value 1 labelled by the build's version and Go version.",
	}, []string{"version", "goversion"}).WithLabelValues(version, goVersion).Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Message counts one verdict and observes its processing time.
func (m *Metrics) Message(verdict string, d time.Duration) {
	if m == nil {
		return
	}
	m.messageBy.get(verdict, "").Inc()
	m.duration.Observe(d.Seconds())
}

// Action counts one action taken.
func (m *Metrics) Action(action string) {
	if m != nil {
		m.actions.WithLabelValues(action).Inc()
	}
}

// SenderExempt counts one message exempt by actions.except_senders, by the
// verdict volume and votes gave it (detect.OutcomeBulk: a tag it was
// spared).
func (m *Metrics) SenderExempt(verdict string) {
	if m != nil {
		m.senderExempt.WithLabelValues(verdict).Inc()
	}
}

// Signature counts one family's outcome for one message: "signed" or the
// short reason it declined.
func (m *Metrics) Signature(family, outcome string) {
	if m != nil {
		m.signatureBy.get(family, outcome).Inc()
	}
}

// Volume observes the highest volume a family saw for one message.
func (m *Metrics) Volume(family string, v int64) {
	if m != nil {
		m.volumeBy.get(family, "").Observe(float64(v))
	}
}

// Error counts one error in a pipeline stage.
func (m *Metrics) Error(stage string) {
	if m != nil {
		m.stageErrors.WithLabelValues(stage).Inc()
	}
}

// Defect counts one message defect of a kind.
func (m *Metrics) Defect(kind string) {
	if m != nil {
		m.defects.WithLabelValues(kind).Inc()
	}
}

// Truncated counts one message cut by the analysis limits.
func (m *Metrics) Truncated() {
	if m != nil {
		m.truncated.Inc()
	}
}

// Level counts one judged message by bulk level (0–9) and kind.
func (m *Metrics) Level(level int, kind string) {
	if m != nil && level >= 0 && level <= 9 {
		m.levelBy.get(strconv.Itoa(level), kind).Inc()
	}
}

// SlowAnalysis counts one message whose analysis was slow.
func (m *Metrics) SlowAnalysis() {
	if m != nil {
		m.slow.Inc()
	}
}

// Held sets the bytes all sessions keep of their messages.
func (m *Metrics) Held(bytes int64) {
	if m != nil {
		m.held.Set(float64(bytes))
	}
}

// MemoryLimited counts one message cut short by the sessions' memory
// budget.
func (m *Metrics) MemoryLimited() {
	if m != nil {
		m.memoryLimited.Inc()
	}
}

// ObserveRequest records one store request; it satisfies the store's
// observer interface.
func (m *Metrics) ObserveRequest(op string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.storeBy.get(op, "").Observe(d.Seconds())
	if err != nil {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// StoreAhead counts n things a store found dated more than a bucket ahead
// of its clock (store.AheadObserver): what is "observation", "vote" or
// "bucket".
func (m *Metrics) StoreAhead(what string, n int) {
	if m != nil {
		m.storeAhead.WithLabelValues(what).Add(float64(n))
	}
}

// ObserveClusterFallback counts a Cluster primary's script call sent
// again one call a slot (store.ClusterObserver): call is "read" or "write".
func (m *Metrics) ObserveClusterFallback(call string) {
	if m != nil {
		m.storeFallbacks.WithLabelValues(call).Inc()
	}
}

// Vote counts one recorded feedback vote.
func (m *Metrics) Vote(kind string) {
	if m != nil {
		m.votes.WithLabelValues(kind).Inc()
	}
}

// FeedbackRejected counts feedback that was not recorded.
func (m *Metrics) FeedbackRejected(reason string) {
	if m != nil {
		m.feedbackRejects.WithLabelValues(reason).Inc()
	}
}

// Override counts one message whose verdict feedback changed: scope
// "global" or "user", kind "not_bulk" or "bulk".
func (m *Metrics) Override(scope, kind string) {
	if m != nil {
		m.overrides.WithLabelValues(scope, kind).Inc()
	}
}

// SessionOpened and SessionClosed track milter sessions.
func (m *Metrics) SessionOpened() {
	if m != nil {
		m.sessions.Inc()
		m.sessionsActive.Inc()
	}
}

// SessionClosed marks a session as finished.
func (m *Metrics) SessionClosed() {
	if m != nil {
		m.sessionsActive.Dec()
	}
}

// Panic counts one recovered panic in a milter callback.
func (m *Metrics) Panic(callback string) {
	if m != nil {
		m.panics.WithLabelValues(callback).Inc()
	}
}

// MessageStarted and MessageDone track messages in progress.
func (m *Metrics) MessageStarted() {
	if m != nil {
		m.inProgress.Inc()
	}
}

// MessageDone marks a message as answered or aborted.
func (m *Metrics) MessageDone() {
	if m != nil {
		m.inProgress.Dec()
	}
}

// ConfigLoaded records the configuration loaded at start, which is not a
// reload.
func (m *Metrics) ConfigLoaded() {
	if m != nil {
		m.reloadOK.Set(1)
		m.reloadTime.SetToCurrentTime()
	}
}

// Reload counts one configuration reload.
func (m *Metrics) Reload(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues("success").Inc()
		m.reloadOK.Set(1)
		m.reloadTime.SetToCurrentTime()
		return
	}
	m.reloads.WithLabelValues("failure").Inc()
	m.reloadOK.Set(0)
}

// SignatureSet records the version of the running signature set; only the
// current version is exported.
func (m *Metrics) SignatureSet(version string) {
	if m != nil {
		m.setInfo.Reset()
		m.setInfo.WithLabelValues(version).Set(1)
	}
}

// collectors returns bulkmilter's own collectors (build_info aside).
func (m *Metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{
		m.messages, m.actions, m.signatures, m.volume, m.duration, m.stageErrors,
		m.defects, m.truncated, m.slow, m.levels, m.held, m.memoryLimited, m.storeDuration, m.storeErrors, m.storeAhead, m.storeFallbacks, m.votes,
		m.feedbackRejects, m.overrides, m.senderExempt, m.sessionsActive, m.sessions, m.inProgress, m.panics, m.reloads,
		m.reloadTime, m.reloadOK, m.setInfo,
	}, m.refile.collectors()...)
}
