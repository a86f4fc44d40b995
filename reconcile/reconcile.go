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
	RecordCopy(ctx context.Context, c store.CopyFound) (store.CopyOutcome, error)
	ReconcileProgress(ctx context.Context, dest tg.ChatID, copies, recovered int) error
	FinishReconcile(ctx context.Context, dest tg.ChatID, runErr error) error
	GiveUpReconcile(ctx context.Context, dest tg.ChatID, reason error) error
}

// History reads a chat's history (tg.Client's getChatHistory).
type History interface {
	GetChatHistory(ctx context.Context, chat tg.ChatID, from tg.MessageID, limit int) ([]tg.Message, error)
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
}

// ErrGaveUp marks a reconciliation given up: the destination's history
// cannot be read (the chat is gone, private or the account was removed), so
// waiting would hold its deliveries for ever.
var ErrGaveUp = errors.New("reconciliation given up")

// Destination reconciles dest: it pages its history from the newest
// message back, records every copy carrying a delivery token, and finishes
// the destination's reconciliation (sends resume) once KnownRun copies in
// a row were known, or at the chat's beginning. A failure Telegram says
// will not pass (tg.ClassPermanent) gives the reconciliation up, recorded
// with its reason, and returns an error wrapping ErrGaveUp: sends resume,
// and meet the same error there. Any other failure leaves the
// reconciliation waiting, with its error recorded, to be run again.
func Destination(ctx context.Context, cfg Config, st Store, h History, dest tg.ChatID) (Result, error) {
	res, err := run(ctx, cfg, st, h, dest)
	if ctx.Err() != nil {
		return res, ctx.Err() // cut short by shutdown: it runs again at the next start
	}
	if err != nil && tg.Classify(err) == tg.ClassPermanent {
		if gerr := st.GiveUpReconcile(ctx, dest, err); gerr != nil {
			return res, gerr
		}
		return res, fmt.Errorf("%w: %w", ErrGaveUp, err)
	}
	if ferr := st.FinishReconcile(ctx, dest, err); ferr != nil && err == nil {
		err = ferr
	}
	return res, err
}

func run(ctx context.Context, cfg Config, st Store, h History, dest tg.ChatID) (Result, error) {
	knownRun := cmp.Or(cfg.KnownRun, tg.MaxSearchLimit)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var res Result
	if err := st.StartReconcile(ctx, dest); err != nil {
		return res, err
	}
	known := 0 // copies in a row the catalogue knew
	from := tg.MessageID(0)
	for {
		page, err := h.GetChatHistory(ctx, dest, from, tg.MaxSearchLimit)
		if err != nil {
			return res, fmt.Errorf("read the history of %d: %w", dest, err)
		}
		res.Pages++
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
			out, err := st.RecordCopy(ctx, store.CopyFound{Destination: dest, Message: m.ID, Token: tok,
				UniqueID: m.Document.File.UniqueID})
			if err != nil {
				return res, err
			}
			if out.Recovered() {
				recovered++
			}
			if out == store.CopyKnown || out == store.CopySecond {
				known++
			} else {
				known = 0
			}
		}
		res.Copies += copies
		res.Recovered += recovered
		if err := st.ReconcileProgress(ctx, dest, copies, recovered); err != nil {
			return res, err
		}
		if res.Pages%10 == 0 {
			log.Info("reconciling a destination", "destination", dest, "pages", res.Pages,
				"copies", res.Copies, "recovered", res.Recovered)
		}
		switch {
		case len(page) == 0 || known >= knownRun:
			return res, nil // the chat's beginning, or everything older is known
		case last == 0:
			// A short page held only from itself: ask from just below it.
			from--
		default:
			from = last
		}
	}
}
