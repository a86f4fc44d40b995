package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// TokenPrefix starts the token line of every caption stashd sends. The token
// is what reconciliation searches the destination for.
const TokenPrefix = "stashd:"

// Caption is the caption of part i of pkg, carrying the delivery token.
func Caption(pkg store.Package, part int, token string) string {
	var b strings.Builder
	b.WriteString(pkg.Name)
	if pkg.PartCount > 1 {
		fmt.Fprintf(&b, " (part %d/%d)", part+1, pkg.PartCount)
	}
	b.WriteString("\n")
	b.WriteString(TokenPrefix)
	b.WriteString(token)
	return b.String()
}

// deliverTo sends every part of pkg exactly once to dest (one queued
// delivery, whose parts' source posted them as in says). Each send is
// preceded by an intent row holding a token that the caption carries; an
// intent this call did not write may have been sent by an attempt that
// crashed before recording it, so the destination is searched for its
// token first and only an unfound part is sent. The queue row goes once
// every part is there (or the delivery is handed to another account).
//
// It returns how many parts it sent (reconciled ones not counted).
func (p *Pipeline) deliverTo(ctx context.Context, pkg store.Package, parts []tg.Message, in route.Package, dest tg.ChatID) (int, error) {
	start := time.Now()
	defer p.m.observeStage(StageDeliver, start)
	if done, err := p.store.DeliveryComplete(ctx, pkg.ID, []tg.ChatID{dest}); err != nil {
		return 0, err
	} else if done {
		// Sent meanwhile (reconciled, recorded from an earlier session's
		// send, or a route's backfill): no send turn is taken.
		return 0, p.store.ClearWaiting(ctx, pkg.ID, dest)
	}
	return p.spreadDest(ctx, pkg, parts, in, dest)
}

// deliverDest sends every part of pkg to dest, in order, through this
// pipeline's account, handing the delivery over to another account when
// this one may not write there.
func (p *Pipeline) deliverDest(ctx context.Context, pkg store.Package, parts []tg.Message, in route.Package, dest tg.ChatID) (int, error) {
	sent := 0
	thread, err := p.destThread(ctx, in, dest)
	if err != nil {
		return sent, err
	}
	for i, m := range parts {
		n, err := p.deliverPart(ctx, pkg, dest, thread, i, m)
		sent += n
		if err != nil && tg.NoWriteAccess(err) && p.cfg.HandOver != nil {
			handed, herr := p.handOver(ctx, pkg, parts, in, dest, err)
			if handed {
				return sent, nil
			}
			err = herr
		}
		if err != nil {
			return sent, err
		}
	}
	if err := p.store.ClearWaiting(ctx, pkg.ID, dest); err != nil {
		return sent, err
	}
	return sent, nil
}

// sendTurner is a session with a send budget (tg.Session).
type sendTurner interface {
	SendTurn(ctx context.Context) (context.Context, func(), error)
}

// deliverPart sends part i of pkg to dest (into forum topic thread, when
// not 0) unless it is there already; it
// returns 1 when it sent it. With a send budget the part first waits for
// its turn, so the intent is written only when the send can go at once: a
// stop while it waits leaves nothing to reconcile.
func (p *Pipeline) deliverPart(ctx context.Context, pkg store.Package, dest tg.ChatID, thread int64, i int, m tg.Message) (int, error) {
	if st, ok := p.tg.(sendTurner); ok {
		tctx, done, err := st.SendTurn(ctx)
		if err != nil {
			return 0, err
		}
		defer done()
		ctx = tctx
	}
	d, fresh, err := p.store.EnsureIntent(ctx, pkg.ID, dest, i, p.cfg.Account)
	if err != nil {
		return 0, err
	}
	if d.State == store.DeliverySent {
		return 0, nil
	}
	if !fresh {
		found, copies, err := p.findToken(ctx, d)
		if err != nil {
			return 0, fmt.Errorf("reconcile delivery of package %d to %d: %w", pkg.ID, dest, err)
		}
		if found != 0 {
			p.log.Info("delivery reconciled from destination", "package", pkg.ID, "destination", dest, "part", i)
			recorded, err := p.store.MarkSent(ctx, d, found)
			if err != nil {
				return 0, err
			}
			p.m.delivered(dest, DeliveryReconciled, 1)
			p.keepOneCopy(ctx, d, recorded, append(copies, found))
			return 0, nil
		}
	}
	msg, err := p.tg.SendTo(ctx, dest, thread, m.Document.File.RemoteID, Caption(pkg, i, d.Token))
	if err != nil {
		return 0, fmt.Errorf("deliver package %d part %d to %d: %w", pkg.ID, i, dest, err)
	}
	// First write after the send: the destination id (the stub).
	// Use a context that survives cancellation so a shutdown in
	// this instant does not forget a message that exists.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	recorded, err := p.store.MarkSent(wctx, d, msg.ID)
	cancel()
	if err != nil {
		return 0, err
	}
	p.m.delivered(dest, DeliverySent, 1)
	// A copy an earlier session left pending may have landed, and been
	// recorded, while this send was on its way: this one is the second.
	p.keepOneCopy(ctx, d, recorded, []tg.MessageID{msg.ID})
	return 1, nil
}

// HandOverRoute is the route name of deliveries handed to another account.
const HandOverRoute = "(handed over)"

// handOver gives the delivery of pkg to dest to another account with
// write access there: it waits for that account's window loop, which sends
// it at once. It reports false (and cause) when no account is left.
func (p *Pipeline) handOver(ctx context.Context, pkg store.Package, parts []tg.Message, in route.Package, dest tg.ChatID, cause error) (bool, error) {
	to, ok := p.cfg.HandOver(dest)
	if !ok {
		return false, fmt.Errorf("no account can write to %d: %w", dest, cause)
	}
	keys := make([]tg.MessageKey, len(parts))
	for i, m := range parts {
		keys[i] = m.Key()
	}
	w := store.Waiting{PackageID: pkg.ID, Destination: dest, Account: to, Route: HandOverRoute, OpensAt: p.cfg.Now(),
		Parts: keys, Topic: in.Topic, PartCount: len(parts)}
	if err := p.store.WaitDelivery(ctx, w); err != nil {
		return false, err
	}
	p.m.delivered(dest, DeliveryHandedOver, 1)
	p.log.Warn("no write access to the destination; delivery handed to another account", "package", pkg.ID, "destination", dest, "to", to)
	return true, nil
}

// destinations returns where a package as one source posted it goes.
func (p *Pipeline) destinations(in route.Package) []tg.ChatID {
	if !p.cfg.Routes.Routed() {
		return p.cfg.Destinations
	}
	return p.cfg.Routes.Destinations(in)
}

// routeInput is what routing sees of the package parts make up: their
// source and topic, the first part's name and the parts' total size as
// their messages give it.
func routeInput(parts []tg.Message) route.Package {
	in := route.Package{Chat: parts[0].ChatID, Topic: parts[0].TopicID()}
	if d := parts[0].Document; d != nil {
		in.Name = d.FileName
	}
	for _, m := range parts {
		if m.Document != nil {
			in.Size += m.Document.File.Size
		}
	}
	return in
}

// partDelivered reports whether pkg, of which msg carries one part, has
// been delivered, or has its delivery queued, everywhere it must go as
// msg's source posted it. With
// routes that needs the package's name and size: msg alone is one part of
// it (a forwarded part keeps the name and bytes, so the catalogue's stand
// for it).
func (p *Pipeline) partDelivered(ctx context.Context, pkg int64, msg tg.Message) (bool, error) {
	if !p.cfg.Routes.Routed() {
		return p.store.DeliveryPromised(ctx, pkg, p.cfg.Destinations)
	}
	got, err := p.store.GetPackage(ctx, pkg)
	if err != nil {
		return false, err
	}
	in := route.Package{Chat: msg.ChatID, Topic: msg.TopicID(), Name: got.Name, Size: got.TotalSize}
	return p.store.DeliveryPromised(ctx, pkg, p.cfg.Routes.Destinations(in))
}

// reconcileSkew allows for the database's clock running ahead of
// Telegram's: reconciliation looks this much further back than the intent's
// creation.
const reconcileSkew = 2 * time.Minute

// reconcileMaxPages bounds how many pages of the destination's documents
// one reconciliation reads (100 each).
const reconcileMaxPages = 50

// findToken looks for the messages carrying d's token in d's destination.
// It does not ask the server to search for the token: Telegram's full-text
// search is word-based and indexes late, so a message sent a moment before a
// crash would not be found and would be sent again. Instead it pages the
// destination's documents newest first with an empty query and matches
// captions here, down to the first document older than the intent (no
// message can carry a token before its intent existed). It returns the
// oldest message carrying the token (0 when none does) and, in copies, the
// others: the same part sent again, as when an instance found nothing, sent,
// and an old TDLib database later re-sent its own pending copy.
func (p *Pipeline) findToken(ctx context.Context, d store.Delivery) (found tg.MessageID, copies []tg.MessageID, err error) {
	want := TokenPrefix + d.Token
	notBefore := d.CreatedAt.Add(-reconcileSkew)
	var matches []tg.MessageID
	// result keeps the oldest match as the delivery.
	result := func() (tg.MessageID, []tg.MessageID, error) {
		if len(matches) == 0 {
			return 0, nil, nil
		}
		slices.Sort(matches)
		matches = slices.Compact(matches)
		return matches[0], matches[1:], nil
	}
	var from tg.MessageID // 0: the newest message
	for range reconcileMaxPages {
		msgs, err := p.tg.SearchChatMessages(ctx, tg.Search{
			Chat: d.Destination, FromMessageID: from, Limit: tg.MaxSearchLimit, Filter: tg.FilterDocument,
		})
		if err != nil {
			return 0, nil, fmt.Errorf("list documents of %d: %w", d.Destination, err)
		}
		oldest := from
		done := len(msgs) == 0
		for _, m := range msgs {
			if from != 0 && m.ID > from {
				continue // not older than the previous page
			}
			if m.ID.IsServer() && hasToken(m.Caption, want) {
				matches = append(matches, m.ID)
			}
			if oldest == 0 || m.ID < oldest {
				oldest = m.ID
			}
			if !m.Date.IsZero() && m.Date.Before(notBefore) {
				done = true
			}
		}
		if done || oldest == from || oldest <= tg.MessageIDFromServer(1) {
			return result()
		}
		// One below the oldest message: the next page starts at the message
		// before it (from_message_id is inclusive).
		from = oldest - 1
	}
	if len(matches) > 0 {
		// Copies may hide further down; the delivery is found all the same.
		return result()
	}
	return 0, nil, tg.Permanent(fmt.Errorf("find token of package %d part %d in %d: more than %d documents since the intent of %s",
		d.PackageID, d.PartIndex, d.Destination, reconcileMaxPages*tg.MaxSearchLimit, d.CreatedAt.UTC().Format(time.RFC3339)))
}

// keepOneCopy deletes the messages of found, all carrying d's token, but
// recorded, the one d's row records: the part is then in the destination
// once. A recorded message that is not among them (another session's copy)
// is kept all the same.
func (p *Pipeline) keepOneCopy(ctx context.Context, d store.Delivery, recorded tg.MessageID, found []tg.MessageID) {
	if copies := slices.DeleteFunc(slices.Clone(found), func(id tg.MessageID) bool { return id == recorded }); len(copies) > 0 {
		p.deleteCopies(ctx, d, recorded, copies)
	}
}

// deleteCopies deletes copies, second copies in d's destination of the
// part delivered there as message keep, for everyone. A failure is logged,
// not returned: the delivery stands, the destination only holds the part
// more than once. A retryable failure is tried once more.
func (p *Pipeline) deleteCopies(ctx context.Context, d store.Delivery, keep tg.MessageID, copies []tg.MessageID) {
	err := p.tg.DeleteMessages(ctx, d.Destination, copies, true)
	if err != nil && tg.Classify(err) == tg.ClassRetryable && ctx.Err() == nil {
		err = p.tg.DeleteMessages(ctx, d.Destination, copies, true)
	}
	dups := make([]int64, len(copies))
	for i, id := range copies {
		dups[i] = id.ServerID()
	}
	if err != nil {
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			p.log.Error("delete second copies of a delivered part; the destination holds it more than once",
				"destination", d.Destination, "package", d.PackageID, "part", d.PartIndex,
				"message", keep.ServerID(), "copies", dups, "err", err)
		}
		return
	}
	p.log.Warn("second copies of a delivered part deleted from the destination",
		"destination", d.Destination, "package", d.PackageID, "part", d.PartIndex,
		"message", keep.ServerID(), "copies", dups)
	p.m.deletedCopies(p.cfg.Account, len(copies))
}

// hasToken reports whether caption carries the token line want exactly (a
// longer token sharing the prefix is another delivery's).
func hasToken(caption, want string) bool {
	for line := range strings.SplitSeq(caption, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
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
// this session was waiting for, as the delivery its caption's token names.
// After a restart TDLib finishes the previous session's pending sends by
// itself; recording them here, rather than leaving their intents for
// reconciliation, keeps the destination from getting them twice. When the
// delivery is recorded already with another message (another instance
// found nothing while the send was pending, and sent the part again), m is
// a second copy and is deleted from the destination. It reports whether a
// delivery was recorded (false for a message without a token, or one
// recorded already).
func (p *Pipeline) RecordSend(ctx context.Context, m tg.Message) (bool, error) {
	tok := TokenOf(m.Caption)
	if tok == "" || !m.ID.IsServer() {
		return false, nil
	}
	ok, err := p.store.MarkSentByToken(ctx, tok, m.ChatID, m.ID)
	if err != nil {
		return false, err
	}
	if ok {
		p.log.Info("delivery recorded from a send of an earlier session", "destination", m.ChatID, "message", m.ID.ServerID())
		return true, nil
	}
	d, found, err := p.store.DeliveryByToken(ctx, tok, m.ChatID)
	if err != nil {
		return false, err
	}
	if found && d.State == store.DeliverySent && d.DestMessageID != 0 && d.DestMessageID != m.ID {
		p.deleteCopies(ctx, d, d.DestMessageID, []tg.MessageID{m.ID})
	}
	return false, nil
}
