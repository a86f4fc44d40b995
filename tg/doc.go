// Package tg is stashd's port to Telegram: the small Client interface every
// other package talks through, the domain types it speaks in (chats, messages,
// documents, updates) and the typed errors callers decide recovery on.
//
// tg owns no I/O of its own. Adapters implement Client: tg/tdlib over
// go-tdlib and TDLib, sim/tgsim as a deterministic in-process simulator. The
// adapters depend on tg, never the other way round.
//
// Besides the port, tg holds two pieces of adapter-independent plumbing that
// every account needs: Session, which drains a client's updates without ever
// blocking and correlates asynchronous sends and downloads, and Paced, which
// gives each account its own rate limiter, honours FLOOD_WAIT and counts
// requests.
package tg
