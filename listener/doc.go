// Package listener turns one account's realtime updates into work: it keeps
// the bounded per-account queue that ingest workers drain, and the in-memory
// state of each watched source (synced or dirty, last id seen, the low
// watermark over in-flight work).
//
// HandleUpdate is called from the tg.Session pump and never blocks: a full
// queue drops the event, counts an overflow and marks the source dirty; an
// id discontinuity, a connection leaving ready or a chat's last message
// running ahead of what was seen also mark it dirty. Dirty marks and
// watermark advances are written to the store by the listener's own
// goroutine, never by the pump.
//
// The listener must not call Telegram and does not ingest anything itself;
// catch-up reads IsDirty and reports progress through CaughtUp.
package listener
