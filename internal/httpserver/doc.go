// Package httpserver builds every HTTP server stashd runs (the daemon's
// metrics and console listener, the demo's, the simulator's audit
// endpoint) with the same bounds, so that no client can hold a connection
// or a goroutine for good: a whole request must arrive within ReadTimeout,
// its answer leave within WriteTimeout, an idle keep-alive is closed after
// IdleTimeout and headers are capped at MaxHeaderBytes. It must not know
// what the servers serve.
package httpserver
