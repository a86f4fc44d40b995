package store_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"stashd/store"
)

func TestScratchLoad(t *testing.T) {
	url := os.Getenv("SCRATCH_URL")
	if url == "" {
		t.Skip()
	}
	st, err := store.Open(t.Context(), store.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := loadBench(t.Context(), st); err != nil {
		t.Fatal(err)
	}
}

func TestScratchQuery(t *testing.T) {
	url := os.Getenv("SCRATCH_URL")
	if url == "" {
		t.Skip()
	}
	st, err := store.Open(t.Context(), store.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, txt := range strings.Split(os.Getenv("SCRATCH_Q"), ",") {
		q := store.SearchQuery{Text: txt, Limit: 20}
		if os.Getenv("SCRATCH_PLAN") != "" {
			plans, err := store.ExplainSearch(t.Context(), st, q, false)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Println(strings.Join(plans, "\n----\n"))
		}
		var durs []time.Duration
		var page store.SearchPage
		for range 30 {
			t0 := time.Now()
			page, err = st.Search(t.Context(), q)
			durs = append(durs, time.Since(t0))
			if err != nil {
				t.Fatal(err)
			}
		}
		p50, p95 := percentiles(durs)
		fmt.Printf("%-20q %3d hits next=%v p50 %.2f p95 %.2f\n", txt, len(page.Hits), page.Next != "", ms(p50), ms(p95))
	}
}
