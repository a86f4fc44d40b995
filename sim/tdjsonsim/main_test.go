package tdjsonsim_test

import (
	"fmt"
	"os"
	"testing"

	"stashd/internal/pgtest"
	"stashd/sim/tdjsonsim"
)

// TestMain opts in to pgtest: the end-to-end test (built with the
// libtdjson tag) needs PostgreSQL; the other tests start nothing. Every
// server of the run checks its wire against TDLib's schema; anything a
// test did not already fail on (servers started outside startServer)
// fails the run here.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if bad := tdjsonsim.WireViolations(nil); len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d objects on the wire violate TDLib's schema:\n", len(bad))
		for _, v := range bad {
			fmt.Fprintln(os.Stderr, "  "+v)
		}
		code = 1
	}
	os.Exit(code)
}
