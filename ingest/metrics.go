package ingest

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/tg"
)

// Stages of the ingest path, as stashd_ingest_stage_seconds labels them.
const (
	StageClassify  = "classify"
	StageLock      = "lock"
	StageDownload  = "download"
	StageHash      = "hash"
	StageList      = "list"
	StageDeliver   = "deliver"
	StageCatalogue = "catalogue"
)

// Metrics are ingest's Prometheus metrics, shared by every account's pool.
type Metrics struct {
	deliveries *prometheus.CounterVec
	alive      *prometheus.GaugeVec
	configured *prometheus.GaugeVec
	messages   *prometheus.CounterVec
	stage      *prometheus.HistogramVec
	age        prometheus.Histogram
	onDisk     *prometheus.GaugeVec
	budget     *prometheus.GaugeVec
	failed     *prometheus.CounterVec
	spreadSent *prometheus.CounterVec
	// copiesDeleted counts second copies of delivered parts deleted from
	// destinations.
	copiesDeleted *prometheus.CounterVec
	// repacks counts packages recognised as repacks of catalogued ones.
	repacks *prometheus.CounterVec
	// topics counts destination topics found closed or deleted.
	topics *prometheus.CounterVec
}

// Reasons a download failed, as stashd_download_failures_total labels them.
const (
	DownloadStalled = "stalled" // no progress for the stall limit; cancelled
	DownloadStopped = "stopped" // TDLib ended it neither active nor complete
	DownloadError   = "error"   // the request failed
)

// NewMetrics registers the ingest metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		alive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_ingest_workers_alive",
			Help: "Ingest workers currently running, by account.",
		}, []string{"account"}),
		configured: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_ingest_workers_configured",
			Help: "Ingest workers configured, by account.",
		}, []string{"account"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_ingest_messages_total",
			Help: "Source messages handled, by account and outcome (package, duplicate, not_archive, part_pending, dead_letter).",
		}, []string{"account", "outcome"}),
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stashd_ingest_stage_seconds",
			Help:    "Time spent in each ingest stage.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"stage"}),
		age: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stashd_update_age_seconds",
			Help:    "Age of a message (now minus its date) when it was handled; sizes the rescan window.",
			Buckets: []float64{1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600},
		}),
	}
	m.onDisk = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stashd_download_bytes_in_flight",
		Help: "Bytes of downloaded archives an account holds on disk (reserved before download, released once deleted), by account.",
	}, []string{"account"})
	m.budget = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stashd_download_budget_bytes",
		Help: "The download budget: most bytes of downloaded archives an account holds at once, by account.",
	}, []string{"account"})
	m.failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stashd_download_failures_total",
		Help: "Downloads that ended without the file, by account and reason (stalled, stopped, error).",
	}, []string{"account", "reason"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stashd_deliveries_total",
		Help: "Parts delivered, by destination and outcome (sent; reconciled: found in the destination by its token; waiting: a package held by a delivery window, counted once per hold; handed_over: a package given to another account for want of write access).",
	}, []string{"destination", "outcome"})
	m.spreadSent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stashd_deliveries_spread_total",
		Help: "Parts an account sent for a package another account of the daemon ingested (sends spread over the accounts' budgets), by sending account.",
	}, []string{"account"})
	m.copiesDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stashd_duplicate_copies_deleted_total",
		Help: "Second copies of parts already delivered that an account deleted from a destination (a pending send an old TDLib database re-sent after another instance had delivered the part, or copies reconciliation found), by account.",
	}, []string{"account"})
	m.repacks = newRepackMetric()
	m.topics = newTopicMetric()
	reg.MustRegister(m.alive, m.configured, m.messages, m.stage, m.age, m.onDisk, m.budget, m.failed, m.deliveries, m.spreadSent, m.topics,
		m.copiesDeleted, m.repacks)
	return m
}

// Delivery outcomes (stashd_deliveries_total).
const (
	DeliverySent       = "sent"
	DeliveryReconciled = "reconciled"
	DeliveryWaiting    = "waiting"
	DeliveryHandedOver = "handed_over"
)

func (m *Metrics) delivered(dest tg.ChatID, outcome string, n int) {
	if m != nil {
		m.deliveries.WithLabelValues(strconv.FormatInt(int64(dest), 10), outcome).Add(float64(n))
	}
}

func (m *Metrics) spread(account string, n int) {
	if m != nil {
		m.spreadSent.WithLabelValues(account).Add(float64(n))
	}
}

// Spread returns the counter of parts account sent for packages another
// account ingested (for tests).
func (m *Metrics) Spread(account string) prometheus.Counter {
	return m.spreadSent.WithLabelValues(account)
}

func (m *Metrics) deletedCopies(account string, n int) {
	if m != nil {
		m.copiesDeleted.WithLabelValues(account).Add(float64(n))
	}
}

// CopiesDeleted returns the counter of second copies account deleted from
// destinations; the daemon adds those its reconciliations delete.
func (m *Metrics) CopiesDeleted(account string) prometheus.Counter {
	return m.copiesDeleted.WithLabelValues(account)
}

// Deliveries returns the delivery counter of dest and outcome (for tests).
func (m *Metrics) Deliveries(dest tg.ChatID, outcome string) prometheus.Counter {
	return m.deliveries.WithLabelValues(strconv.FormatInt(int64(dest), 10), outcome)
}

func (m *Metrics) observeStage(stage string, start time.Time) {
	if m != nil {
		m.stage.WithLabelValues(stage).Observe(time.Since(start).Seconds())
	}
}

func (m *Metrics) addOnDisk(account string, n int64) {
	if m != nil {
		m.onDisk.WithLabelValues(account).Add(float64(n))
	}
}

func (m *Metrics) downloadFailed(account, reason string) {
	if m != nil {
		m.failed.WithLabelValues(account, reason).Inc()
	}
}

// OnDiskBytes returns the download bytes account holds (for tests and
// status displays).
func (m *Metrics) OnDiskBytes(account string) prometheus.Gauge {
	return m.onDisk.WithLabelValues(account)
}

// DownloadFailures returns the failed-download counter of account for reason.
func (m *Metrics) DownloadFailures(account, reason string) prometheus.Counter {
	return m.failed.WithLabelValues(account, reason)
}
