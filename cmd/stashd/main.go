// Command stashd mirrors the archives posted in Telegram channels, groups and
// forum topics into destination channels and keeps a PostgreSQL catalogue of
// every package. See docs/ARCHITECTURE.md.
package main

import (
	"fmt"
	"io"
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

// usage writes the list of commands to w: stdout when asked for, stderr
// with a usage error.
func usage(w io.Writer) {
	fmt.Fprintf(w, `stashd mirrors archives posted in Telegram sources into destination channels
and keeps a PostgreSQL catalogue of every package.

Usage: stashd <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'stashd <command> --help' or 'stashd help <command>' for the flags of a command.\n")
}

func main() { os.Exit(dispatch(os.Args[1:])) }

// dispatch runs the command args names and returns its exit status. Help
// asked for (--help, -h, help, help COMMAND) goes to stdout, exit 0.
func dispatch(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	name := args[0]
	switch {
	case name == "-h" || name == "--help" || name == "help" && len(args) == 1:
		usage(os.Stdout)
		return 0
	case name == "help":
		name, args = args[1], []string{name, "--help"}
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "stashd: unknown command %q (see stashd --help)\n", name)
	return 2
}
