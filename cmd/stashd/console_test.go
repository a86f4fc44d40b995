package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"stashd/internal/config"
	"stashd/internal/pgtest"
	"stashd/store"
)

// The console answers a search while ingest holds every connection of the
// daemon's pool: its queries run on a pool of their own.
func TestConsoleSearchesWhileMainPoolIsExhausted(t *testing.T) {
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c, closeConsole, err := newConsole(t.Context(), st, config.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeConsole)
	mux := http.NewServeMux()
	c.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	// Every connection of the main pool busy in pg_sleep.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	n := st.Pool().Config().MaxConns
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = st.Pool().Exec(ctx, `SELECT pg_sleep(60)`)
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); st.Pool().Stat().AcquiredConns() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the main pool's connections were not all taken")
		}
	}

	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	resp, err := client.Get(srv.URL + "/console/?q=archive")
	if err != nil {
		t.Fatalf("search with the main pool exhausted: %v after %s", err, time.Since(start))
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("search with the main pool exhausted: %d after %s: %s", resp.StatusCode, time.Since(start), body)
	}
}
