package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"stashd/internal/service"
	"stashd/store"
	"stashd/tg"
)

// SweepResult says what one sweep did.
type SweepResult struct {
	// Completed counts sets catalogued (or refused) as one package.
	Completed  int
	DeadLetter int
	// Waiting counts sets still short of a part, and sets left waiting
	// for their parts once a whole archive among them was catalogued on
	// its own.
	Waiting int
	// Failed counts complete sets whose completion failed with a
	// retryable error; they are tried again at the next sweep until
	// SetMaxWait.
	Failed int
}

// sweepTally is a SweepResult filled by the sweep and by the completions
// it started, with the errors that kept it from looking at a set, or from
// dead-lettering one. With report set, those are reported as they come
// rather than kept: a completion may end long after its sweep.
type sweepTally struct {
	report func(error)
	mu     sync.Mutex
	res    SweepResult
	errs   []error
}

// count applies f to the result.
func (t *sweepTally) count(f func(*SweepResult)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.res)
}

// fail reports err, or keeps it for result.
func (t *sweepTally) fail(err error) {
	if t.report != nil {
		t.report(err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, err)
}

func (t *sweepTally) result() (SweepResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.res, errors.Join(t.errs...)
}

// setRunner completes sets, up to its capacity at once, each set once at
// a time: a set whose completion is under way is skipped by the sweeps
// that see it meanwhile. With wait, a set waits for a free slot; without,
// it is left for a later sweep, which reads it afresh.
type setRunner struct {
	slots chan struct{}
	wait  bool
	mu    sync.Mutex
	busy  map[setID]bool
	wg    sync.WaitGroup
}

func newSetRunner(parallel int, wait bool) *setRunner {
	return &setRunner{slots: make(chan struct{}, max(parallel, 1)), wait: wait, busy: map[setID]bool{}}
}

func (r *setRunner) running(id setID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.busy[id]
}

// start runs fn for set id in a goroutine once a slot is free (wait), or
// if one is free now; it reports whether it did.
func (r *setRunner) start(ctx context.Context, id setID, fn func()) bool {
	if r.wait {
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	} else {
		select {
		case r.slots <- struct{}{}:
		default:
			return false
		}
	}
	r.mu.Lock()
	r.busy[id] = true
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.busy, id)
			r.mu.Unlock()
			<-r.slots
		}()
		fn()
	}()
	return true
}

// sweepParallel is how many sets Sweep completes at once.
const sweepParallel = 4

// Sweep looks at every pending set of the account once: complete and
// settled sets are ingested as one package, sets waiting longer than
// SetMaxWait become dead letters, and so do sets whose completion failed
// for good (a part deleted) or until SetMaxWait. Complete sets are
// downloaded and catalogued several at once, and Sweep returns when each
// has ended. The error reports only what kept the sweep from looking at a
// set (the store); a set's own failure is logged once, when it first
// happens.
func (p *Pipeline) Sweep(ctx context.Context) (SweepResult, error) {
	var t sweepTally
	r := newSetRunner(sweepParallel, true)
	p.sweep(ctx, r, &t)
	r.wg.Wait()
	if err := ctx.Err(); err != nil {
		return t.res, err
	}
	return t.result()
}

// sweep is Sweep with completions started on r, which it does not wait
// for; they add to t when they end.
func (p *Pipeline) sweep(ctx context.Context, r *setRunner, t *sweepTally) {
	sets, err := p.store.PendingSets(ctx, p.cfg.Account)
	if err != nil {
		t.fail(err)
		return
	}
	now := p.cfg.Now()
	for _, set := range sets {
		id := setID{set.Chat, set.TopicID, set.SetKey}
		if r.running(id) {
			t.count(func(r *SweepResult) { r.Waiting++ })
			continue
		}
		parts, err := p.store.SetParts(ctx, set.Chat, set.TopicID, set.SetKey)
		if err != nil {
			t.fail(err)
			continue
		}
		if len(parts) == 0 {
			continue
		}
		// The set swept is one of those pending under the key, judged by
		// its own parts' times.
		parts = sweptGroup(set.SetKey, parts)
		set.Oldest, set.Newest = recordedSpan(parts, set.Oldest, set.Newest)
		ordered, dups, contested, missing := orderSet(set.SetKey, parts)
		last := parts[len(parts)-1].Key.Message.ServerID()
		settled := now.Sub(set.Newest) >= p.cfg.SetSettle &&
			(p.cfg.SourceSynced == nil || p.cfg.SourceSynced(set.Chat, last))
		expired := now.Sub(set.Oldest) >= p.cfg.SetMaxWait
		// A message just before, between or just after the parts still on
		// its way through the queue may be one more part (an album's last
		// documents, a set's missing volume, behind slow packages): quiet
		// and synced up to the last part is no proof of the end while it
		// is. Only ids within setLookahead of the parts count, and
		// in-flight work always ends (handled, or released and the source
		// dirty), so a busy source cannot hold a set back for ever.
		first := parts[0].Key.Message.ServerID()
		inFlight := p.cfg.InFlight != nil && p.cfg.InFlight(set.Chat, max(first-setLookahead, 1), last+setLookahead)
		if !inFlight && missing == "" && (settled || expired) {
			// A set's parts are posted together, an album's documents with
			// consecutive ids: a hole, or a neighbour, may be a part lost by
			// the live stream and not caught up yet, or a message deleted
			// or not of the set. Only Telegram knows.
			gap, err := p.setGap(ctx, set.SetKey, parts, settled)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, tg.ErrLeaseLost) {
					return // the account is stopping
				}
				t.fail(err)
				continue
			}
			inFlight = gap
		}
		switch {
		case inFlight:
			t.count(func(r *SweepResult) { r.Waiting++ })
		// A set complete by name whose source never settles (a source
		// that keeps failing) is taken as it is once SetMaxWait has passed.
		case missing == "" && (settled || expired):
			// Its download may take long: other sets are not held up.
			if !r.start(ctx, id, func() { p.finishSet(ctx, set, parts, ordered, dups, contested, expired, t) }) {
				if ctx.Err() != nil {
					return
				}
				t.count(func(r *SweepResult) { r.Waiting++ }) // every slot is busy
			}
		case expired:
			if err := p.deadLetterSet(ctx, set, parts, &IncompleteSetError{Set: displaySet(set.SetKey), Missing: missing}); err != nil {
				t.fail(err)
				continue
			}
			t.count(func(r *SweepResult) { r.DeadLetter++ })
		default:
			t.count(func(r *SweepResult) { r.Waiting++ })
		}
	}
}

// recordedSpan is when the first and the last of parts were recorded;
// oldest and newest when their times are not known.
func recordedSpan(parts []store.SourceMessage, oldest, newest time.Time) (time.Time, time.Time) {
	var first, last time.Time
	for _, pt := range parts {
		if pt.HandledAt.IsZero() {
			return oldest, newest
		}
		if first.IsZero() || pt.HandledAt.Before(first) {
			first = pt.HandledAt
		}
		if pt.HandledAt.After(last) {
			last = pt.HandledAt
		}
	}
	if first.IsZero() {
		return oldest, newest
	}
	return first, last
}

// finishSet ingests a complete set (its parts in set order, dups the
// copies of some of them, contested the parts whose place only their
// content tells) as one package, adding what happened to t.
func (p *Pipeline) finishSet(ctx context.Context, set store.PendingSet, parts, ordered, dups, contested []store.SourceMessage, expired bool, t *sweepTally) {
	defer func() {
		// A panic in one set's completion (a bug the bytes hit) is that
		// set's failure, as a worker's is its message's: the set becomes
		// a dead letter, retried later, and the daemon goes on.
		r := recover()
		if r == nil {
			return
		}
		p.log.Error("set completion panicked", "source", set.Chat, "set", displaySet(set.SetKey), "panic", r, "stack", string(debug.Stack()))
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := p.deadLetterSet(dctx, set, parts, fmt.Errorf("set completion panic: %v", r)); err != nil {
			t.fail(err)
			return
		}
		t.count(func(r *SweepResult) { r.DeadLetter++ })
	}()
	var rejected []rejectedPart
	var cerr error
	if len(contested) > 0 {
		var chosen, same []store.SourceMessage
		if chosen, same, rejected, cerr = p.assembleByContent(ctx, ordered, contested); cerr == nil {
			ordered, dups = chosen, append(dups, same...)
		}
	}
	if cerr == nil {
		cerr = p.completeSet(ctx, set, ordered)
	}
	if errors.Is(cerr, errPlainTakenAlone) {
		// A package was made, of one part: the set was not completed,
		// and its other parts, their copies and the copies rejected wait
		// for the next sweep, without it.
		p.setFailed(set, nil)
		t.count(func(r *SweepResult) { r.Waiting++ })
		return
	}
	if cerr == nil {
		cerr = p.settleDuplicateParts(ctx, ordered, dups)
	}
	if cerr == nil {
		cerr = p.settleRejectedParts(ctx, set.SetKey, ordered, rejected)
	}
	if cerr == nil {
		p.setFailed(set, nil)
		t.count(func(r *SweepResult) { r.Completed++ })
		p.log.Debug("set completed", "source", set.Chat, "set", displaySet(set.SetKey), "parts", len(ordered))
		return
	}
	if ctx.Err() != nil || errors.Is(cerr, tg.ErrLeaseLost) {
		// The account is stopping (its lease lost, the gate refusing its
		// requests before its work is cancelled): the set stays pending
		// for the instance that runs the account next.
		return
	}
	var incomplete *IncompleteSetError
	retryable := tg.Classify(cerr) != tg.ClassPermanent && !errors.As(cerr, &incomplete)
	// SetMaxWait bounds the wait for a set's parts. A set whose package is
	// catalogued waits for no part: its delivery failed (a send that
	// vanished, a flood wait) and is retried at each sweep like any
	// delivery, never turned into a dead letter that would leave the
	// package undelivered.
	if retryable && (!expired || p.setCatalogued(ctx, ordered)) {
		p.setFailed(set, cerr)
		t.count(func(r *SweepResult) { r.Failed++ })
		return
	}
	if err := p.deadLetterSet(ctx, set, parts, cerr); err != nil {
		t.fail(err)
		return
	}
	t.count(func(r *SweepResult) { r.DeadLetter++ })
}

// SetSweeper sweeps one account's pending sets periodically. A sweep does
// not wait for the sets it starts to complete, nor for a free slot: a set
// whose download takes an hour holds up neither the sets that become
// complete meanwhile nor the dead letters of those that expire.
type SetSweeper struct {
	p        *Pipeline
	interval time.Duration
	sets     *setRunner
	run      service.Runner
}

// NewSetSweeper sweeps every interval (zero: half of SetSettle, at least
// 100 ms) and completes up to parallel sets at once (zero: 4).
func NewSetSweeper(p *Pipeline, interval time.Duration, parallel int) *SetSweeper {
	interval = cmp.Or(interval, max(p.cfg.SetSettle/2, 100*time.Millisecond))
	return &SetSweeper{p: p, interval: interval, sets: newSetRunner(cmp.Or(parallel, sweepParallel), false)}
}

// Start starts the sweeper's goroutine.
func (s *SetSweeper) Start(ctx context.Context) error {
	return s.run.StartFunc(ctx, func(ctx context.Context) {
		defer s.sets.wg.Wait()
		service.Every(ctx, s.interval, nil, func(ctx context.Context) {
			t := &sweepTally{report: func(err error) {
				if ctx.Err() == nil {
					s.p.log.Warn("set sweep", "err", err)
				}
			}}
			s.p.sweep(ctx, s.sets, t)
		})
	})
}

// Stop stops the sweeper and waits for it and the completions it started.
func (s *SetSweeper) Stop() { s.run.Stop() }
