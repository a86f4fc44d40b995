package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"stashd/ingest"
	"stashd/store"
	"stashd/tg"
)

// Store is what a reconciliation reads and writes.
type Store interface {
	StartReconcile(ctx context.Context, dest tg.ChatID) error
	RecordCopy(ctx context.Context, c store.CopyFound) (store.CopyOutcome, tg.MessageID, error)
	ReconcileProgress(ctx context.Context, dest tg.ChatID, copies, recovered int) error
	FinishReconcile(ctx context.Context, dest tg.ChatID, runErr error) error
	GiveUpReconcile(ctx context.Context, dest tg.ChatID, reason error) error
}

// Telegram is what a reconciliation asks of the account's client.
type Telegram interface {
	// GetChatHistory reads a chat's history (getChatHistory).
	GetChatHistory(ctx context.Context, chat tg.ChatID, from tg.MessageID, limit int) ([]tg.Message, error)
	// DeleteMessages deletes messages of a chat (deleteMessages).
	DeleteMessages(ctx context.Context, chat tg.ChatID, ids []tg.MessageID, revoke bool) error
}

// Config tunes a reconciliation. Zero values take the defaults in
// brackets.
type Config struct {
	// KnownRun is how many copies in a row the catalogue must know already
	// for the rest of the history to count as known [100: a page].
	KnownRun int
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Result is what a reconciliation of one destination found.
type Result struct {
	Pages     int // history requests made
	Copies    int // messages carrying a delivery token
	Recovered int // delivery records rebuilt from them
	Seconds   int // second copies of a part recorded with another message
	Deleted   int // second copies deleted
}

// ErrGaveUp marks a reconciliation given up: the destination's history
// cannot be read (the chat is gone, private or the account was removed), so
// waiting would hold its deliveries for ever.
var ErrGaveUp = errors.New("reconciliation given up")

// Destination reconciles dest: it pages its history from the newest
// message back, records every copy carrying a delivery token, and finishes
// the destination's reconciliation (sends resume) once KnownRun copies in
// a row were known, or at the chat's beginning.
//
// A copy of a part the catalogue records with another message (a send a
// paused instance or an old TDLib database made after another had
// delivered the part, whose note to delete it the rewind lost) is a second
// copy. The paging goes on, past the known run if need be, until it has
// seen or passed the recorded message, and the second copies of a part
// whose recorded message it saw are deleted: the destination then holds
// the part once. Those of a recorded message that is gone (a reader's
// admin deleted it) are left, the only copies of their part. A deletion
// that fails is logged and does not hold the reconciliation: its records
// stand.
//
// A failure Telegram says will not pass (tg.ClassPermanent) gives the
// reconciliation up, recorded with its reason, and returns an error
// wrapping ErrGaveUp: sends resume, and meet the same error there. Any
// other failure leaves the reconciliation waiting, with its error
// recorded, to be run again.
func Destination(ctx context.Context, cfg Config, st Store, t Telegram, dest tg.ChatID) (Result, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &run{cfg: cfg, st: st, t: t, dest: dest, log: log,
		seen: map[tg.MessageID]bool{}, seconds: map[tg.MessageID][]tg.MessageID{}}
	err := r.pages(ctx)
	if ctx.Err() != nil {
		return r.res, ctx.Err() // cut short by shutdown: it runs again at the next start
	}
	if err != nil && tg.Classify(err) == tg.ClassPermanent {
		if gerr := st.GiveUpReconcile(ctx, dest, err); gerr != nil {
			return r.res, gerr
		}
		return r.res, fmt.Errorf("%w: %w", ErrGaveUp, err)
	}
	if err == nil {
		r.deleteSeconds(ctx)
	}
	if ferr := st.FinishReconcile(ctx, dest, err); ferr != nil && err == nil {
		err = ferr
	}
	return r.res, err
}

// run is one reconciliation of a destination.
type run struct {
	cfg  Config
	st   Store
	t    Telegram
	dest tg.ChatID
	log  *slog.Logger
	res  Result
	// seen holds the copies the paging met; seconds, by the message the
	// catalogue records for a part, the second copies of that part.
	seen    map[tg.MessageID]bool
	seconds map[tg.MessageID][]tg.MessageID
}

// pages reads the destination's history back and records its copies.
func (r *run) pages(ctx context.Context) error {
	knownRun := cmp.Or(r.cfg.KnownRun, tg.MaxSearchLimit)
	if err := r.st.StartReconcile(ctx, r.dest); err != nil {
		return err
	}
	known := 0 // copies in a row the catalogue knew
	from := tg.MessageID(0)
	for {
		page, err := r.t.GetChatHistory(ctx, r.dest, from, tg.MaxSearchLimit)
		if err != nil {
			return fmt.Errorf("read the history of %d: %w", r.dest, err)
		}
		r.res.Pages++
		copies, recovered, last := 0, 0, tg.MessageID(0)
		for _, m := range page {
			if from != 0 && m.ID >= from {
				continue // the page starts at from, which the last page held
			}
			last = m.ID
			tok := ingest.TokenOf(m.Caption)
			if tok == "" || m.Document == nil || !m.ID.IsServer() {
				continue
			}
			copies++
			r.seen[m.ID] = true
			out, recorded, err := r.st.RecordCopy(ctx, store.CopyFound{Destination: r.dest, Message: m.ID, Token: tok,
				UniqueID: m.Document.File.UniqueID})
			if err != nil {
				return err
			}
			if out.Recovered() {
				recovered++
			}
			if out == store.CopySecond && recorded != 0 {
				r.seconds[recorded] = append(r.seconds[recorded], m.ID)
				r.res.Seconds++
			}
			if out == store.CopyKnown || out == store.CopySecond {
				known++
			} else {
				known = 0
			}
		}
		r.res.Copies += copies
		r.res.Recovered += recovered
		if err := r.st.ReconcileProgress(ctx, r.dest, copies, recovered); err != nil {
			return err
		}
		if r.res.Pages%10 == 0 {
			r.log.Info("reconciling a destination", "destination", r.dest, "pages", r.res.Pages,
				"copies", r.res.Copies, "recovered", r.res.Recovered)
		}
		switch {
		case len(page) == 0 || known >= knownRun && !r.recordedBelow(last):
			return nil // the chat's beginning, or everything older is known
		case last == 0:
			// A short page held only from itself: ask from just below it.
			from--
		default:
			from = last
		}
	}
}

// recordedBelow reports whether a recorded message whose second copies
// were found lies further back than last, the oldest message read (0:
// none was read).
func (r *run) recordedBelow(last tg.MessageID) bool {
	for rec := range r.seconds {
		if !r.seen[rec] && (last == 0 || rec < last) {
			return true
		}
	}
	return false
}

// deleteSeconds deletes the second copies of each part whose recorded
// message the paging saw.
func (r *run) deleteSeconds(ctx context.Context) {
	for rec, dups := range r.seconds {
		ids := make([]int64, len(dups))
		for i, id := range dups {
			ids[i] = id.ServerID()
		}
		if !r.seen[rec] {
			r.log.Warn("second copies of a part whose recorded copy is gone from the destination are left",
				"destination", r.dest, "recorded", rec.ServerID(), "copies", ids)
			continue
		}
		err := r.t.DeleteMessages(ctx, r.dest, dups, true)
		if err != nil && tg.Classify(err) == tg.ClassRetryable && ctx.Err() == nil {
			err = r.t.DeleteMessages(ctx, r.dest, dups, true)
		}
		if err != nil {
			r.log.Error("delete second copies of a part found by a reconciliation; the destination holds it more than once",
				"destination", r.dest, "recorded", rec.ServerID(), "copies", ids, "err", err)
			continue
		}
		r.res.Deleted += len(dups)
		r.log.Warn("second copies of a delivered part deleted from the destination",
			"destination", r.dest, "recorded", rec.ServerID(), "copies", ids)
	}
}
