package main

import (
	"fmt"
	"os"
)

// runSim is replaced by the TDLib-JSON simulator server.
func runSim(args []string) int {
	fmt.Fprintln(os.Stderr, "stashd sim: not available in this build")
	return 1
}
