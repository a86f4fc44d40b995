package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"stashd/tg"
)

const deadLettersHelp = `Messages that failed to ingest are kept as dead letters with the error's
class, a reason, the number of attempts and the time of the next automatic
attempt. They never hold back a source's watermark.

  stashd deadletters list              pending and exhausted dead letters
  stashd deadletters retry CHAT/MSG    make one due now (the daemon retries it)
  stashd deadletters retry --all       make every unresolved one due now

CHAT/MSG is the source chat id and the server message id, as list prints them
(e.g. -1001234567890/17); it may come before or after the flags, or after --.`

func runDeadLetters(args []string) int {
	fs := newFlagSet("deadletters", "deadletters list|retry [CHAT/MSG] [flags]", deadLettersHelp)
	db := addStoreFlags(fs)
	all := fs.Bool("all", false, "with retry: every unresolved dead letter")
	limit := fs.Int("limit", 200, "with list: at most this many rows")
	pos, rc := parseArgs(fs, args, 2)
	if rc >= 0 {
		return rc
	}
	if err := db.check(); err != nil {
		fmt.Fprintf(os.Stderr, "stashd deadletters: %v\n", err)
		return 2
	}
	if len(pos) == 0 {
		fmt.Fprintln(os.Stderr, "stashd deadletters: give an action: list or retry (see stashd deadletters --help)")
		return 2
	}
	verb := pos[0]
	var target string
	if len(pos) > 1 {
		target = pos[1]
	}
	switch {
	case verb != "list" && verb != "retry":
		fmt.Fprintf(os.Stderr, "stashd deadletters: unknown action %q (list or retry)\n", verb)
		return 2
	case verb == "list" && target != "":
		fmt.Fprintf(os.Stderr, "stashd deadletters list: unexpected argument %q\n", target)
		return 2
	}
	var key *tg.MessageKey
	if verb == "retry" {
		switch {
		case *all && target == "":
		case !*all && target != "":
			k, err := parseMessageRef(target)
			if err != nil {
				fmt.Fprintf(os.Stderr, "stashd deadletters: %v\n", err)
				return 2
			}
			key = &k
		default:
			fmt.Fprintln(os.Stderr, "stashd deadletters retry: give either CHAT/MSG or --all")
			return 2
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, closeStore, err := db.open(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd deadletters: %v\n", err)
		return 1
	}
	defer closeStore()

	if verb == "list" {
		dls, err := st.DeadLetters(ctx, "", *limit)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd deadletters: %v\n", err)
			return 1
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "MESSAGE\tSTATE\tCLASS\tATTEMPTS\tNEXT ATTEMPT\tREASON")
		for _, d := range dls {
			next := "-"
			if !d.NextAttemptAt.IsZero() {
				next = d.NextAttemptAt.Local().Format(time.DateTime)
			}
			fmt.Fprintf(w, "%d/%d\t%s\t%s\t%d\t%s\t%s\n", d.Key.Chat, d.Key.Message.ServerID(), d.State, d.ErrorClass, d.Attempts, next, d.Reason)
		}
		w.Flush()
		return 0
	}
	n, err := st.ScheduleDeadLetters(ctx, key)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd deadletters: %v\n", err)
		return 1
	}
	if key != nil && n == 0 {
		fmt.Fprintf(os.Stderr, "stashd deadletters: no unresolved dead letter %s\n", target)
		return 1
	}
	fmt.Printf("%d dead letter(s) scheduled for retry now\n", n)
	return 0
}

// parseMessageRef parses CHAT/MSG (chat id and server message id).
func parseMessageRef(s string) (tg.MessageKey, error) {
	c, m, ok := strings.Cut(s, "/")
	chat, err1 := strconv.ParseInt(c, 10, 64)
	msg, err2 := strconv.ParseInt(m, 10, 64)
	if !ok || err1 != nil || err2 != nil || msg <= 0 {
		return tg.MessageKey{}, fmt.Errorf("%q is not CHAT/MSG (e.g. -1001234567890/42)", s)
	}
	return tg.MessageKey{Chat: tg.ChatID(chat), Message: tg.MessageIDFromServer(msg)}, nil
}
