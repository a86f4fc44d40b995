package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"stashd/internal/config"
	"stashd/store"
	"stashd/tg"
)

const reconcileHelp = `Rebuilds the delivery records a rewound catalogue has lost. After the
database was restored from a backup, or an asynchronous standby promoted,
the catalogue may have forgotten deliveries that really happened, and
sending them again would put second copies in the destinations. The
destinations hold the truth: every copy stashd sends carries its delivery
token. This command asks the running daemon to page each destination's
history back (one request per 100 messages) until it reaches copies the
catalogue knows, to record every copy it finds as delivered, and only then
to send to that destination again.

The daemon also does this by itself when it sees the database's system
identifier or timeline change, or a destination's newest copies unknown to
the catalogue; the command is for when you know better (a restore into the
same cluster, before the daemon starts).

Every destination the catalogue has delivered to is reconciled, and those
named with --destination. The command then shows each destination's
progress until all are done (--no-wait returns at once); the daemon must
be running (or start) for them to be done. A destination whose history
cannot be read is given up (sends to it resume unchecked; the exit status
is then 1), and one that no running account sends to is left for the
first delivery queued there.`

func runReconcile(args []string) int {
	fs := newFlagSet("reconcile", "reconcile [flags]", reconcileHelp)
	db := addStoreFlags(fs)
	var extra chatList
	fs.Var(&extra, "destination", "a destination to reconcile besides those the catalogue knows, by chat id (-1001234567890) or t.me/c/ link (repeatable)")
	noWait := fs.Bool("no-wait", false, "return once the reconciliation is asked for, without waiting for it")
	reason := fs.String("reason", "asked for with stashd reconcile", "the reason recorded with the request")
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	if err := db.check(); err != nil {
		fmt.Fprintf(os.Stderr, "stashd reconcile: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, closeStore, err := db.open(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd reconcile: %v\n", err)
		return 1
	}
	defer closeStore()
	dests, err := st.DeliveredDestinations(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd reconcile: %v\n", err)
		return 1
	}
	for _, d := range extra {
		if !slices.Contains(dests, d) {
			dests = append(dests, d)
		}
	}
	if len(dests) == 0 {
		fmt.Println("no destinations to reconcile: the catalogue records no delivery (name one with --destination)")
		return 0
	}
	if err := st.RequestReconcile(ctx, dests, *reason); err != nil {
		fmt.Fprintf(os.Stderr, "stashd reconcile: %v\n", err)
		return 1
	}
	fmt.Printf("reconciliation asked for %d destinations; sends to them wait until it is done\n", len(dests))
	if *noWait {
		return 0
	}
	return waitReconciles(ctx, st, dests)
}

// unservedAfter is how long a destination may wait untaken while a daemon
// is running (three of its reconciliation rounds) before the wait stops
// for it: no running account sends there.
var unservedAfter = 30 * time.Second

// waitReconciles prints the destinations' progress every second until each
// has finished, was given up, or is served by no running account. It
// returns 1 when one was given up or the wait was stopped.
func waitReconciles(ctx context.Context, st *store.Store, dests []tg.ChatID) int {
	start := time.Now()
	warned := false
	last := map[tg.ChatID]string{}
	unserved := map[tg.ChatID]bool{}
	changed := start // when a destination's line last changed
	for {
		rs, err := st.Reconciles(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd reconcile: %v\n", err)
			return 1
		}
		live, err := daemonRunning(ctx, st)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stashd reconcile: %v\n", err)
			return 1
		}
		settled, started, gaveUp := 0, 0, 0
		for _, r := range rs {
			if !slices.Contains(dests, r.Destination) {
				continue
			}
			line := fmt.Sprintf("destination %d: waiting for the daemon", r.Destination)
			switch {
			case r.GaveUp:
				settled++
				gaveUp++
				line = fmt.Sprintf("destination %d: gave up, its history cannot be read (%s); sends to it resumed unchecked",
					r.Destination, r.LastError)
			case !r.FinishedAt.IsZero():
				settled++
				line = fmt.Sprintf("destination %d: done, %d pages, %d copies, %d records rebuilt",
					r.Destination, r.Pages, r.Copies, r.Recovered)
			case !r.StartedAt.IsZero():
				started++
				line = fmt.Sprintf("destination %d: %d pages, %d copies, %d records rebuilt so far",
					r.Destination, r.Pages, r.Copies, r.Recovered)
			case unserved[r.Destination]:
				settled++
				line = fmt.Sprintf("destination %d: no running account sends there; it is reconciled before the first delivery queued for it",
					r.Destination)
			}
			if r.LastError != "" && r.FinishedAt.IsZero() {
				line += " (last attempt: " + r.LastError + ")"
			}
			if last[r.Destination] != line {
				fmt.Println(line)
				last[r.Destination] = line
				changed = time.Now()
			}
		}
		// A running daemon takes up a waiting reconciliation within a
		// round once none is in progress: one still untaken after three
		// rounds of nothing happening is for no account of it.
		if started == 0 && live && time.Since(changed) > unservedAfter {
			for _, r := range rs {
				if slices.Contains(dests, r.Destination) && r.StartedAt.IsZero() && !unserved[r.Destination] {
					unserved[r.Destination] = true
					changed = time.Time{} // print at once
				}
			}
			if changed.IsZero() {
				changed = time.Now()
				continue
			}
		}
		if settled == len(dests) {
			if gaveUp > 0 {
				return 1
			}
			return 0
		}
		if !live && !warned && time.Since(start) > unservedAfter {
			fmt.Println("no daemon is running (no account lease is held): is stashd serve running?")
			warned = true
		}
		select {
		case <-ctx.Done():
			fmt.Println("stopped waiting; the daemon goes on with the reconciliation")
			return 1
		case <-time.After(time.Second):
		}
	}
}

// daemonRunning reports whether some instance holds an account lease.
func daemonRunning(ctx context.Context, st *store.Store) (bool, error) {
	ls, err := st.Leases(ctx)
	if err != nil {
		return false, err
	}
	for _, l := range ls {
		if l.Owner != "" && l.Until.After(l.Now) {
			return true, nil
		}
	}
	return false, nil
}

// chatList is a repeatable flag of chat ids.
type chatList []tg.ChatID

var _ flag.Value = (*chatList)(nil)

func (l *chatList) String() string {
	parts := make([]string, len(*l))
	for i, c := range *l {
		parts[i] = strconv.FormatInt(int64(c), 10)
	}
	return strings.Join(parts, ",")
}

func (l *chatList) Set(s string) error {
	// The same forms as a configuration's chat references, by id: the
	// catalogue knows destinations by id, not by name.
	ref, err := config.ParseChatRef(s)
	if err != nil || ref.ID == 0 {
		return fmt.Errorf("%q is not a chat id (e.g. -1001234567890 or https://t.me/c/1234567890)", s)
	}
	*l = append(*l, ref.ID)
	return nil
}
