package ingest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"stashd/internal/caption"
	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// TokenPrefix starts the token line of every caption stashd sends. The token
// is what reconciliation searches the destination for.
const TokenPrefix = "stashd:"

// Caption is the caption of part i of pkg under the default template,
// carrying the delivery token as its last line.
func Caption(pkg store.Package, part int, token string) string {
	t, _ := caption.Parse("")
	return t.Render(captionFields(pkg, part, tg.Message{}, "", ""), "", TokenPrefix+token)
}

// captionFields are the caption's values for part i of pkg, posted as src
// in the source chat.
func captionFields(pkg store.Package, part int, src tg.Message, title, username string) caption.Fields {
	f := caption.Fields{Name: pkg.Name, Size: pkg.TotalSize}
	if pkg.PartCount > 1 {
		f.Parts = fmt.Sprintf("part %d/%d", part+1, pkg.PartCount)
	}
	if !src.Date.IsZero() {
		f.Date = src.Date.UTC().Format(time.DateOnly)
	}
	f.Source = title
	if username != "" {
		f.Source = "@" + username
	}
	f.Link = tg.PublicMessageLink(username, src.ChatID, src.ID, src.TopicID())
	return f
}

// captionFor is the caption of part i of pkg (as GetPackage reads it) as
// the pipeline's template has it: a broken archive mirrored anyway
// (deliver_broken) says so on its first line, and the token line d.Token
// is last.
func (p *Pipeline) captionFor(ctx context.Context, pkg store.Package, i int, m tg.Message, token string) string {
	title, username := "", p.cfg.SourceUsernames[m.ChatID]
	if g, ok := p.tg.(chatGetter); ok && m.ChatID != 0 && username == "" {
		if c, err := g.GetChat(ctx, m.ChatID); err == nil {
			title = c.Title
		}
	}
	warning := ""
	if !p.cfg.DeadLetterBroken && pkg.Broken != "" {
		warning = "⚠ " + BrokenReason + ": " + pkg.Broken
	}
	return p.cfg.Caption.Render(captionFields(pkg, i, m, title, username), warning, TokenPrefix+token)
}

// chatGetter is a session that knows its chats (tg.Session): GetChat is
// answered from TDLib's local state.
type chatGetter interface {
	GetChat(ctx context.Context, chat tg.ChatID) (tg.Chat, error)
}

// deliverDest sends every part of pkg to dest, in order, through this
// pipeline's account, handing the delivery over to another account when
// this one may not write there. It returns how many parts it sent
// (reconciled ones not counted) and whether it handed the delivery over.
func (p *Pipeline) deliverDest(ctx context.Context, pkg store.Package, parts []tg.Message, in route.Package, dest tg.ChatID) (int, bool, error) {
	sent := 0
	thread, err := p.destThread(ctx, in, dest)
	if err != nil {
		// The destination's refusal before any send (its topic looked up
		// or created by an account removed from it) goes as a send's.
		handed, err := p.refusedThere(ctx, pkg, parts, in, dest, err)
		return sent, handed, err
	}
	for _, a := range albums(len(parts), p.albumsAllowed()) {
		last := a.end == len(parts)
		n, err := p.deliverSpan(ctx, pkg, dest, thread, a, parts[a.first:a.end], last)
		if err != nil && n == 0 {
			// A closed or deleted topic: reopened or created again,
			// the parts go once more.
			var again bool
			if thread, again, err = p.recoverTopic(ctx, in, dest, thread, err); again {
				n, err = p.deliverSpan(ctx, pkg, dest, thread, a, parts[a.first:a.end], last)
			}
		}
		sent += n
		err = p.topicRefusal(in, dest, thread, err)
		if err != nil {
			handed, err := p.refusedThere(ctx, pkg, parts, in, dest, err)
			return sent, handed, err
		}
	}
	return sent, false, nil
}

// refusedThere returns err, met delivering pkg to dest, unless it is
// dest's refusal of this account (destRefusal): the delivery is then
// handed to another account that may write there (reported true), or
// waits for write access (tg.ErrNoWriteAccess), not given up.
//
// A source this account cannot read any more (sourceUnreadable) hands the
// delivery to another account that can, as a part that cannot be loaded
// does (Deliverer.unreadable); with none, err stands.
func (p *Pipeline) refusedThere(ctx context.Context, pkg store.Package, parts []tg.Message, in route.Package, dest tg.ChatID, err error) (bool, error) {
	unreadable := sourceUnreadable(err)
	if !unreadable && !destRefusal(err) {
		return false, err
	}
	handed, herr := p.handOver(ctx, pkg.ID, partKeys(parts), in, dest, !unreadable, err)
	switch {
	case herr != nil:
		return false, herr
	case handed:
		return true, nil
	case unreadable:
		return false, err
	}
	// cause with %v: a 400 would make the whole error permanent.
	return false, fmt.Errorf("deliver package %d to %d: %w (%v)", pkg.ID, dest, tg.ErrNoWriteAccess, err)
}

// chatPauser is a session that pauses sends to a chat after a 429 there
// (tg.Session).
type chatPauser interface {
	ChatPause(chat tg.ChatID) time.Duration
}

// sendPauser is a session whose sends a 429 answering the account may
// pause (tg.Session).
type sendPauser interface {
	SendPause() time.Duration
}

// sendTurner is a session with a send budget (tg.Session).
type sendTurner interface {
	SendTurn(ctx context.Context) (context.Context, func(), error)
}

// foundCopy reports whether in needs no send: it is recorded sent, or a
// reconciliation after the catalogue rewound found its part's file in the
// destination with no delivery left to name it, and that copy is now
// recorded as the delivery.
func (p *Pipeline) foundCopy(ctx context.Context, in store.Intent) (bool, error) {
	if in.State == store.DeliverySent {
		return true, nil
	}
	if in.Copy == 0 {
		return false, nil
	}
	p.log.Info("delivery recovered from a copy found in the destination", "package", in.PackageID, "destination", in.Destination, "part", in.PartIndex)
	if _, err := p.store.MarkSent(ctx, in.Delivery, in.Copy); err != nil {
		return false, err
	}
	p.m.delivered(in.Destination, DeliveryReconciled, 1)
	return true, nil
}

// reconciled records d as delivered by m's message, found in the
// destination by its token, and deletes the second copies m found.
func (p *Pipeline) reconciled(ctx context.Context, d store.Delivery, m tokenMatch) error {
	p.log.Info("delivery reconciled from destination", "package", d.PackageID, "destination", d.Destination, "part", d.PartIndex)
	recorded, err := p.store.MarkSent(ctx, d, m.found)
	if err != nil {
		return err
	}
	p.m.delivered(d.Destination, DeliveryReconciled, 1)
	p.keepOneCopy(ctx, d, recorded, append(m.copies, m.found))
	return nil
}

// freshTokens returns the tokens of the intents among ins written by the
// attempt at hand: no earlier attempt's message can carry them.
func freshTokens(ins iter.Seq[store.Intent]) []string {
	var tokens []string
	for in := range ins {
		if in.Fresh {
			tokens = append(tokens, in.Token)
		}
	}
	return tokens
}

// refusal reports whether err is Telegram's refusal of a send (a 429 from
// the chat's limit, a closed topic): no message was made.
func refusal(err error) bool {
	return errors.Is(err, tg.ErrSendRefused) || errors.Is(err, tg.ErrChatFloodWait)
}

// refused handles sends of ins that Telegram refused (refusal): no message
// carries the tokens of the fresh intents among them, and no earlier
// attempt used them, so those intents are dropped, in one commit, under
// the delivery's lock, and the next attempt starts afresh instead of
// reading the destination for them. Without the lock (taken over
// meanwhile: its new holder may be sending them) they stay.
func (p *Pipeline) refused(ctx context.Context, ins ...store.Intent) {
	tokens := freshTokens(slices.Values(ins))
	end, ok := ctx.Value(deliveryEndKey{}).(*deliveryEnd)
	if len(tokens) == 0 || !ok {
		return // nothing to drop, or no delivery lock to drop it under: the next attempt reconciles it
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := end.lock.DropUnsent(wctx, tokens...); err != nil {
		p.log.Warn("the next attempt reconciles the intents of refused sends", "package", ins[0].PackageID,
			"destination", ins[0].Destination, "intents", len(tokens), "err", err)
	}
}

// sent records ds as delivered by msgs (ds[i] by msgs[i]), which a send
// of this session's just made (one message, or an album's), in one
// commit.
func (p *Pipeline) sent(ctx context.Context, ds []store.Delivery, msgs []tg.MessageID, final bool) error {
	// First write after the send: the destination ids (the stubs).
	// Use a context that survives cancellation so a shutdown in
	// this instant does not forget a message that exists.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	var recorded []tg.MessageID
	var err error
	if end, ok := ctx.Value(deliveryEndKey{}).(*deliveryEnd); ok && final && !end.done {
		recorded, err = end.lock.MarkSentAndUnlock(wctx, ds, msgs, end.unusedDropped(end.stmts)...)
		if err == nil {
			end.done, end.ahead = true, nil
		}
	} else {
		recorded, err = p.store.MarkSentAll(wctx, ds, msgs)
	}
	cancel()
	if errors.Is(err, store.ErrStaleEpoch) {
		// Landed after the account's lease moved on: the new owner may
		// have sent these parts again.
		strays := make([]store.StraySend, len(ds))
		for i, d := range ds {
			strays[i] = p.stray(d, msgs[i])
		}
		_ = p.noteStrays(ctx, strays...) // logged
	}
	if err != nil {
		return err
	}
	for i, d := range ds {
		p.m.delivered(d.Destination, DeliverySent, 1)
		// A copy an earlier session left pending may have landed, and
		// been recorded, while this send was on its way: this one is the
		// second.
		p.keepOneCopy(ctx, d, recorded[i], []tg.MessageID{msgs[i]})
	}
	return nil
}

// deliveryEnd is what a delivery run under its own lock (Deliverer.one)
// writes when it ends: stmts (its queue row cleared) and the lock's
// release, which go with the record of its last send when that send ends
// it (done then), in one round trip instead of two. ahead are the intents
// of its first send written with its lock, in the round trip that ended
// the delivery before it, by part index, until a send takes them.
type deliveryEnd struct {
	lock  *store.Lock
	stmts []store.Statement
	done  bool
	ahead map[int]store.Intent
}

// setAhead keeps the intents written ahead with the delivery's lock.
func (e *deliveryEnd) setAhead(ia *store.IntentsAhead) {
	if ia == nil {
		return
	}
	for _, in := range ia.Intents() {
		if e.ahead == nil {
			e.ahead = map[int]store.Intent{}
		}
		e.ahead[in.PartIndex] = in
	}
}

// takeAhead returns the intents written ahead for parts idx of the
// delivery, by part index, and forgets them: the send that takes them
// owns them from then on.
func (e *deliveryEnd) takeAhead(idx []int) map[int]store.Intent {
	if e == nil || len(e.ahead) == 0 {
		return nil
	}
	got := map[int]store.Intent{}
	for _, i := range idx {
		if in, ok := e.ahead[i]; ok {
			got[i] = in
			delete(e.ahead, i)
		}
	}
	return got
}

// unusedDropped returns stmts with the deletion of the intents written
// ahead that no send took, when there are any: the delivery ends without
// sending them, and kept they would make the next attempt search the
// destination for tokens no message carries.
func (e *deliveryEnd) unusedDropped(stmts []store.Statement) []store.Statement {
	tokens := freshTokens(maps.Values(e.ahead))
	if len(tokens) == 0 {
		return stmts
	}
	return append(slices.Clip(stmts), e.lock.DropIntents(tokens))
}

// unlockWith ends the delivery without a send: stmts, the drop of its
// unused intents and the lock's release in one unit (Lock.UnlockWith).
func (e *deliveryEnd) unlockWith(ctx context.Context, stmts ...store.Statement) error {
	if err := e.lock.UnlockWith(ctx, e.unusedDropped(stmts)...); err != nil {
		return err
	}
	e.ahead = nil
	return nil
}

// release lets the delivery's lock go (a no-op once a unit did), with
// the drop of its unused intents when there are any.
func (e *deliveryEnd) release(ctx context.Context) {
	if len(e.ahead) > 0 {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		// On failure the intents stay: the next attempt reconciles them.
		_ = e.unlockWith(wctx)
		cancel()
	}
	e.lock.Unlock()
}

type deliveryEndKey struct{}

// withDeliveryEnd returns ctx carrying end for the delivery's last send.
func withDeliveryEnd(ctx context.Context, end *deliveryEnd) context.Context {
	return context.WithValue(ctx, deliveryEndKey{}, end)
}

// sendTurn waits for the turn of a send to dest (of package pkg's part
// i, first of an album or alone) in the account's send budget and returns
// the context carrying it; done ends the turn. Sends to dest wait out a 429
// there, and every send a 429 answering the account: the delivery is then
// put off by the wait, without taking a send turn from other destinations
// or writing its intents.
func (p *Pipeline) sendTurn(ctx context.Context, pkg store.Package, dest tg.ChatID, i int) (context.Context, func(), error) {
	if cp, ok := p.tg.(chatPauser); ok {
		if d := cp.ChatPause(dest); d > 0 {
			return nil, nil, &tg.FloodWaitError{RetryAfter: d, Err: fmt.Errorf("deliver package %d part %d to %d: %w", pkg.ID, i, dest, tg.ErrChatFloodWait)}
		}
	}
	if sp, ok := p.tg.(sendPauser); ok {
		if d := sp.SendPause(); d > 0 {
			return nil, nil, &tg.FloodWaitError{RetryAfter: d, Err: fmt.Errorf("deliver package %d part %d to %d: %w", pkg.ID, i, dest, tg.ErrSendsPaused)}
		}
	}
	if st, ok := p.tg.(sendTurner); ok {
		return st.SendTurn(ctx)
	}
	return ctx, func() {}, nil
}

// HandOverRoute is the route name of deliveries handed to another account.
const HandOverRoute = "(handed over)"

// handOver gives the delivery of package pkg (its parts keys, posted as
// in) to dest to another account of the daemon (Config.HandOver), one
// that knows the source and dest: it waits for that account's window
// loop, which sends it at once. refused: this account may not write to
// dest; otherwise it cannot read the source. cause is why. It reports
// false, and no error, when no account may take the delivery.
func (p *Pipeline) handOver(ctx context.Context, pkg int64, keys []tg.MessageKey, in route.Package, dest tg.ChatID, refused bool, cause error) (bool, error) {
	if p.cfg.HandOver == nil {
		return false, nil
	}
	to, ok := p.cfg.HandOver(in.Chat, dest, refused)
	if !ok {
		return false, nil
	}
	w := store.Waiting{PackageID: pkg, Destination: dest, Account: to, Route: HandOverRoute, OpensAt: p.cfg.Now(),
		Parts: keys, Topic: in.Topic, PartCount: len(keys)}
	if err := p.store.WaitDelivery(ctx, w); err != nil {
		return false, err
	}
	p.m.delivered(dest, DeliveryHandedOver, 1)
	msg := "no write access to the destination; delivery handed to another account"
	if !refused {
		msg = "this account cannot read the source; delivery handed to another account"
	}
	p.log.Warn(msg, "package", pkg, "source", in.Chat, "destination", dest, "to", to, "err", cause)
	return true, nil
}

// partKeys are the keys of parts.
func partKeys(parts []tg.Message) []tg.MessageKey {
	keys := make([]tg.MessageKey, len(parts))
	for i, m := range parts {
		keys[i] = m.Key()
	}
	return keys
}

// cannotRead reports whether err is this account's failure to read a
// source chat it does not know or was removed from ("Chat not found",
// "Can't access the chat", CHANNEL_PRIVATE): another account may still
// read it.
func cannotRead(err error) bool {
	return errors.Is(err, tg.ErrNoAccess) || errors.Is(err, tg.ErrChatNotFound)
}

// errSourceUnreadable is the reason of a delivery handed to an account
// that cannot read its source, while no other running account may take
// it: it waits, deferred, for one that can (the account that handed it
// over, once it runs or its write access is back), and is given up after
// unreadableTries attempts.
var errSourceUnreadable = errors.New("the account cannot read the source and no other account may take the delivery")
