package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// destThread returns the forum topic (thread id) of dest that the package
// in goes to: the fixed topic of the first route sending it there, or,
// for topic "same", the topic of dest named like the package's source
// topic, created the first time; 0 for none (in a forum, its General
// topic, where a package from outside any topic goes too).
func (p *Pipeline) destThread(ctx context.Context, in route.Package, dest tg.ChatID) (int64, error) {
	t := p.cfg.Routes.Topic(in, dest)
	switch {
	case t.Thread != 0:
		return t.Thread, nil
	case !t.Same || in.Topic == 0:
		return 0, nil
	}
	name, err := p.sourceTopicName(ctx, in.Chat, in.Topic)
	if err != nil {
		return 0, err
	}
	return p.sameTopic(ctx, dest, name)
}

// sourceTopicName returns the name of a source forum topic: from the
// store, or asked once (getForumTopic) and stored.
func (p *Pipeline) sourceTopicName(ctx context.Context, chat tg.ChatID, thread int64) (string, error) {
	name, ok, err := p.store.TopicName(ctx, chat, thread)
	if err != nil || ok {
		return name, err
	}
	t, err := p.tg.GetForumTopic(ctx, chat, thread)
	if err != nil {
		return "", &sourceError{fmt.Errorf("get the name of topic %d of %d: %w", thread, chat, err)}
	}
	if err := p.store.UpsertTopic(ctx, t); err != nil {
		return "", err
	}
	return t.Name, nil
}

// sameTopic returns the thread of the topic named name in destination
// forum dest, creating it (createForumTopic) the first time. The store's
// row is the arbiter: creation runs under a lock per (dest, name) that
// spans workers, accounts and daemon instances, and only when no row is
// recorded after the lock is taken, so the topic is created once.
func (p *Pipeline) sameTopic(ctx context.Context, dest tg.ChatID, name string) (int64, error) {
	k := destTopicKey{dest, name}
	p.mu.Lock()
	thread, ok := p.destTopics[k]
	p.mu.Unlock()
	if ok {
		return thread, nil
	}
	thread, _, err := p.store.DestinationTopic(ctx, dest, name)
	if err != nil {
		return 0, err
	}
	if thread == 0 {
		if thread, err = p.createTopic(ctx, dest, name); err != nil {
			return 0, err
		}
	}
	p.mu.Lock()
	p.destTopics[k] = thread
	p.mu.Unlock()
	return thread, nil
}

// createTopic creates the topic named name in dest unless another creator
// recorded one while this one waited for the lock. The creation is
// recorded as begun first: a creator that died between createForumTopic
// and recording its topic leaves that mark, and the next one looks the
// topic up by name (getForumTopics) instead of creating a second; so does
// every creator in a destination that was reconciled (the catalogue
// rewound, forgetting the topics and marks made since its backup). Every
// account delivering into the topic waits for that lock: its holder does
// not sit out a flood wait under it, but fails with it (the delivery is
// put off by the wait), so that a 429 pauses only its own account.
func (p *Pipeline) createTopic(ctx context.Context, dest tg.ChatID, name string) (int64, error) {
	lock, err := p.store.Lock(ctx, store.DestinationTopicLock(dest, name))
	if err != nil {
		return 0, err
	}
	defer lock.Unlock()
	ctx = tg.WithoutFloodWaits(ctx)
	thread, begun, err := p.store.DestinationTopic(ctx, dest, name)
	if err != nil || thread != 0 {
		return thread, err
	}
	// A catalogue that rewound forgot the topics created since its backup,
	// and their marks: once dest was reconciled, a topic is looked up by
	// name before one is created.
	look := begun
	if !look {
		if look, err = p.store.ReconcileAsked(ctx, dest); err != nil {
			return 0, err
		}
	}
	if look {
		found, err := p.findTopic(ctx, dest, name)
		if err != nil {
			return 0, err
		}
		if found != 0 {
			p.log.Info("destination topic found by name (after an interrupted creation, or one the catalogue forgot)",
				"destination", dest, "topic", found, "name", name)
			return p.store.SetDestinationTopic(ctx, dest, name, found, p.cfg.Account)
		}
	}
	if !begun {
		if err := p.store.BeginDestinationTopic(ctx, dest, name, p.cfg.Account); err != nil {
			return 0, err
		}
	}
	thread, err = p.tg.CreateForumTopic(ctx, dest, name)
	if _, flood := tg.FloodWait(err); flood && !begun {
		// Refused unsent (the account paused) or by a 429: nothing was
		// created, and the next creator need not look for it.
		if ferr := p.store.ForgetDestinationTopic(context.WithoutCancel(ctx), dest, name, 0); ferr != nil {
			p.log.Warn("forget a topic creation that was not made", "destination", dest, "name", name, "err", ferr)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("create topic %q in destination %d: %w", name, dest, err)
	}
	// The topic exists now: record it even if the caller is stopping.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	got, err := p.store.SetDestinationTopic(wctx, dest, name, thread, p.cfg.Account)
	if err != nil {
		return 0, err
	}
	p.log.Info("destination topic created", "destination", dest, "topic", thread, "name", name)
	return got, nil
}

// findTopic returns the oldest topic of dest named name, 0 when there is
// none. Names are compared as TDLib stores them (tg.CleanTopicName: spaces
// folded, cut to 128 characters): the topic created under name carries
// the cleaned name. The search reads every page of the matching topics,
// which come the most recently active first: in a busy forum the topic
// looked for may lie pages back, behind others whose names share its words
// and behind a newer one of the same name (a member's), which the first
// page holding the name would give instead.
func (p *Pipeline) findTopic(ctx context.Context, dest tg.ChatID, name string) (int64, error) {
	clean := tg.CleanTopicName(name)
	topics, err := tg.ForumTopics(ctx, p.tg, dest, clean)
	if err != nil {
		return 0, fmt.Errorf("look for topic %q in destination %d: %w", name, dest, err)
	}
	var oldest int64
	for _, t := range topics {
		if tg.CleanTopicName(t.Name) == clean && (oldest == 0 || t.ThreadID < oldest) {
			oldest = t.ThreadID
		}
	}
	return oldest, nil
}

// sourceError is a failure to read the source on a delivery's way (the
// name of its topic): a refusal in it ("Can't access the chat",
// CHANNEL_PRIVATE) is the source's, not the destination's, and hands
// nothing over (destRefusal).
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// destRefusal reports whether err, met on the way of a delivery to a
// destination (its topic found, created or recovered, or a send), is the
// destination's refusal of this account (tg.NoWriteAccess: no member any
// more, no right to post; or TDLib's 400 "Not enough rights to create a
// topic" in a forum the account may not post in), not the source's.
func destRefusal(err error) bool {
	if errors.As(err, new(*sourceError)) {
		return false
	}
	var te *tg.Error
	return tg.NoWriteAccess(err) || errors.As(err, &te) && te.Code == 400 && te.Message == "Not enough rights to create a topic"
}

// sourceUnreadable reports whether err is the source's refusal on a
// delivery's way (sourceError): the account cannot read it any more.
func sourceUnreadable(err error) bool {
	return errors.As(err, new(*sourceError)) && cannotRead(err)
}

type destTopicKey struct {
	dest tg.ChatID
	name string
}
