package main

import (
	"fmt"

	"stashd/internal/infometrics"
	"stashd/tg/tdlib"
)

const versionHelp = `Prints the version of stashd and of the TDLib library it is linked with.
A binary built without TDLib says so.`

func runVersion(args []string) int {
	fs := newFlagSet("version", "version", versionHelp)
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	fmt.Printf("stashd %s\n", infometrics.Version())
	td, err := tdlib.Version()
	if err != nil {
		fmt.Printf("TDLib: %v\n", err)
		return 0
	}
	fmt.Printf("TDLib %s\n", td)
	return 0
}
