// Package tgsim is a deterministic, in-process model of what TDLib 1.8.40
// shows a client. Tests, benchmarks and `stashd demo` run stashd on it instead
// of Telegram, so it models the TDLib behaviours stashd relies on, failures
// included: chats unknown until loadChats, updates only for opened channels,
// channel gaps, lost updates across reconnects, server ids n<<20 with holes
// from deletions, searchChatMessages paging (negative offsets, thread filter,
// short pages), temporary messages resolved by updateMessageSendSucceeded,
// asynchronous downloads reported through updateFile, per-account remote file
// ids and session-local file ids, deleteMessages (an account's own messages;
// others' only with delete rights), FLOOD_WAIT and CHANNEL_PRIVATE.
//
// A World holds the ground truth: accounts, chats, forum topics, messages and
// file contents. World.Client starts a fresh "TDLib instance" for an account
// that implements tg.Client; the World sees every such session of an account
// and counts a request an older one makes after a newer one has made its own
// (World.SessionOverlaps: two stashd instances running one account at once). A Generator publishes a seeded, reproducible
// stream of archives, multipart sets, albums, duplicates and noise into a
// World and records what stashd is expected to catalogue (Truth).
//
// The generator builds its archives with stashd/archive/archivetest and
// groups files into packages with archive.ParseName and archive.OrderParts,
// so that its Truth follows the same naming rules stashd does.
//
// tgsim owns only the simulation. It depends on the port (package tg), which
// it must not change, and on package archive; it must not depend on any
// stashd component that uses the port (listener, ingest, store …), so that
// their tests can use it.
package tgsim
