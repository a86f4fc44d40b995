//go:build race

package tdjsonsim_test

// raceEnabled: the test binary runs under the race detector, and so does
// the stashd binary it builds (which also reuses the race-built packages).
const raceEnabled = true
