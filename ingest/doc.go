// Package ingest turns source messages into catalogued packages and
// delivers them.
//
// Ingest reads as one forward path, one file per step, each step calling
// only the next:
//
//  1. classify.go: Pipeline.Handle decides what a message is (known by its
//     source key, not an archive, a single archive, or part of a set: a
//     multipart set by name or an album). The realtime workers, catch-up,
//     the rescan and the dead-letter retry all call it.
//  2. assemble.go: a part waits (in the catalogue) for its set; the
//     sweeper (SetSweeper) takes a set once complete and settled, or turns
//     one that stays incomplete into dead letters.
//  3. fetch.go: the dedup layers for one package: unique ids known,
//     a package lock and re-check, a streaming download with SHA-256 and
//     content hash within the account's disk budget, then the listing
//     within hard bounds.
//  4. catalogue.go: a new package is written with its parts and listing;
//     a known one is linked.
//  5. handoff.go: the deliveries the package owes (by route, or every
//     destination) are queued in PostgreSQL, and the source messages
//     recorded. Ingest never waits for a send.
//
// Delivery is a stage of its own with its own queue (the durable
// waiting_deliveries table): delivery.go's Deliverer sends an account's
// queued deliveries oldest first, each when its route's window is open,
// at the account's send budget, with bounded memory whatever the backlog.
// deliver.go sends one delivery: an intent row with a token is written
// before each send and the caption carries the token, so reconcile.go can
// find a send a crash left unrecorded by searching the destination instead
// of sending twice; spread.go picks the account that sends, and a
// delivery the account may not write is handed over to another.
//
// Package locks are rows with an owner and an expiry (store.Lock), renewed
// while held: no database connection is held while a step waits on
// Telegram.
//
// ingest declares the few store and Telegram methods it needs as interfaces;
// it must not reach around them, and it never touches watermarks (the
// listener and catch-up own those).
package ingest
