// Package infometrics exports what dashboards and alerts join on beside the
// daemon's own metrics: stashd_build_info, stashd_lease_ttl_seconds and
// stashd_source_info. It reads the catalogue (store) and TDLib's version;
// it owns no loop and touches nothing else.
package infometrics

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/store"
	"stashd/tg/tdlib"
)

// Version is stashd's module version, "devel" for a build outside a
// release.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// Register registers on reg what the dashboards and alerts join on beside the
// daemon's own metrics: stashd_build_info, the lease TTL the ownerless
// alert compares with, and stashd_source_info naming each source (read
// from the catalogue at each scrape).
func Register(reg prometheus.Registerer, st *store.Store, leaseTTL time.Duration) {
	td, err := tdlib.Version()
	if err != nil {
		td = "none"
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "stashd_build_info",
		Help:        "Always 1; the labels name the stashd, Go and TDLib versions of the running binary.",
		ConstLabels: prometheus.Labels{"version": Version(), "go_version": runtime.Version(), "tdlib_version": td},
	})
	build.Set(1)
	ttl := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stashd_lease_ttl_seconds",
		Help: "The lease_ttl setting: how long an account lease lasts without renewal.",
	})
	ttl.Set(leaseTTL.Seconds())
	reg.MustRegister(build, ttl, &sourceInfo{st: st})
}

// sourceInfo exports stashd_source_info{source, account, title} = 1 for
// every source in the catalogue, so that panels and alerts keyed by chat id
// can show a readable name (join on source). Sources are bounded by the
// configuration.
type sourceInfo struct{ st *store.Store }

var sourceInfoDesc = prometheus.NewDesc("stashd_source_info",
	"Always 1; names each source (chat id) with its account and title, to join on source.",
	[]string{"source", "account", "title"}, nil)

func (s *sourceInfo) Describe(ch chan<- *prometheus.Desc) { ch <- sourceInfoDesc }

func (s *sourceInfo) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srcs, err := s.st.Sources(ctx, "")
	if err != nil {
		// Names are a convenience: a scrape without them is better than a
		// failed one (the catalogue may be migrating, or briefly away).
		return
	}
	for _, src := range srcs {
		ch <- prometheus.MustNewConstMetric(sourceInfoDesc, prometheus.GaugeValue, 1,
			strconv.FormatInt(int64(src.ChatID), 10), src.Account, src.Title)
	}
}
