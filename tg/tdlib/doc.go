// Package tdlib is the real Telegram adapter: it implements tg.Client for one
// account over github.com/zelenin/go-tdlib v0.7.6 and TDLib 1.8.40.
//
// The adapter is compiled in only with the `libtdjson` build tag, which also
// selects go-tdlib's dynamic linking against libtdjson.so (mk/tdlib.mk
// fetches the library and sets the cgo flags). Without the tag the package
// keeps the same exported API, but New and Version return tg.ErrNoTDLib, so
// the rest of stashd builds and tests without TDLib installed.
//
// go-tdlib's client package is cgo through and through (its every file
// belongs to a package that includes td_json_client.h and links libtdjson),
// so nothing untagged may import it. The adapter therefore uses go-tdlib as
// a transport only: requests go out as raw TDLib JSON and responses come
// back as raw JSON; updates, which go-tdlib hands over already decoded, are
// re-encoded to TDLib JSON. One untagged decoder (decode.go) turns that JSON
// into tg's domain types and typed errors, and is tested on fixtures spelled
// as TDLib 1.8.40 spells them, with or without the library.
//
// What the adapter guarantees, because go-tdlib does not:
//   - go-tdlib's receiver blocks on each listener's channel, which would
//     stall every response. The update pump only decodes and appends to an
//     unbounded queue, never calls TDLib, and a separate goroutine feeds
//     Updates() from the queue.
//   - go-tdlib panics ("send on closed channel", go-tdlib issue #161) when a
//     response for a client arrives after its authorizationStateClosed, and
//     its Authorize loop sends exactly such a request when a handler fails.
//     A failed login therefore closes TDLib itself and never returns to
//     go-tdlib's loop; Close refuses new requests before it sends close;
//     and when TDLib starts closing on its own (authorizationStateClosing,
//     e.g. after a logout elsewhere) the adapter stops sending at once, while
//     TDLib still answers, and ends the update stream when it has closed.
//   - Requests honour their context; go-tdlib's own Send waits up to 60 s.
//   - Files are downloaded asynchronously (synchronous=false) and followed
//     through updateFile; options come from updateOption, not getOption.
//
// tdlib owns the TDLib client of one account and its state directory. It
// must not decide recovery (callers classify errors with tg.Classify), pace
// requests (tg.Paced does) or correlate sends and downloads (tg.Session
// does).
package tdlib
