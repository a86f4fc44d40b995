package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"stashd/store"
	"stashd/tg"
)

// reconcileSkew allows for the database's clock running ahead of
// Telegram's: reconciliation looks this much further back than the intent's
// creation.
const reconcileSkew = 2 * time.Minute

// reconcileMaxPages bounds how many pages of the destination's history
// one reconciliation reads (100 messages each).
const reconcileMaxPages = 50

// tokenMatch is what findTokens found of one token: the oldest message
// carrying it (0 for none) and, in copies, the others: the same part sent
// again, as when an instance found nothing, sent, and an old TDLib
// database later re-sent its own pending copy.
type tokenMatch struct {
	found  tg.MessageID
	copies []tg.MessageID
}

// findTokens looks for the messages carrying the tokens of ds, deliveries
// to dest (one part's, or an album's), in one pass over dest. It does not
// ask the server to search for a token: Telegram's full-text search is
// word-based and indexes late, so a message sent a moment before a crash
// would not be found and would be sent again. Nor does it list the
// destination's documents (searchChatMessages with a filter and an empty
// query): TDLib answers that from the session's own message database once
// it holds the chat's index, and a destination the session never opens
// learns no message another session sent (another instance, another
// account, a copy made before the database was restored), so such a copy
// would not be found and the part would be sent twice. Instead it pages
// the destination's history (getChatHistory, which goes to the server
// where the local history may have holes) newest first and matches
// captions here. The newest first: TDLib starts a history read from the
// end at the last message the session learned through updates, and
// hides newer ones until it fetched the chat's difference, so the
// destination is opened, and read once that is in (tg.Views). It pages
// down to the first message older than the oldest intent
// (no message can carry a token before its intent existed). The result is
// keyed by token. Past reconcileMaxPages pages it returns what it found
// with a permanent error naming the parts it did not find.
func (p *Pipeline) findTokens(ctx context.Context, dest tg.ChatID, ds []store.Delivery) (map[string]tokenMatch, error) {
	want := make(map[string]string, len(ds)) // token line → token
	oldest := ds[0]
	for _, d := range ds {
		want[TokenPrefix+d.Token] = d.Token
		if d.CreatedAt.Before(oldest.CreatedAt) {
			oldest = d
		}
	}
	notBefore := oldest.CreatedAt.Add(-reconcileSkew)
	matches := make(map[string][]tg.MessageID)
	// result keeps the oldest match of each token as its delivery.
	result := func() map[string]tokenMatch {
		out := make(map[string]tokenMatch, len(matches))
		for tok, ids := range matches {
			slices.Sort(ids)
			ids = slices.Compact(ids)
			out[tok] = tokenMatch{found: ids[0], copies: ids[1:]}
		}
		return out
	}
	// From the end, TDLib reads the session's own history: the
	// destination is opened first, and read once its difference is in.
	if err := p.cfg.Views.Current(ctx, dest); err != nil {
		return nil, fmt.Errorf("open %d to read its history: %w", dest, err)
	}
	var from tg.MessageID // 0: the newest message
	for range reconcileMaxPages {
		msgs, err := p.tg.GetChatHistory(ctx, dest, from, tg.MaxSearchLimit)
		if err != nil {
			return nil, fmt.Errorf("read the history of %d: %w", dest, err)
		}
		low := from
		done := len(msgs) == 0
		for _, m := range msgs {
			if from != 0 && m.ID > from {
				continue // not older than the previous page
			}
			if m.ID.IsServer() && m.Document != nil {
				for line := range strings.SplitSeq(m.Caption, "\n") {
					// Whole lines: a longer token sharing a prefix is
					// another delivery's.
					if tok, ok := want[strings.TrimSpace(line)]; ok {
						matches[tok] = append(matches[tok], m.ID)
						break
					}
				}
			}
			if low == 0 || m.ID < low {
				low = m.ID
			}
			if !m.Date.IsZero() && m.Date.Before(notBefore) {
				done = true
			}
		}
		if done || low == from || low <= tg.MessageIDFromServer(1) {
			return result(), nil
		}
		// One below the oldest message: the next page starts at the message
		// before it (from_message_id is inclusive; an id between messages
		// starts at the next older one).
		from = low - 1
	}
	if len(matches) == len(want) {
		// Copies may hide further down; the deliveries are found all the same.
		return result(), nil
	}
	// What was found stands: those parts are in the destination.
	var missing []string
	for _, d := range ds {
		if _, ok := matches[d.Token]; !ok {
			missing = append(missing, fmt.Sprint(d.PartIndex))
		}
	}
	return result(), tg.Permanent(fmt.Errorf("find token of package %d part %s in %d: more than %d messages since the intent of %s",
		oldest.PackageID, strings.Join(missing, ", "), dest, reconcileMaxPages*tg.MaxSearchLimit, oldest.CreatedAt.UTC().Format(time.RFC3339)))
}

// keepOneCopy deletes the messages of found, all carrying d's token, but
// recorded, the one d's row records: the part is then in the destination
// once. When recorded is not among them (another session's copy, recorded
// while this one read or sent), the read did not see it stand: each
// message is then deleted only while the recorded copy stands with the
// same file (dropSecond, as settleSend does), and one it cannot settle is
// noted for the account's owner. An admin may have deleted the recorded
// copy, and then the one found is the part's only copy.
func (p *Pipeline) keepOneCopy(ctx context.Context, d store.Delivery, recorded tg.MessageID, found []tg.MessageID) {
	copies := slices.DeleteFunc(slices.Clone(found), func(id tg.MessageID) bool { return id == recorded })
	switch {
	case len(copies) == 0:
	case len(copies) < len(found):
		_ = p.deleteCopies(ctx, d, recorded, copies, true) // logged, or noted
	default:
		for _, id := range copies {
			st := p.stray(d, id)
			file, err := p.copyFile(ctx, st, byReporter)
			if err == nil && file != "" {
				err = p.dropSecond(ctx, d, recorded, st, file, byReporter)
			}
			if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
				_ = p.noteStrays(ctx, st) // logged
			}
		}
	}
}

// deleteCopies deletes copies, second copies in d's destination of the
// part delivered there as message keep, for everyone. A failure leaves the
// delivery standing, the destination only holding the part more than once.
// A retryable failure is tried once more. One that may pass (its lease
// lost, a stop, a 500, a flood wait: tg.MayPass) notes the copies, when note
// is set, for the account's owner (SettleStrays), which deletes them in
// turn; any other is logged. It returns the deletion's failure.
func (p *Pipeline) deleteCopies(ctx context.Context, d store.Delivery, keep tg.MessageID, copies []tg.MessageID, note bool) error {
	err := p.tg.DeleteMessages(ctx, d.Destination, copies, true)
	if err != nil && tg.Classify(err) == tg.ClassRetryable && ctx.Err() == nil {
		err = p.tg.DeleteMessages(ctx, d.Destination, copies, true)
	}
	dups := make([]int64, len(copies))
	for i, id := range copies {
		dups[i] = id.ServerID()
	}
	if err != nil {
		if note && tg.MayPass(err) {
			strays := make([]store.StraySend, len(copies))
			for i, id := range copies {
				strays[i] = p.stray(d, id)
			}
			p.log.Info("second copies of a delivered part not deleted", "destination", d.Destination,
				"package", d.PackageID, "part", d.PartIndex, "token", d.Token, "message", keep.ServerID(), "copies", dups, "err", err)
			if nerr := p.noteStrays(ctx, strays...); nerr != nil {
				return fmt.Errorf("%w: %w (%w)", errNotNoted, err, nerr)
			}
			return err
		}
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			p.log.Error("delete second copies of a delivered part; the destination holds it more than once",
				"destination", d.Destination, "package", d.PackageID, "part", d.PartIndex, "token", d.Token,
				"message", keep.ServerID(), "copies", dups, "err", err)
		}
		return err
	}
	p.log.Warn("second copies of a delivered part deleted from the destination",
		"destination", d.Destination, "package", d.PackageID, "part", d.PartIndex, "token", d.Token,
		"message", keep.ServerID(), "copies", dups)
	p.m.deletedCopies(p.cfg.Account, len(copies))
	return nil
}

// TokenOf returns the delivery token a caption carries, "" when none.
func TokenOf(caption string) string {
	for line := range strings.SplitSeq(caption, "\n") {
		if tok, ok := strings.CutPrefix(strings.TrimSpace(line), TokenPrefix); ok && tok != "" {
			return tok
		}
	}
	return ""
}

// RecordSend records m, a message Telegram reports sent that no Send of
// this session was waiting for (or, LateSends, a send of an account away
// whose delivery this account took over, landed late), as the delivery its
// caption's token names.
// After a restart TDLib finishes the previous session's pending sends by
// itself; recording them here, rather than leaving their intents for
// reconciliation, keeps the destination from getting them twice. When the
// delivery is recorded already with another message (another instance
// found nothing while the send was pending, and sent the part again), m is
// a second copy and is deleted from the destination. Whatever keeps it
// from settling m (the account's lease moved on, a write or a read that
// failed) is returned, and m noted for the account's owner
// (SettleStrays): its delivery may be recorded already, and then nothing
// else would ever look for it. When even the note fails, the error wraps
// errNotNoted. A caller whose ctx was cancelled notes m itself. It
// reports whether a delivery was recorded (false for a message without a
// token, or one recorded already).
func (p *Pipeline) RecordSend(ctx context.Context, m tg.Message) (bool, error) {
	st, ok := p.unclaimed(m)
	if !ok {
		return false, nil
	}
	// A send of an account away whose delivery this account took over
	// (LateSends: a post the session was told of as new, not a send of
	// its own, which carries the same token) is recorded as that
	// account's; a note of it is this account's to settle, as the other
	// account no longer runs.
	sender := st
	if from, ok := p.cfg.LateSends.senderOf(st.Token, st.Destination, st.Message); ok {
		sender.Account = from
	}
	ok, err := p.settleSend(ctx, sender, byReporter)
	// A caller that is stopping notes what it holds at once (noteSends).
	if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		if nerr := p.noteStrays(ctx, st); nerr != nil {
			return false, fmt.Errorf("%w: %w (%w)", errNotNoted, err, nerr)
		}
	}
	return ok, err
}

// unclaimed is m, a send no waiter claimed, as a note to settle; false
// for a message that carries no token or is not on the server.
func (p *Pipeline) unclaimed(m tg.Message) (store.StraySend, bool) {
	tok := TokenOf(m.Caption)
	if tok == "" || !m.ID.IsServer() {
		return store.StraySend{}, false
	}
	return store.StraySend{Destination: m.ChatID, Message: m.ID, Token: tok, Account: p.cfg.Account}, true
}

// errNotNoted marks RecordSend's failure to note a send it could not settle.
var errNotNoted = errors.New("send neither settled nor noted")

// noteSends notes msgs, sends no waiter claimed, for the account's owner
// without trying to settle them (a stopping recorder's).
func (p *Pipeline) noteSends(ctx context.Context, msgs []tg.Message) error {
	var strays []store.StraySend
	for _, m := range msgs {
		if st, ok := p.unclaimed(m); ok {
			strays = append(strays, st)
		}
	}
	if len(strays) == 0 {
		return nil
	}
	return p.noteStrays(ctx, strays...)
}

// settler is who settles a send, which decides what a failure does with
// its note.
type settler int

const (
	// byReporter is the session that reports the send (RecordSend): a
	// deletion that fails for a reason that may pass notes the send for
	// the account's owner, any other failure is returned and RecordSend
	// notes it.
	byReporter settler = iota
	// byOwner is the account's owner settling its notes (SettleStrays): a
	// failure that may pass is returned (the note stays), one that will
	// not drops the note.
	byOwner
	// byTaker is an account settling the notes of another one, away
	// (SettleStraysOf): every failure is returned and keeps the note, as
	// it may be this account's own (no right to delete another's message,
	// the destination lost) and not one the note's account would meet.
	byTaker
)

// settleSend records st's message as the delivery its token names, or,
// when that delivery is recorded with another message (or, its row lost
// with a rewind, a reconciliation kept another copy of the same file
// carrying the token), deletes it from the destination as a second copy
// (noting it for the account's owner when this session cannot, by
// byReporter; returning the failure otherwise, unless by is byOwner and
// no session could delete it). It reports whether it recorded it.
//
// A second copy is deleted only while the recorded copy stands and carries
// the same file: a reader's admin who deleted the recorded copy (or
// replaced its media) left the noted one as the part's only copy, and it
// stays.
func (p *Pipeline) settleSend(ctx context.Context, st store.StraySend, by settler) (bool, error) {
	ok, err := p.store.MarkSentByToken(ctx, st.Token, st.Destination, st.Message, st.Account)
	if err != nil {
		return false, err
	}
	if ok {
		p.log.Info("delivery recorded from a send no waiter claimed (left pending by a stopped process and finished by TDLib, or whose wait timed out)", "destination", st.Destination, "message", st.Message.ServerID())
		return true, nil
	}
	d, found, err := p.store.DeliveryByToken(ctx, st.Token, st.Destination)
	if err != nil {
		return false, err
	}
	if found && d.State != store.DeliverySent {
		return false, nil
	}
	file, err := p.copyFile(ctx, st, by)
	if err != nil || file == "" {
		return false, err // gone already, or no document: nothing to delete
	}
	keep := d.DestMessageID
	if !found {
		// The delivery's row was lost with a rewind: the copy the
		// reconciliation kept for the file with this token is its record.
		d = store.Delivery{Destination: st.Destination, Token: st.Token}
		if keep, _, err = p.store.KeptCopy(ctx, st.Destination, file, st.Token); err != nil {
			return false, err
		}
		if keep == 0 {
			// None kept: this copy landed after the reconciliation read
			// past it, or none ran. It is kept for its file as the
			// reconciliation would have kept it, so that the package,
			// catalogued again, is recorded from it rather than sent.
			rec, err := p.store.RecordCopy(ctx, store.CopyFound{Destination: st.Destination, Message: st.Message,
				Token: st.Token, UniqueID: file})
			if err != nil {
				return false, err
			}
			if rec.Outcome.Recovered() {
				p.log.Info("a send whose delivery the catalogue lost kept for its file", "destination", st.Destination,
					"message", st.Message.ServerID())
				return true, nil
			}
			if rec.Outcome != store.CopySecond || rec.Recorded == 0 {
				return false, nil
			}
			keep = rec.Recorded // kept meanwhile, by a reconciliation
		}
	}
	return false, p.dropSecond(ctx, d, keep, st, file, by)
}

// copyFile returns the unique id of the file st's message carries, "" when
// it is gone or carries no document, with a failed read handled as
// readFailed says. getMessage answers from the session's database, which
// misses the edits and deletions of a chat the session does not follow
// (the daemon follows its sources, not its destinations): opening the
// chat makes TDLib fetch its difference, which the read waits for.
func (p *Pipeline) copyFile(ctx context.Context, st store.StraySend, by settler) (string, error) {
	if err := p.cfg.Views.Current(ctx, st.Destination); err != nil {
		return "", p.readFailed(ctx, st, by, err)
	}
	file, err := p.fileOf(ctx, st.Destination, st.Message)
	if err != nil {
		return "", p.readFailed(ctx, st, by, err)
	}
	return file, nil
}

// dropSecond deletes st's message, which carries file, as a second copy of
// the part d records as message keep, while keep stands and carries the
// same file (settleSend). It returns the failure that keeps st for a later
// try, as settleSend does.
func (p *Pipeline) dropSecond(ctx context.Context, d store.Delivery, keep tg.MessageID, st store.StraySend, file string, by settler) error {
	if keep == 0 || keep == st.Message {
		return nil
	}
	switch kept, err := p.fileOf(ctx, st.Destination, keep); {
	case err != nil:
		return p.readFailed(ctx, st, by, err)
	case kept != file:
		p.log.Warn("a copy noted as a second copy stays: the copy recorded for its part is gone from the destination, or carries another file",
			"destination", st.Destination, "token", st.Token, "recorded", keep.ServerID(), "message", st.Message.ServerID())
		return nil
	}
	err := p.deleteCopies(ctx, d, keep, []tg.MessageID{st.Message}, by == byReporter)
	if err != nil && (errors.Is(err, errNotNoted) || by == byTaker || by == byOwner && tg.MayPass(err)) {
		return err // kept for the next try
	}
	return nil
}

// readFailed is what settleSend returns when a read of the destination
// failed. A send this session reports (byReporter) returns the failure,
// and RecordSend notes st for the account's owner; another account's note
// (byTaker) returns it and stays. For the owner's notes a failure that
// will not pass (the account lost the destination) forgets the note, and
// any other keeps it for the next settling.
func (p *Pipeline) readFailed(ctx context.Context, st store.StraySend, by settler, err error) error {
	switch {
	case by != byOwner:
	case tg.Classify(err) == tg.ClassPermanent:
		p.log.Warn("a noted send cannot be settled: its destination cannot be read; the note is dropped",
			"destination", st.Destination, "message", st.Message.ServerID(), "err", err)
		return nil
	}
	return err
}

// fileOf returns the unique id of the file message id of chat carries:
// "" when it is gone or carries no document.
func (p *Pipeline) fileOf(ctx context.Context, chat tg.ChatID, id tg.MessageID) (string, error) {
	m, err := p.tg.GetMessage(ctx, chat, id)
	switch {
	case errors.Is(err, tg.ErrMessageNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read message %d of %d: %w", id.ServerID(), chat, err)
	case m.Document == nil:
		return "", nil
	}
	return m.Document.File.UniqueID, nil
}

// stray is message m, sent for d by this session, as a note to settle.
func (p *Pipeline) stray(d store.Delivery, m tg.MessageID) store.StraySend {
	return store.StraySend{Destination: d.Destination, Message: m, Token: d.Token, Account: p.cfg.Account}
}

// noteStrays keeps messages of this session's sends that it could not
// settle for the account's owner (SettleStrays): sends that landed and
// could not be recorded, the account's lease gone (ErrStaleEpoch; the new
// owner may have sent the same parts again meanwhile), and second copies
// this session could not delete. It logs, and returns, its failure.
func (p *Pipeline) noteStrays(ctx context.Context, strays ...store.StraySend) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := p.store.NoteStraySends(wctx, strays...); err != nil {
		p.log.Error("note sends this session could not settle; the destination may hold their parts twice", "sends", len(strays), "err", err)
		return err
	}
	p.log.Warn("sends this session could not settle noted for the account's owner", "sends", len(strays))
	return nil
}

// SettleStrays settles the sends of this account that a session could
// not settle (store.StraySend), each as RecordSend would have, and forgets
// each settled one; a note whose settling failed for a reason that may
// pass stays for the next call (until it is overdue: then it is logged
// and forgotten), the others go on. It returns how many it settled, and
// the failures joined.
func (p *Pipeline) SettleStrays(ctx context.Context) (int, error) {
	strays, err := p.store.StraySends(ctx, p.cfg.Account)
	if err != nil {
		return 0, err
	}
	var n int
	var errs []error
	for _, st := range strays {
		if ctx.Err() != nil {
			break
		}
		_, err := p.settleSend(ctx, st, byOwner)
		switch {
		case err != nil && !st.Overdue:
			errs = append(errs, fmt.Errorf("settle send %d in %d: %w", st.Message.ServerID(), st.Destination, err))
			continue
		case err != nil:
			p.log.Error("a send noted to settle still fails after "+store.StrayPatience.String()+"; given up, the destination may hold its part twice",
				"destination", st.Destination, "message", st.Message.ServerID(), "err", err)
		default:
			n++
		}
		if err := p.store.ForgetStraySend(ctx, st); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// SettleStraysOf settles, through this account's session, the notes of
// account's sends to dests (store.StraySend), each as SettleStrays would:
// account is away (logged out, or its lease untaken), so no delivery stage
// of its own settles them, and this account sends to those destinations
// and takes account's deliveries there. Left, a noted second copy would
// stay in its destination for ever. This session reads the destination
// itself: it opens it, so that TDLib fetches what account's session
// posted there. A note it fails to settle stays, for
// account's return or the next call, and is never given up here. It
// returns how many it settled, and the failures that may pass joined;
// those that will not (this account's own: no right to delete another's
// message, the destination lost) are logged.
func (p *Pipeline) SettleStraysOf(ctx context.Context, account string, dests []tg.ChatID) (int, error) {
	strays, err := p.store.StraySends(ctx, account)
	if err != nil {
		return 0, err
	}
	var n int
	var errs []error
	for _, st := range strays {
		if ctx.Err() != nil {
			break
		}
		if !slices.Contains(dests, st.Destination) {
			continue
		}
		switch _, err := p.settleSend(ctx, st, byTaker); {
		case err == nil:
			if err := p.store.ForgetStraySend(ctx, st); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		case tg.MayPass(err):
			errs = append(errs, fmt.Errorf("settle send %d of %s in %d: %w", st.Message.ServerID(), account, st.Destination, err))
		default:
			p.log.Warn("a send noted for another account cannot be settled by this one; the note is left for it",
				"noted_for", account, "destination", st.Destination, "message", st.Message.ServerID(), "err", err)
		}
	}
	if n > 0 {
		p.log.Info("sends noted for an account away settled", "noted_for", account, "settled", n)
	}
	return n, errors.Join(errs...)
}
