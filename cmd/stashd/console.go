package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"stashd/internal/config"
	"stashd/store"
	"stashd/web"
)

// Console pool: the console's queries run on a small pool of their own,
// each cancelled by the server after consoleQueryTimeout, so that an
// ingest load holding every connection of the daemon's pool leaves the
// console answering.
const (
	consoleConns        = 3
	consoleQueryTimeout = 10 * time.Second
)

// newConsole builds the daemon's web console from its settings, over a
// pool of its own on st's database; closeConsole releases that pool.
func newConsole(ctx context.Context, st *store.Store, cfg config.Config, log *slog.Logger) (c *web.Console, closeConsole func(), err error) {
	proxies, err := cfg.TrustedProxies() // validated by Load
	if err != nil {
		return nil, nil, err
	}
	own, err := st.WithOwnPool(ctx, consoleConns, consoleQueryTimeout)
	if err != nil {
		return nil, nil, err
	}
	c, err = web.New(web.Config{Catalogue: own, Token: cfg.ConsoleToken, AllowRemote: cfg.ConsoleRemote,
		TLS: cfg.ConsoleTLSCert != "", BehindProxy: cfg.ConsoleBehindProxy, TrustedProxies: proxies, Logger: log})
	if err != nil {
		own.Close()
		return nil, nil, err
	}
	return c, own.Close, nil
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
