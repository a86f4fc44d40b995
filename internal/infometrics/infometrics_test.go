package infometrics_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"stashd/internal/infometrics"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// serve exports stashd_build_info, the lease TTL the ownerless alert
// compares with, and a readable name per source.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestInfoMetrics(t *testing.T) {
	t.Parallel()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.EnsureSource(t.Context(), store.Source{ChatID: -1001000000007, Account: "main", Kind: tg.KindChannel, Title: "Books"}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	infometrics.Register(reg, st, 45*time.Second)
	want := `
# HELP stashd_lease_ttl_seconds The lease_ttl setting: how long an account lease lasts without renewal.
# TYPE stashd_lease_ttl_seconds gauge
stashd_lease_ttl_seconds 45
# HELP stashd_source_info Always 1; names each source (chat id) with its account and title, to join on source.
# TYPE stashd_source_info gauge
stashd_source_info{account="main",source="-1001000000007",title="Books"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "stashd_lease_ttl_seconds", "stashd_source_info"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "stashd_build_info"); err != nil || n != 1 {
		t.Errorf("stashd_build_info: %d series, %v", n, err)
	}
}
