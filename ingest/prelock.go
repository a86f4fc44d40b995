package ingest

import (
	"context"

	"stashd/store"
	"stashd/tg"
)

// Prelock takes layer 3's lock, with the looks that ride with it, for
// each of msgs that Handle would lock first (a lone archive to mirror),
// all in one round trip: catch-up locks a page's messages a few at a time
// ahead of the workers that handle them, instead of one round trip each.
// Handle then claims the lock of its message. A lock another holder has
// is left to Handle, which waits for it as usual; a failed attempt takes
// nothing, and Handle locks on its own. release lets go the locks no
// Handle claimed.
func (p *Pipeline) Prelock(ctx context.Context, msgs []tg.Message) (release func()) {
	var keys []tg.MessageKey
	var reqs []store.LockRequest
	var locks []*uniqueLock
	// A plain x.zip or x.rar whose x.z01… or x.r00… come with it joins its
	// set without a download, as it would once they were recorded.
	classes := make([]classification, len(msgs))
	volumes := map[setID]bool{}
	for i, m := range msgs {
		c := classify(m)
		classes[i] = c
		if c.setKey != "" && holdsPlain(c.name) && m.AlbumID == 0 {
			volumes[setID{m.ChatID, m.TopicID(), c.setKey}] = true
		}
	}
	p.preMu.Lock()
	for i, m := range msgs {
		c := classes[i]
		if m.Document == nil || !p.lockFirst(m, c) || p.prelocked[m.Key()] != nil {
			continue
		}
		uid := m.Document.File.UniqueID
		u := &uniqueLock{uid: uid}
		u.waits.sibling = c.maybeVolume(m) && volumes[setID{m.ChatID, m.TopicID(), c.setKey}]
		keys, locks = append(keys, m.Key()), append(locks, u)
		reqs = append(reqs, store.LockRequest{Name: uniqueLockName([]string{uid}), Reads: u.loneReads(m, c)})
	}
	p.preMu.Unlock()
	if len(reqs) == 0 {
		return func() {}
	}
	taken, err := p.store.TryLocksThen(ctx, reqs)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("lock messages ahead; each is locked when handled", "messages", len(reqs), "err", err)
		}
		return func() {}
	}
	var mine []tg.MessageKey
	p.preMu.Lock()
	if p.prelocked == nil {
		p.prelocked = make(map[tg.MessageKey]*uniqueLock)
	}
	for i, l := range taken {
		if l == nil {
			continue
		}
		locks[i].lock = l
		p.prelocked[keys[i]] = locks[i]
		mine = append(mine, keys[i])
	}
	p.preMu.Unlock()
	return func() {
		for _, k := range mine {
			if u := p.claimPrelocked(k, ""); u != nil {
				u.lock.Unlock()
			}
		}
	}
}

// claimPrelocked takes the lock Prelock took for the message of key, when
// it is for the document of unique id uid (any document when uid is ""):
// the caller then owns it. A lock for another document (the message was
// edited since) is let go.
func (p *Pipeline) claimPrelocked(key tg.MessageKey, uid string) *uniqueLock {
	p.preMu.Lock()
	u := p.prelocked[key]
	delete(p.prelocked, key)
	p.preMu.Unlock()
	if u != nil && uid != "" && u.uid != uid {
		u.lock.Unlock()
		return nil
	}
	return u
}
