// Package web is stashd's read-mostly web console: search over the
// catalogue, a package's parts, listing, origins and deliveries, the
// sources' state and the dead letters with a Retry button. Pages are
// server-rendered with html/template from embedded templates; there is no
// JavaScript at all.
//
// Archive entry names are hostile input: every value reaches the page
// through html/template's contextual escaping, control and bidirectional
// characters are shown as escapes (Printable), and a Content-Security-Policy
// forbids scripts, so even a missed escape could not run one.
//
// Access: without a token the console answers loopback clients only; with
// Config.AllowRemote it answers any client that presents the bearer token
// (header or the cookie its login form sets). The one write action, Retry,
// is a POST that also needs the page's CSRF token and a same-origin
// request. The console reads and schedules through store's methods and
// touches nothing else: it never talks to Telegram.
package web
