// Package redact hides the passwords of PostgreSQL connection strings
// before they reach a message: an error, a log line, stderr (and so the
// journal). Every place that shows a database URL, or an error that may
// quote one, goes through it. It is a leaf: it imports nothing of stashd.
package redact
