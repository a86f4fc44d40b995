// Package service is the one shape every stashd loop has (listener, ingest
// pool, catch-up, rescan, retry): Start(ctx) launches one goroutine, Stop()
// cancels it and waits, and both are idempotent. It also holds the small
// helpers those loops share: a ticker that fires once at start, and a sleep
// that returns on cancel. It knows nothing about Telegram or the store.
package service
