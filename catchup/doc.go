// Package catchup makes each source complete again after any doubt: it
// takes the account's dirty sources (claimed with FOR UPDATE SKIP LOCKED so
// several daemon instances share the work), reads the chat's last message
// id (a local TDLib call) and either hands the source back to the live
// stream at once or pages forward from the watermark with
// searchChatMessages, feeding the one ingest path and checkpointing the
// watermark after every page.
//
// It applies the scan-skip rules: a synced source costs nothing, a dirty
// one whose last message is at or below the watermark costs one getChat,
// cold sources and sources in an open circuit wait. Forums are one chat.
// catchup must not change the in-memory source state except through the
// listener's CaughtUp.
package catchup
