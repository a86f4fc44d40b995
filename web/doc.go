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
// Access: every request passes a gate before its body is read. Without a
// token the console answers loopback clients only, and only requests whose
// Host names loopback (127.0.0.1, [::1], localhost), so a DNS-rebinding
// page cannot read it through the operator's browser (421). With
// Config.AllowRemote it answers any client that reaches it over HTTPS (its
// own TLS, or a trusted proxy's X-Forwarded-Proto) and presents the bearer
// token: a header, or the cookie of a session opened by the login form
// (a random id kept here with an expiry; Log out ends it). Failed logins
// are logged and throttled per client. Bodies are capped at a few KiB.
// The one write action, Retry, is a POST that also needs the page's CSRF
// token and a same-origin request. Protect puts the listener's other
// endpoints behind the same token for clients beyond loopback. The
// console reads and schedules through store's methods and touches nothing
// else: it never talks to Telegram.
package web
