package main

import (
	"context"
	"log/slog"
	"net/http"

	"stashd/internal/config"
	"stashd/store"
	"stashd/web"
)

// newConsole builds the daemon's web console from its settings.
func newConsole(st *store.Store, cfg config.Config, log *slog.Logger) (*web.Console, error) {
	proxies, err := cfg.TrustedProxies() // validated by Load
	if err != nil {
		return nil, err
	}
	return web.New(web.Config{Catalogue: st, Token: cfg.ConsoleToken, AllowRemote: cfg.ConsoleRemote,
		TLS: cfg.ConsoleTLSCert != "", BehindProxy: cfg.ConsoleBehindProxy, TrustedProxies: proxies, Logger: log})
}

// demoConsole serves the console of the demo's database and metrics (its
// /metrics) on mux, for loopback clients only, for as long as the demo
// runs; closeConsole releases its pool.
func demoConsole(ctx context.Context, mux *http.ServeMux, dbURL string, metrics http.Handler, log *slog.Logger) (closeConsole func(), err error) {
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 4})
	if err != nil {
		return nil, err
	}
	c, err := web.New(web.Config{Catalogue: st, Logger: log})
	if err != nil {
		st.Close()
		return nil, err
	}
	c.Mount(mux)
	mux.Handle("/metrics", c.Protect(metrics))
	return st.Close, nil
}
