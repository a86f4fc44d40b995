package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"stashd/store"
)

// dbCollector exports the store's connection pool and group commit
// figures, read at each scrape: the pool shows whether anything holds
// connections (nothing should while it waits on Telegram), the group
// commit how many writes share a commit and how long commits take.
type dbCollector struct {
	st                                   *store.Store
	conns, maxConns, waits, waitSeconds  *prometheus.Desc
	commits, units, failed, commitSecond *prometheus.Desc
}

func newDBCollector(st *store.Store) *dbCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &dbCollector{st: st,
		conns:        d("stashd_db_connections", "Connections of the daemon's PostgreSQL pool by state: acquired (running a statement or a transaction) or idle.", "state"),
		maxConns:     d("stashd_db_connections_max", "The most connections the pool opens (serve: accounts x workers x 2 + 16)."),
		waits:        d("stashd_db_acquire_waits_total", "Times a statement waited for a connection because every one was acquired."),
		waitSeconds:  d("stashd_db_acquire_wait_seconds_total", "Seconds statements waited for a connection."),
		commits:      d("stashd_db_group_commits_total", "Group commits run: transactions that carried the catalogue's and the delivery records' writes of several callers."),
		units:        d("stashd_db_group_commit_units_total", "Units of work the group commits held (one per package catalogued, delivery intent, sent record...); over stashd_db_group_commits_total, the mean batch."),
		failed:       d("stashd_db_group_commit_failed_units_total", "Units of work a group commit told an error (their callers retry)."),
		commitSecond: d("stashd_db_group_commit_seconds_total", "Seconds spent running group commits, from taking a connection to the answer of COMMIT."),
	}
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.maxConns, c.waits, c.waitSeconds, c.commits, c.units, c.failed, c.commitSecond} {
		ch <- d
	}
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.st.Pool().Stat()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(p.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(p.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.maxConns, prometheus.GaugeValue, float64(p.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(p.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waitSeconds, prometheus.CounterValue, p.EmptyAcquireWaitTime().Seconds())
	g := c.st.CommitStats()
	ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(g.Commits))
	ch <- prometheus.MustNewConstMetric(c.units, prometheus.CounterValue, float64(g.Units))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(g.Failed))
	ch <- prometheus.MustNewConstMetric(c.commitSecond, prometheus.CounterValue, g.Flushing.Seconds())
}
