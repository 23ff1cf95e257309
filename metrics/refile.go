package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// refileMetrics are the metrics of package refile (issue 17).
type refileMetrics struct {
	refiled    prometheus.Counter
	skipped    *prometheus.CounterVec
	failed     prometheus.Counter
	queued     prometheus.Gauge
	remembered prometheus.Gauge
	latency    prometheus.Histogram
}

func newRefileMetrics(f promauto.Factory) refileMetrics {
	return refileMetrics{
		refiled: f.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "refiled_total",
			Help: "Copies of a campaign delivered before its threshold and moved to Bulk once it crossed it.",
		}),
		skipped: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "refile_skipped_total",
			Help: "Copies not moved, by reason (not_in_inbox, voted_not_bulk, unknown_user, no_message_id, ambiguous_message_id, ledger_full, queue_full; state_unreadable counts unreadable state files).",
		}, []string{"reason"}),
		failed: f.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "refile_failed_total",
			Help: "Copies left where they were after the last retry failed (refile.retries).",
		}),
		queued: f.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "refile_queue_copies",
			Help: "Copies waiting to be moved (campaigns that crossed their threshold).",
		}),
		remembered: f.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "refile_ledger_copies",
			Help: "Copies remembered before their campaign's threshold (recipient and Message-ID), bounded by refile.max_entries.",
		}),
		latency: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "refile_latency_seconds",
			Help:    "Time from a campaign crossing its threshold to one of its earlier copies moved to Bulk.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}),
	}
}

func (r refileMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.refiled, r.skipped, r.failed, r.queued, r.remembered, r.latency}
}

// Refiled counts one copy moved, d after its campaign crossed.
func (m *Metrics) Refiled(d time.Duration) {
	if m != nil {
		m.refile.refiled.Inc()
		m.refile.latency.Observe(d.Seconds())
	}
}

// RefileSkipped counts n copies not moved, for a reason.
func (m *Metrics) RefileSkipped(reason string, n int) {
	if m != nil {
		m.refile.skipped.WithLabelValues(reason).Add(float64(n))
	}
}

// RefileFailed counts n copies given up.
func (m *Metrics) RefileFailed(n int) {
	if m != nil {
		m.refile.failed.Add(float64(n))
	}
}

// RefileQueue sets the copies queued for a move and those remembered.
func (m *Metrics) RefileQueue(queued, remembered int) {
	if m != nil {
		m.refile.queued.Set(float64(queued))
		m.refile.remembered.Set(float64(remembered))
	}
}
