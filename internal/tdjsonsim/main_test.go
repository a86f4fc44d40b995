package tdjsonsim_test

import (
	"os"
	"testing"

	"stashd/internal/pgtest"
)

// TestMain opts in to pgtest: the end-to-end test (built with the
// libtdjson tag) needs PostgreSQL; the other tests start nothing.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
