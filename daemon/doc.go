// Package daemon assembles stashd's components for a set of accounts and
// owns their start-up and shutdown order: for each account a paced Telegram
// client, its session pump, listener, ingest pipeline and supervised
// worker pool, set sweeper, delivery stage, catch-up, rescan and
// dead-letter retry loops.
// `stashd serve` and `stashd demo` both run a Daemon; they differ only in
// the Telegram client they hand it (TDLib or the simulator).
//
// daemon.go holds the Daemon and its start-up and shutdown order;
// account.go an account's run (its components, wired and started in
// order, and stopped); resolve.go what an account's start resolves
// (named chats, routes, history starts, sources); spread.go the picking of
// the account that sends each delivery, and hand-overs.
//
// It also owns the account leases (lease.go): an account runs only in the
// instance holding its lease, every fenced write of the account carries
// the lease's epoch (store.WithFence) and every Telegram request is gated
// on it, so that several instances may share one database.
//
// daemon holds no domain logic of its own and must not talk to Telegram or
// the store except to register accounts and sources at start-up and to
// take, renew and release leases.
package daemon
