// Command stashd mirrors the archives posted in Telegram channels, groups and
// forum topics into destination channels and keeps a PostgreSQL catalogue of
// every package. See docs/ARCHITECTURE.md.
package main

import (
	"fmt"
	"os"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string) int
}

func commands() []command {
	return []command{
		{"serve", "run the daemon (TDLib accounts from a config file)", runServe},
		{"login", "log a Telegram account in (once, interactively)", runLogin},
		{"demo", "run the whole pipeline on the Telegram simulator and audit it", runDemo},
		{"status", "show accounts, sources, lag, circuits and dead letters", runStatus},
		{"deadletters", "list or retry messages that failed to ingest", runDeadLetters},
		{"chats", "list each account's chats with their ids, rights and role", runChats},
		{"doctor", "check the configuration, database, accounts, sources and destinations", runDoctor},
		{"search", "find packages by name or by a file inside them", runSearch},
		{"reconcile", "rebuild lost delivery records from the destinations (after a restore or failover)", runReconcile},
		{"chaos", "kill the daemon and PostgreSQL at random (SIGKILL) and audit the result", runChaos},
		{"bench", "measure every performance goal against its baseline (simulator, private PostgreSQL)", runBench},
		{"sim", "serve the Telegram simulator as TDLib JSON, for the stand-in libtdjson", runSim},
		{"version", "print the versions of stashd and TDLib", runVersion},
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, `stashd mirrors archives posted in Telegram sources into destination channels
and keeps a PostgreSQL catalogue of every package.

Usage: stashd <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(os.Stderr, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'stashd <command> --help' for the flags of a command.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "--help" || name == "help" {
		usage()
		return
	}
	for _, c := range commands() {
		if c.name == name {
			os.Exit(c.run(os.Args[2:]))
		}
	}
	fmt.Fprintf(os.Stderr, "stashd: unknown command %q\n\n", name)
	usage()
	os.Exit(2)
}
