// Package cataloguetest fills a catalogue with a small, known set of
// packages, sources, deliveries and dead letters for the tests of the
// search, the console and the search command. It writes through store's
// own methods only and touches nothing else.
package cataloguetest
