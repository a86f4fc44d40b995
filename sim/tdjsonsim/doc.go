// Package tdjsonsim serves the Telegram simulator (sim/tgsim) as TDLib JSON,
// so that the production TDLib adapter (tg/tdlib over go-tdlib) can run
// against the simulated world through the real cgo boundary.
//
// The other half is the stand-in libtdjson.so (td/standin, built by
// mk/standin.mk): it exports TDLib's four JSON functions and relays them over
// a Unix socket, named by the environment variable STASHD_TDJSON_SOCKET
// (SocketEnv), to a Server of this package. `stashd sim` runs one as its own
// process; the end-to-end test runs one in-process.
//
// # Wire protocol
//
// One connection per process using the stand-in library. Each line the
// library writes is one td_send: the request's TDLib JSON with "@client_id"
// added. Each line the Server writes is one TDLib JSON object for
// td_receive: a response (with the request's "@extra" echoed) or an update,
// both carrying "@client_id". The Server keeps one session per client id
// of a connection; a connection that ends takes its sessions with it.
//
// # A session
//
// A session is one TDLib instance. Its first request makes it report, as
// TDLib 1.8.40 does before anything else, updateOption "version" and
// "commit_hash" and then authorizationStateWaitTdlibParameters. setTdlibParameters names the
// account: it is the name of the directory that holds database_directory
// (tg/tdlib puts the database in <state dir>/database, and stashd names an
// account's state directory after the account). An account of the World is
// logged in: the session starts a tgsim client for it (World.Client, a
// fresh TDLib instance) and reports authorizationStateReady; any other
// name reports authorizationStateWaitPhoneNumber, and a login can never
// finish. close is answered ok first, as TDLib answers it, then the
// session reports authorizationStateClosing, answers the requests still
// running, closes the tgsim client and reports authorizationStateClosed, after which the session sends nothing more
// (go-tdlib crashes on anything that arrives after Closed).
//
// Every logged-in session is a tgsim session of its account (a new
// World.Client), whatever its process: a second database directory named
// after the same account (another stashd instance's fresh login) is a
// second session of the same user, so the world sees every instance that
// runs an account and counts as an overlap a request an older session makes
// after a newer one has made its own (World.SessionOverlaps), which the
// ground truth reports. The sends an instance left pending are re-sent
// only by the next instance on its directory, as TDLib re-sends them from
// the directory's binlog. Requests TDLib answers itself (getOption,
// getAuthorizationState, getSupergroup, close) never reach the server and
// are no overlap.
//
// Requests are translated into tgsim calls, so the simulator decides every
// outcome and counts every call (tgsim's call counts are the requests the
// Server served, by method). Errors are written as TDLib writes them: the
// code and message of the *tg.Error in the chain (429 "Too Many Requests:
// retry after N", 400 "Chat not found", 400 CHANNEL_PRIVATE, 404 "Not
// Found", ...); a request abandoned by close is 500 "Request aborted".
// Updates of the tgsim client are written as TDLib 1.8.40 spells them (see
// tg/tdlib/testdata), so that the adapter decodes them back to the same
// port values. As in TDLib, a send's outcome (updateMessageSendSucceeded
// or updateMessageSendFailed) is written after the answer to its
// sendMessage, although the simulator may settle it sooner.
//
// # Held to TDLib's schema
//
// In the package's tests every request a Server reads and every object it
// writes is checked against the td_api.tl that the go-tdlib module ships
// (internal/tdschema): constructors and functions that exist, members
// that are their fields, JSON types as TDLib writes them (int64 as
// strings), every field TDLib writes present, answers of the class their
// request returns. A violation fails the test that caused it, or the run
// (TestMain) for a Server started elsewhere; the test client checks the
// same for `stashd sim` in its own process. A test that sends a malformed
// request on purpose marks it (MalformedExtra in export_test.go).
//
// What the simulator does not know is written as TDLib's neutral value and
// said so where it is written: a chat's last_message and a topic's
// last_message carry only the message's id and chat; updateMessageContent
// carries messageUnsupported as its new content (stashd fetches the
// message); message senders are the chat itself. TDLib's own requests that
// the port never makes (getSupergroup aside, which the adapter needs) are
// answered with error 400 naming them as not simulated.
//
// tdjsonsim owns the socket server and the translation between TDLib JSON
// and the port. It must not change the simulator's behaviour (it only calls
// tgsim's exported API) nor decode anything for stashd: the adapter's own
// decoder is what the end-to-end test exercises.
package tdjsonsim
