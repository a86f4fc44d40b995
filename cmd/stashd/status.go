package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"stashd/ingest"
	"stashd/store"
	"stashd/web"
)

const statusHelp = `Shows what stashd knows, read from its database: accounts (connected,
Premium, ingest queue; the instance holding the account's lease, its epoch
and expiry, or how long it has had no owner; an instance whose
configuration of the account differs from the holder's, and how), sources (synced: catalogue
current and no delivery of its packages due; "catalogue synced, N
deliveries waiting" while the deliveries are behind; dirty or circuit open;
inaccessible when the account lost access, protected when its documents
cannot be re-sent, upgraded when a basic group became a supergroup; watermark, lag, last scan, last error), dead letters and
deliveries, and the delivery backlog per destination: the deliveries due,
their parts, and the time to send them at the send budgets of the accounts
holding them (parts x 60 s / the sum of their send_rate; a lower bound when
those accounts also owe other destinations). It works while a
daemon or a demo runs, and when none does.`

func runStatus(args []string) int {
	fs := newFlagSet("status", "status [flags]", statusHelp)
	db := addStoreFlags(fs)
	jsonOut := fs.Bool("json", false, "print JSON instead of tables")
	if rc := parse(fs, args); rc >= 0 {
		return rc
	}
	if err := db.check(); err != nil {
		fmt.Fprintf(os.Stderr, "stashd status: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, closeStore, err := db.open(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd status: %v\n", err)
		return 1
	}
	defer closeStore()
	rep, err := st.Status(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stashd status: %v\n", err)
		return 1
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return 0
	}
	printStatus(rep)
	return 0
}

func printStatus(rep store.Status) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ACCOUNT\tCONNECTED\tPREMIUM\tQUEUE\tREPORTED\tOWNER\tEPOCH\tLEASE")
	for _, a := range rep.Accounts {
		fmt.Fprintf(w, "%s\t%v\t%v\t%d/%d\t%s\t%s\t%d\t%s\n", a.Name, a.Connected, a.Premium, a.QueueDepth, a.QueueCapacity, ago(a.StatusAt),
			cmp.Or(a.Owner, "-"), a.Epoch, leaseState(a))
	}
	for _, l := range rep.Logins {
		if !l.LoggedIn {
			fmt.Fprintf(w, "account %s is not logged in (%s, since %s) and is not run: %s\n",
				l.Account, cmp.Or(l.State, "unknown state"), ago(&l.Since), l.Reason)
		}
	}
	for _, a := range rep.Accounts {
		for _, m := range a.ConfigMismatches {
			fmt.Fprintf(w, "account %s: instance %s is configured otherwise than %s, which holds it (found %s), and runs it that way should it take it over: %s\n",
				web.Printable(a.Name), web.Printable(m.Instance), web.Printable(m.Holder), ago(&m.Since), web.Printable(m.Differs))
		}
	}
	for _, a := range rep.Accounts {
		if !a.Connected && a.Owner != "" {
			fmt.Fprintf(w, "account %s cannot reach Telegram (as of %s): check the host's network, or set a proxy (the proxy setting)\n", a.Name, ago(a.StatusAt))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "SOURCE\tACCOUNT\tKIND\tSTATE\tWATERMARK\tLAG\tPACKAGES\tLAST SCAN\tTITLE")
	for _, s := range rep.Sources {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", s.ChatID, web.Printable(s.Account), s.Kind, sourceState(s), s.Watermark, s.Lag, s.Packages, ago(s.LastScanAt), web.Printable(s.Title))
	}
	if len(rep.Backlog) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "DESTINATION\tDELIVERIES DUE\tPARTS\tACCOUNTS\tSEND RATE\tDRAIN")
		for _, b := range rep.Backlog {
			fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%s\n", b.Destination, b.Deliveries, b.Parts, strings.Join(b.Accounts, ","),
				rateText(b.SendRate), drainText(b))
		}
	}
	w.Flush()
	for _, s := range rep.Sources {
		if s.Access == store.AccessLost {
			fmt.Printf("source %d: inaccessible: %s\n", s.ChatID, web.Printable(s.AccessReason))
		}
		if s.LastError != "" {
			fmt.Printf("source %d: last error: %s\n", s.ChatID, web.Printable(s.LastError))
		}
		if s.UpgradedTo != 0 {
			fmt.Printf("source %d: upgraded to supergroup %d, which is followed: add it to the configuration\n", s.ChatID, s.UpgradedTo)
		}
		printSourceEvents(s)
	}
	for _, n := range rep.RenamedNames {
		printRenamed(n)
	}
	for _, w := range rep.Waiting {
		if w.Route == ingest.HandOverRoute {
			fmt.Printf("account %s: %d deliveries (%d parts) to %d handed over to it (another account has no write access there)\n",
				w.Account, w.Deliveries, w.Parts, w.Destination)
			continue
		}
		fmt.Printf("route %s (account %s): %d deliveries (%d parts) to %d wait for the delivery window, which opens %s\n",
			w.Route, w.Account, w.Deliveries, w.Parts, w.Destination, w.OpensAt.Local().Format("Mon Jan 2 15:04 MST"))
	}
	for _, d := range rep.Deferred {
		fmt.Printf("destination %d (account %s): %d deliveries put off until %s after: %s\n", d.Destination, d.Account,
			d.Deliveries, d.OpensAt.Local().Format("Mon Jan 2 15:04:05 MST"), web.Printable(d.LastError))
	}
	for _, p := range rep.Partial {
		var opens time.Time
		for _, w := range rep.Waiting {
			if w.Route == p.Route && w.Account == p.Account && (opens.IsZero() || w.OpensAt.Before(opens)) {
				opens = w.OpensAt
			}
		}
		fmt.Println("partial: " + ingest.PartialSentence(p, opens))
	}
	for _, b := range rep.Backfills {
		if b.DoneAt != nil {
			if b.Walked > 0 {
				fmt.Printf("route %s (account %s): backfill finished %s: %d packages walked, %d matched, %d delivered, %d failed\n",
					b.Route, b.Account, ago(b.DoneAt), b.Walked, b.Matched, b.Delivered, b.Failed)
			}
			continue
		}
		fmt.Printf("route %s (account %s): backfilling, %d of %d packages walked, %d matched, %d delivered, %d failed\n",
			b.Route, b.Account, b.Walked, b.Walked+b.Remaining, b.Matched, b.Delivered, b.Failed)
		if b.LastError != "" {
			fmt.Printf("route %s (account %s): backfill last error: %s\n", b.Route, b.Account, b.LastError)
		}
	}
	for _, r := range rep.Reconciles {
		if r.GaveUp {
			fmt.Printf("destination %d: reconciliation after a rewind gave up, its history cannot be read (%s); sends to it resumed unchecked\n",
				r.Destination, r.LastError)
			continue
		}
		line := fmt.Sprintf("destination %d: sends wait for its reconciliation (%s)", r.Destination, r.Reason)
		if !r.StartedAt.IsZero() {
			line += fmt.Sprintf(", %d pages read, %d records rebuilt so far", r.Pages, r.Recovered)
		}
		if r.LastError != "" {
			line += "; last attempt: " + r.LastError
		}
		fmt.Println(line)
	}
	fmt.Printf("\npackages %d, deliveries sent %d (pending intents %d), dead letters pending %d, exhausted %d, deleted at source %d\n",
		rep.Packages, rep.Deliveries["sent"], rep.Deliveries["intent"], rep.DeadLetters["pending"], rep.DeadLetters["exhausted"],
		rep.DeadLetters[string(store.DeadDeleted)])
}

// sourceState says where a source stands: its catalogue (synced, dirty,
// circuit open) and, once that is current, its deliveries.
func sourceState(s store.SourceStatus) string {
	state := s.State
	if s.DirtyReason != "" && s.State == "dirty" {
		state += " (" + s.DirtyReason + ")"
	}
	if s.State == store.SourceDelivering {
		state = fmt.Sprintf("catalogue synced, %d deliveries waiting", s.DeliveriesDue)
	}
	if s.CircuitUntil != nil {
		state += " until " + s.CircuitUntil.Local().Format(time.TimeOnly)
	}
	if s.Access == store.AccessLost {
		state = "inaccessible, " + state
	}
	if s.Access == store.AccessNotMember {
		state += ", not a member (kept open for updates)"
	}
	if s.Protected || s.ProtectedDocuments > 0 {
		state += fmt.Sprintf(", protected (%d documents not mirrorable)", s.ProtectedDocuments)
	}
	if s.UpgradedTo != 0 {
		state += fmt.Sprintf(", upgraded to supergroup %d", s.UpgradedTo)
	}
	return state
}

func rateText(perMinute float64) string {
	if perMinute <= 0 {
		return "unknown"
	}
	return strconv.FormatFloat(perMinute, 'f', -1, 64) + "/min"
}

// drainText is the estimated time to send a destination's backlog at the
// budgets of the accounts holding it.
func drainText(b store.DestinationBacklog) string {
	if b.SendRate <= 0 {
		return "unknown (no send budget recorded)"
	}
	return "~" + (time.Duration(b.DrainSeconds * float64(time.Second))).Round(time.Second).String()
}

// leaseState says when an account's lease lapses, or how long it has had
// no owner.
func leaseState(a store.AccountStatus) string {
	switch {
	case a.LeaseUntil == nil:
		return "never taken"
	case a.Owner != "":
		return "until " + a.LeaseUntil.Local().Format(time.TimeOnly)
	}
	return fmt.Sprintf("no owner for %s", (time.Duration(a.OwnerlessSeconds * float64(time.Second))).Round(time.Second))
}

func ago(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}
