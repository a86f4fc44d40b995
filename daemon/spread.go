package daemon

import (
	"context"
	"sync"
	"time"

	"stashd/ingest"
	"stashd/tg"
)

// spreader chooses which running account sends a package to a
// destination, so that one route's sends spread over the accounts' send
// budgets (each account keeps its own; none is shared). It counts, per
// account, the send requests it has given out and not yet seen sent: the budgets
// only know the sends already waiting for their turn, and several workers
// pick at once.
type spreader struct {
	d *Daemon

	mu      sync.Mutex
	pending map[string]int

	// sees caches whether an account knows a chat (getChat, a local call),
	// once per account and chat.
	seesMu sync.Mutex
	sees   map[seeKey]bool
	// unread records when an account was found unable to read a chat
	// (forget); it is not chosen for that chat's packages for
	// noReadRecheck after that.
	unread map[seeKey]time.Time
}

type seeKey struct {
	account string
	chat    tg.ChatID
}

func newSpreader(d *Daemon) *spreader {
	return &spreader{d: d, pending: map[string]int{}, sees: map[seeKey]bool{}, unread: map[seeKey]time.Time{}}
}

// sameStart is how close two accounts' next starts must be to count as
// equal: accounts that may both send at once read the clock a moment
// apart.
const sameStart = time.Millisecond

// pickTimeout bounds the getChat calls of one pick (Daemon.pickTimeout).
const pickTimeout = 10 * time.Second

// pick returns the pipeline of the account that makes sends send requests
// (an album is one) for a package posted in source to dest, and the done func that returns them.
// Candidates are the running accounts with a send budget that were not
// refused write access to dest in this run and know both chats; among
// them the one whose next send would start first counting what it was
// given already (its budget's next start plus pending sends times its
// spacing, or the end of a flood wait on dest, whichever is later),
// then the one with fewest sends in flight, then the first in
// configuration order. from is the ingesting account, which sends itself
// when no other qualifies.
func (s *spreader) pick(from string, source, dest tg.ChatID, sends int) (*ingest.Pipeline, func()) {
	s.d.mu.Lock()
	runs := s.d.accounts
	s.d.mu.Unlock()
	s.d.writeMu.Lock()
	refused := map[string]bool{}
	for name := range s.d.noWrite {
		refused[name] = s.d.refusedWrite(name, dest)
	}
	s.d.writeMu.Unlock()

	// Whether an account knows the chats may take a getChat: asked before
	// the lock, which other picks and every done wait for.
	var candidates []*accountRun
	for _, r := range runs {
		if r.sess.Budget == nil || refused[r.name] || r.pipe == nil {
			continue
		}
		if r.name != from && (!s.knows(r, source) || !s.knows(r, dest)) {
			continue
		}
		candidates = append(candidates, r)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var best *accountRun
	var bestFree time.Time
	var bestFlight int
	for _, r := range candidates {
		b := r.sess.Budget
		free, flight := b.Room()
		free = free.Add(time.Duration(s.pending[r.name]) * b.Interval())
		if wait := max(r.sess.ChatPause(dest), r.sess.SendPause()); wait > 0 {
			// Telegram told this account to wait before sending to dest
			// (a 429 there, or one that paused all its sends): it cannot
			// send sooner, whatever its budget; another account's limit
			// is its own.
			if until := b.Config().Clock.Now().Add(wait); until.After(free) {
				free = until
			}
		}
		switch {
		case best == nil, free.Before(bestFree.Add(-sameStart)):
		case free.Before(bestFree.Add(sameStart)) && flight < bestFlight:
		default:
			continue
		}
		best, bestFree, bestFlight = r, free, flight
	}
	if best == nil {
		return nil, func() {}
	}
	name := best.name
	s.pending[name] += sends
	var once sync.Once
	return best.pipe, func() {
		once.Do(func() {
			s.mu.Lock()
			s.pending[name] -= sends
			s.mu.Unlock()
		})
	}
}

// pause is how long before an account that pick could choose may send to
// dest: the shortest flood wait on dest (or on all its sends) among the running accounts with a
// send budget not refused write access there and not found to be no
// member of it (from's own included, which sends when no other
// qualifies). It asks no server: an account pick has not asked about dest
// yet counts.
func (s *spreader) pause(from string, dest tg.ChatID) time.Duration {
	s.d.mu.Lock()
	runs := s.d.accounts
	s.d.mu.Unlock()
	s.d.writeMu.Lock()
	defer s.d.writeMu.Unlock()
	wait := time.Duration(-1)
	for _, r := range runs {
		if r.sess.Budget == nil || r.pipe == nil || r.name != from && (s.d.refusedWrite(r.name, dest) || s.stranger(r, dest)) {
			continue
		}
		if w := max(r.sess.ChatPause(dest), r.sess.SendPause()); wait < 0 || w < wait {
			wait = w
		}
	}
	return max(wait, 0)
}

// knows reports whether account r knows chat, and was not found unable
// to read it within noReadRecheck.
func (s *spreader) knows(r *accountRun, chat tg.ChatID) bool {
	if s.unreadable(r.name, chat) {
		return false
	}
	if ok, cached := s.seen(r, chat); cached {
		return ok
	}
	// The question does not sit out a flood wait of r's: a paused account
	// cannot send now anyway, and the pick it holds up is another's.
	ctx, cancel := context.WithTimeout(tg.WithoutFloodWaits(r.ctx), s.d.pickTimeout)
	defer cancel()
	_, err := r.paced.GetChat(ctx, chat)
	if err != nil && tg.Classify(err) != tg.ClassPermanent {
		return false // not cached: ask again next time
	}
	s.seesMu.Lock()
	s.sees[seeKey{r.name, chat}] = err == nil
	s.seesMu.Unlock()
	return err == nil
}

// seen is what knows found of r and chat before, if it asked.
func (s *spreader) seen(r *accountRun, chat tg.ChatID) (ok, cached bool) {
	s.seesMu.Lock()
	defer s.seesMu.Unlock()
	ok, cached = s.sees[seeKey{r.name, chat}]
	return ok, cached
}

// forget records that account from cannot read chat (it was removed from
// it): for noReadRecheck, knows reports false for it, so that neither
// pick nor handOver choose it for a package posted there. stashd does not
// follow the accounts' memberships through TDLib's updates, and getChat
// answers locally for a chat the account lost: after that the account is
// tried again, at the cost of one failed read if it still cannot read the
// chat, which forgets it once more.
func (s *spreader) forget(from string, chat tg.ChatID) {
	s.seesMu.Lock()
	s.unread[seeKey{from, chat}] = time.Now()
	s.seesMu.Unlock()
}

// unreadable reports whether account was found unable to read chat within
// noReadRecheck; an older finding is dropped.
func (s *spreader) unreadable(account string, chat tg.ChatID) bool {
	s.seesMu.Lock()
	defer s.seesMu.Unlock()
	k := seeKey{account, chat}
	at, ok := s.unread[k]
	if ok && time.Since(at) >= s.d.noReadRecheck {
		delete(s.unread, k)
		ok = false
	}
	return ok
}

// noReadRecheck is how long an account found unable to read a source is
// passed over for that source's packages (Daemon.noReadRecheck; shorter
// in tests).
const noReadRecheck = 10 * time.Minute

// stranger reports whether knows found that r does not know chat.
func (s *spreader) stranger(r *accountRun, chat tg.ChatID) bool {
	ok, cached := s.seen(r, chat)
	return cached && !ok
}

// noWriteRecheck is how long an account refused write access to a
// destination is passed over for it. stashd does not follow the accounts'
// rights through TDLib's updates: after this the account is tried again
// (TDLib refuses locally, from the rights it knows, while they are still
// missing).
const noWriteRecheck = 10 * time.Minute

// refusedWrite reports whether account was refused write access to dest
// within noWriteRecheck. The caller holds writeMu.
func (d *Daemon) refusedWrite(account string, dest tg.ChatID) bool {
	at, ok := d.noWrite[account][dest]
	return ok && time.Since(at) < noWriteRecheck
}

// wrote forgets a refusal of write access to dest recorded for account:
// its send there just landed.
func (d *Daemon) wrote(account string, dest tg.ChatID) {
	d.writeMu.Lock()
	delete(d.noWrite[account], dest)
	d.writeMu.Unlock()
}

// handOver picks another running account, in configuration order, to
// deliver a package posted in source to dest in place of account from:
// one with a delivery stage that knows both chats (knows: a getChat each,
// asked once and cached). An account that does not know the source could
// not load the parts, one that does not know the destination could not
// send them: the delivery would fail there for good.
//
// refused: from may not write to dest, which is recorded; the account
// picked is one not refused write access there lately. With none, it
// reports false and the delivery waits for write access with from.
//
// Otherwise from cannot read source (removed from it): from is taken as
// not knowing it from now on, and an account not refused write access to
// dest is picked first, else one that was (it holds the delivery as it
// holds its own until its rights come back). With none, it reports false.
func (d *Daemon) handOver(from string, source, dest tg.ChatID, refused bool) (string, bool) {
	if !refused {
		d.spread.forget(from, source)
	}
	d.writeMu.Lock()
	if refused {
		if d.noWrite == nil {
			d.noWrite = map[string]map[tg.ChatID]time.Time{}
		}
		if d.noWrite[from] == nil {
			d.noWrite[from] = map[tg.ChatID]time.Time{}
		}
		d.noWrite[from][dest] = time.Now()
	}
	d.mu.Lock()
	runs := d.accounts
	d.mu.Unlock()
	var writers, others []*accountRun
	for _, r := range runs {
		switch {
		case r.name == from || r.pipe == nil:
		case !d.refusedWrite(r.name, dest):
			writers = append(writers, r)
		case !refused:
			others = append(others, r)
		}
	}
	d.writeMu.Unlock()
	// Whether an account knows the chats may take a getChat: asked
	// without writeMu, which every pick waits for.
	for _, r := range append(writers, others...) {
		if d.spread.knows(r, source) && d.spread.knows(r, dest) {
			return r.name, true
		}
	}
	return "", false
}
