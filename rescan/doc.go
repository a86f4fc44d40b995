// Package rescan is the safety net under catch-up: every Interval (6 h by
// default) and after any outage longer than OutageThreshold (a connection
// down, or the account unwatched that long before it started: a restart, a
// logout), it re-walks the
// documents of the last Window days of every source of an account and
// ingests what the catalogue lacks. Anything it finds is something no other
// rule caught (documents edited into old messages, bugs), so it is counted
// in stashd_rescan_items_found_total and shown on the dashboard.
//
// rescan never moves watermarks and never touches source state.
package rescan
