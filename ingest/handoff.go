package ingest

import (
	"context"
	"slices"

	"stashd/store"
	"stashd/tg"
)

// handOff is the last step of ingest: it queues the deliveries a
// catalogued package owes as parts' source posted it (every destination
// its routes give it, every configured destination without routes), one
// row per destination not yet complete (one statement for all), and wakes
// the delivery stage.
// It never waits for a send: the queue is in PostgreSQL, and the delivery
// stage (Deliverer) sends it at the account's send budget. A delivery a
// route's window holds is queued for the window's opening.
//
// A delivery queued already keeps its row (another copy of the package,
// another account's hand-over). It returns how many it queued.
func (p *Pipeline) handOff(ctx context.Context, pkg store.Package, parts []tg.Message) (int, error) {
	owed := p.deliveriesOwed(pkg.ID, parts)
	queued, err := p.store.QueueDeliveries(ctx, pkg.ID, owed)
	if err != nil {
		return 0, err
	}
	for _, w := range owed {
		if slices.Contains(queued, w.Destination) {
			p.deliveryQueued(w, parts)
		}
	}
	if len(queued) > 0 {
		p.wakeDelivery()
	}
	return len(queued), nil
}

// deliveriesOwed returns the deliveries package pkg, made of parts, owes
// as their source posted them: one per destination its routes give it
// (every configured destination without routes), due at once unless a
// route's window holds it.
func (p *Pipeline) deliveriesOwed(pkg int64, parts []tg.Message) []store.Waiting {
	in := routeInput(parts)
	keys := make([]tg.MessageKey, len(parts))
	for i, m := range parts {
		keys[i] = m.Key()
	}
	now := p.cfg.Now()
	var out []store.Waiting
	for _, dest := range p.destinations(in) {
		w := store.Waiting{PackageID: pkg, Destination: dest, Account: p.cfg.Account,
			Parts: keys, Topic: in.Topic, PartCount: len(parts)}
		if p.cfg.Routes.HasWindows() {
			if open, opensAt, rt := p.cfg.Routes.Gate(in, dest, now); !open {
				w.Route, w.OpensAt = rt, opensAt
			}
		}
		out = append(out, w)
	}
	return out
}

// deliveryQueued keeps the parts of delivery w, just queued, for the
// delivery stage, and counts it when a window holds it.
func (p *Pipeline) deliveryQueued(w store.Waiting, parts []tg.Message) {
	p.keepParts(w.PackageID, parts)
	if !w.OpensAt.IsZero() {
		p.m.delivered(w.Destination, DeliveryWaiting, 1)
		p.log.Debug("delivery waits for its window", "package", w.PackageID, "destination", w.Destination, "route", w.Route, "opens", w.OpensAt)
	}
}

// maxKeptParts bounds the messages kept in memory for the delivery stage:
// past it, the stage loads the parts by id (getMessage), as after a
// restart.
const maxKeptParts = 4096

// keptKey names a part kept for the delivery stage: the package as well
// as the message, for an edit may put another document (another package)
// in the same message while the first package's delivery waits.
type keptKey struct {
	pkg int64
	msg tg.MessageKey
}

// keptPart is a part's message kept for the delivery stage, with the
// number of queued deliveries that will send it.
type keptPart struct {
	msg  tg.Message
	refs int
}

// keepParts remembers the messages of the parts of one queued delivery of
// package pkg, so that the delivery stage of this session need not load
// them again (file and remote ids are per session).
func (p *Pipeline) keepParts(pkg int64, parts []tg.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range parts {
		key := keptKey{pkg, m.Key()}
		k, ok := p.queuedParts[key]
		if !ok && len(p.queuedParts) >= maxKeptParts {
			return
		}
		k.msg = m
		k.refs++
		p.queuedParts[key] = k
	}
}

// queuedPart returns a part of package pkg kept by keepParts.
func (p *Pipeline) queuedPart(pkg int64, key tg.MessageKey) (tg.Message, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.queuedParts[keptKey{pkg, key}]
	return k.msg, ok
}

// dropParts forgets the parts of one delivery of package pkg that has left
// the queue.
func (p *Pipeline) dropParts(pkg int64, keys []tg.MessageKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, key := range keys {
		kk := keptKey{pkg, key}
		k, ok := p.queuedParts[kk]
		if !ok {
			continue
		}
		if k.refs--; k.refs <= 0 {
			delete(p.queuedParts, kk)
		} else {
			p.queuedParts[kk] = k
		}
	}
}

// wakeDelivery tells the delivery stage that a delivery is due.
func (p *Pipeline) wakeDelivery() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// WakeDelivery tells the delivery stage to look at its queue now (a
// destination it held is free again).
func (p *Pipeline) WakeDelivery() { p.wakeDelivery() }
