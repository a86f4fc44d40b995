// Package route decides which destinations a package goes to. A Table
// holds the configured routes (sources and topics to destinations, with
// filters on format, name and size); with no routes every package goes to
// every destination. It owns matching only: resolving chat references,
// checking them against Telegram and sending belong to its callers, and it
// must not touch the store or Telegram.
package route
