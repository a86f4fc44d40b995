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
	RecordCopy(ctx context.Context, c store.CopyFound) (store.CopyRecord, error)
	RecordOlderCopy(ctx context.Context, c store.CopyFound, byFile bool, newer tg.MessageID) (bool, error)
	NoteStraySends(ctx context.Context, strays ...store.StraySend) error
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
	// OpenChat opens a chat (openChat): TDLib then fetches its difference.
	OpenChat(ctx context.Context, chat tg.ChatID) error
}

// Config tunes a reconciliation. Zero values take the defaults in
// brackets.
type Config struct {
	// KnownRun is how many copies in a row the catalogue must know already
	// for the rest of the history to count as known [100: a page].
	KnownRun int
	// Account is the account reconciling: second copies it could not
	// delete for a reason that may pass are noted for it to settle
	// (store.StraySend).
	Account string
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
	// Views are the session's views of chats: the destination is read from
	// the end only once its difference is in (tg.Views). Nil: views of
	// their own over the Telegram given, settling for tg.DefaultViewSettle.
	Views *tg.Views
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
// A copy of a part the catalogue records with another message (see
// store.ClassifyCopy: a send a paused instance or an old TDLib directory
// made after the part was delivered, whose note to delete it the rewind
// lost) is a second copy. Of the copies of a part carrying its file whose
// record a reconciliation rebuilt (this one, one cut short before it, or
// an earlier one), the oldest is kept, the one readers' links point at; a
// record written after its send keeps its message. The paging goes on,
// past the known run if need be, until it has seen or passed each recorded
// message, then the second copies of a part whose recorded message it saw,
// carrying the same file, are deleted. Those of a recorded message that is
// gone (a reader's admin deleted it) are left: they are the part's only
// copies. A deletion that fails is logged, and noted for the account to
// settle when it may pass (a 500, a flood wait); it does not hold the
// reconciliation.
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
	if cfg.Views == nil {
		cfg.Views = tg.NewViews(t.OpenChat, 0)
	}
	r := &run{cfg: cfg, st: st, t: t, dest: dest, log: log, seen: map[tg.MessageID]string{},
		seconds: map[tg.MessageID][]second{}}
	err := r.pages(ctx)
	if err == nil {
		r.deleteSeconds(ctx)
	}
	if ctx.Err() != nil {
		return r.res, ctx.Err() // cut short by shutdown: it runs again at the next start
	}
	if err != nil && tg.Classify(err) == tg.ClassPermanent {
		if gerr := st.GiveUpReconcile(ctx, dest, err); gerr != nil {
			return r.res, gerr
		}
		return r.res, fmt.Errorf("%w: %w", ErrGaveUp, err)
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
	// seen holds the copies the paging met, with their files' unique ids.
	seen map[tg.MessageID]string
	// seconds holds, by the message the catalogue records for a part, the
	// second copies of that part.
	seconds map[tg.MessageID][]second
}

// second is a second copy of a part.
type second struct {
	msg   tg.MessageID
	token string
}

// pages reads the destination's history back and records its copies.
func (r *run) pages(ctx context.Context) error {
	knownRun := cmp.Or(r.cfg.KnownRun, tg.MaxSearchLimit)
	if err := r.st.StartReconcile(ctx, r.dest); err != nil {
		return err
	}
	// TDLib reads a history from the end out of the session's own
	// messages, and hides newer ones until it fetched the chat's
	// difference: copies sent while this session did not follow the
	// destination are read only once it is opened and that is in.
	if err := r.cfg.Views.Current(ctx, r.dest); err != nil {
		return fmt.Errorf("open %d to read its history: %w", r.dest, err)
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
			c := store.CopyFound{Destination: r.dest, Message: m.ID, Token: tok, UniqueID: m.Document.File.UniqueID}
			r.seen[m.ID] = c.UniqueID
			rec, err := r.st.RecordCopy(ctx, c)
			if err != nil {
				return err
			}
			switch {
			case rec.Outcome.Recovered():
				recovered++
			case rec.Outcome == store.CopySecond && rec.Recorded != 0:
				if err := r.second(ctx, c, rec); err != nil {
					return err
				}
			}
			if rec.Outcome == store.CopyKnown || rec.Outcome == store.CopySecond {
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
		case len(page) == 0 || known >= knownRun && !r.recordedBelow(cmp.Or(last, from)):
			return nil // the chat's beginning, or everything older is known
		case last == 0:
			// A short page held only from itself: ask from just below it.
			from--
		default:
			from = last
		}
	}
}

// second takes c, found a second copy of the part recorded with
// rec.Recorded. When the reconciliation rebuilt that record from a newer
// copy carrying the same file, c, older, takes the record, and the newer
// one is the second copy.
func (r *run) second(ctx context.Context, c store.CopyFound, rec store.CopyRecord) error {
	r.res.Seconds++
	newer := rec.Recorded
	if rec.Rebuilt && c.Message < newer && c.UniqueID != "" && r.seen[newer] == c.UniqueID {
		ok, err := r.st.RecordOlderCopy(ctx, c, rec.ByFile, newer)
		if err != nil {
			return err
		}
		if ok {
			r.seconds[c.Message] = append(append(r.seconds[c.Message], r.seconds[newer]...), second{msg: newer, token: c.Token})
			delete(r.seconds, newer)
			return nil
		}
	}
	r.seconds[newer] = append(r.seconds[newer], second{msg: c.Message, token: c.Token})
	return nil
}

// recordedBelow reports whether a recorded message whose second copies
// were found lies further back than oldest, the oldest message read (0:
// none was read).
func (r *run) recordedBelow(oldest tg.MessageID) bool {
	for rec := range r.seconds {
		if _, seen := r.seen[rec]; !seen && (oldest == 0 || rec < oldest) {
			return true
		}
	}
	return false
}

// deleteSeconds deletes the second copies of each part whose recorded
// message the paging saw, carrying the same file.
func (r *run) deleteSeconds(ctx context.Context) {
	for rec, dups := range r.seconds {
		file, seen := r.seen[rec]
		var del, left []tg.MessageID
		var notes []store.StraySend
		for _, d := range dups {
			if !seen || r.seen[d.msg] != file {
				left = append(left, d.msg)
				continue
			}
			del = append(del, d.msg)
			notes = append(notes, store.StraySend{Destination: r.dest, Message: d.msg, Token: d.token, Account: r.cfg.Account})
		}
		if len(left) > 0 {
			r.log.Warn("second copies of a part whose recorded copy is gone from the destination, or carries another file, are left",
				"destination", r.dest, "recorded", rec.ServerID(), "copies", serverIDs(left))
		}
		if len(del) == 0 {
			continue
		}
		err := r.t.DeleteMessages(ctx, r.dest, del, true)
		if err != nil && tg.Classify(err) == tg.ClassRetryable && ctx.Err() == nil {
			err = r.t.DeleteMessages(ctx, r.dest, del, true)
		}
		ids := serverIDs(del)
		switch {
		case err == nil:
			r.res.Deleted += len(del)
			r.log.Warn("second copies of a delivered part deleted from the destination",
				"destination", r.dest, "recorded", rec.ServerID(), "copies", ids)
		case ctx.Err() != nil:
			return // the reconciliation runs again, and finds them again
		case tg.MayPass(err):
			if nerr := r.st.NoteStraySends(ctx, notes...); nerr != nil {
				err = errors.Join(err, nerr)
			} else {
				r.log.Warn("second copies of a delivered part not deleted; noted for the account to settle",
					"destination", r.dest, "recorded", rec.ServerID(), "copies", ids, "noted", len(notes), "err", err)
				continue
			}
			fallthrough
		default:
			r.log.Error("delete second copies of a part found by a reconciliation; the destination holds it more than once",
				"destination", r.dest, "recorded", rec.ServerID(), "copies", ids, "err", err)
		}
	}
}

// serverIDs returns the server ids of ids, for the log.
func serverIDs(ids []tg.MessageID) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = id.ServerID()
	}
	return out
}
