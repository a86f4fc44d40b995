// Package store is stashd's durable state in PostgreSQL (pgx/v5): sources and
// their watermarks, the package catalogue, the delivery queue and deliveries,
// dead letters, the package locks (rows with an owner and an expiry,
// lock.go) that keep workers, accounts and daemon instances from fetching or
// delivering one package twice, the account leases with the fence that
// refuses a stale lease epoch's writes (leases.go), and what a catalogue
// that rewound needs to rebuild its delivery records (rewind.go).
//
// Every write is idempotent (ON CONFLICT clauses) and the invariants that
// matter (one row per source key, content hash and unique id; one delivery per
// package, destination and part) are constraints, not just code. store knows
// nothing of Telegram beyond the ids in tg's types and must not call it.
package store
