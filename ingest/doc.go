// Package ingest turns source messages into catalogued, delivered packages.
//
// Pipeline.Handle is the one ingest path: the realtime workers, catch-up,
// the rescan and the dead-letter retry all call it. It applies the dedup
// layers cheapest first (source key, Telegram unique ids, advisory lock and
// re-check, content hash after a streaming download), lists the archive
// within hard bounds, catalogues it and delivers it to every destination by
// remote file id, writing a delivery intent with a token before each send so
// that a crash between send and record is reconciled by searching the
// destination instead of sending twice.
//
// Pool runs an account's supervised workers over the listener's queue;
// SetSweeper completes multipart sets and albums whose parts have all
// arrived and turns sets that stay incomplete into dead letters.
//
// ingest declares the few store and Telegram methods it needs as interfaces;
// it must not reach around them, and it never touches watermarks (the
// listener and catch-up own those).
package ingest
