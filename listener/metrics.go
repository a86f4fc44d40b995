package listener

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the listener's Prometheus metrics, shared by every account's
// listener of the process.
type Metrics struct {
	lastEvent  *prometheus.GaugeVec
	connected  *prometheus.GaugeVec
	connState  *prometheus.GaugeVec
	reconnects *prometheus.CounterVec
	overflows  *prometheus.CounterVec
	depth      *prometheus.GaugeVec
	capacity   *prometheus.GaugeVec
	lag        *prometheus.GaugeVec
	dirty      *prometheus.GaugeVec
}

// NewMetrics registers the listener metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lastEvent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_listener_last_event_timestamp_seconds",
			Help: "Unix time of the last update received from Telegram, by account.",
		}, []string{"account"}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_listener_connected",
			Help: "1 while the account's connection to Telegram is ready.",
		}, []string{"account"}),
		connState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_telegram_connection_state",
			Help: "TDLib's connection state per account: 1 for the current state (waiting_for_network, connecting_to_proxy, connecting, updating, ready), 0 for the others.",
		}, []string{"account", "state"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_listener_reconnects_total",
			Help: "Times the account's connection came back to ready after leaving it.",
		}, []string{"account"}),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_listener_overflows_total",
			Help: "New-message events dropped because the ingest queue was full (the source is marked dirty).",
		}, []string{"account"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_ingest_queue_depth",
			Help: "Items waiting in the account's ingest queue.",
		}, []string{"account"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_ingest_queue_capacity",
			Help: "Capacity of the account's ingest queue.",
		}, []string{"account"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_source_lag_messages",
			Help: "Messages between the newest seen in a source and its watermark.",
		}, []string{"source"}),
		dirty: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_source_dirty",
			Help: "1 while a source needs a catch-up.",
		}, []string{"source"}),
	}
	reg.MustRegister(m.lastEvent, m.connected, m.connState, m.reconnects, m.overflows, m.depth, m.capacity, m.lag, m.dirty)
	return m
}
