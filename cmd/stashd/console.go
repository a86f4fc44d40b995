package main

import (
	"context"
	"log/slog"
	"net/http"

	"stashd/store"
	"stashd/web"
)

// mountConsole serves the web console at web.Prefix on mux (the metrics
// listener's), with / redirecting to it.
func mountConsole(mux *http.ServeMux, st *store.Store, token string, remote bool, log *slog.Logger) error {
	c, err := web.New(web.Config{Catalogue: st, Token: token, AllowRemote: remote, Logger: log})
	if err != nil {
		return err
	}
	c.Mount(mux)
	return nil
}

// demoConsole serves the console of the demo's database on mux, loopback
// only, for as long as the demo runs; closeConsole releases its pool.
func demoConsole(ctx context.Context, mux *http.ServeMux, dbURL string, log *slog.Logger) (closeConsole func(), err error) {
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 4})
	if err != nil {
		return nil, err
	}
	if err := mountConsole(mux, st, "", false, log); err != nil {
		st.Close()
		return nil, err
	}
	return st.Close, nil
}
