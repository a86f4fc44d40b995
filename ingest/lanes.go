package ingest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"stashd/store"
	"stashd/tg"
)

// The delivery stage sends to several destinations at once, in lanes: a
// lane takes one destination's due deliveries, in queue order, and sends
// them one at a time, taking each one's lock ahead in the round trip that
// ends the one before (Deliverer.one). Lanes exist because a send can take
// up to a minute to land without failing: TDLib sits out a chat's flood
// wait of up to a minute itself (NetQueryDelayer's total_timeout_limit_),
// and the client sees only a slow send. One destination's slow send then
// holds only its own lane; the account's send budget still paces every
// lane's sends together, and the account's flood-wait pause gates each
// request whichever lane makes it.
//
// A run reads Batch due deliveries at a time, leaving out the
// destinations a lane holds (or is queued for) and those found held in
// the run, and gives each destination of the batch a lane, at most
// Lanes at once. It reads again when a lane frees while the last read
// was a full batch and something has moved since, when ingest woke the
// stage meanwhile (a wake during a lane's run reads again once it ends,
// for deliveries queued to its destination), and stops when no lane runs
// and nothing is left to read.

// DefaultLanes is DeliveryConfig.Lanes's default: one more than the send
// budget's default sends in flight, so that while every in-flight send is
// sat out a lane is ready to take the first turn that frees.
const DefaultLanes = 4

// wakeRead is how long after a wake, while lanes run, the stage reads
// its queue unless a lane ends first.
const wakeRead = time.Second

// lane is one destination's deliveries in a run, and what became of them.
type lane struct {
	dest tg.ChatID
	due  []store.Waiting
	// wakes is the run's count of wakes when the lane started.
	wakes int
	// ahead is the lock of the lane's next delivery, with its looks and
	// the intents of its first send, taken in the round trip that ended
	// the last one; nil when none was. Only the lane's goroutine touches
	// it.
	ahead *deliveryLook
	// cut says the destination may have due deliveries the lane was not
	// given: the read that gave it its own was a full batch, or a read
	// left the destination out while the lane held it.
	cut bool
	// res counts what the lane did; held says its destination was found
	// held, moved that a delivery left the queue or was put off.
	res   DeliveryResult
	held  bool
	moved bool
	// err ended the lane, and ends the run.
	err error
}

// RunOnce sends the queued deliveries that are due, each destination's
// oldest first, several destinations at once (lanes, above), checking
// each delivery's window before it (a window may close mid-backlog),
// until none is left that it can send. It then updates the window
// metrics and records windows that closed with a backlog: at the send
// budget a backlog takes hours. A lane that fails ends the run: the
// others stop after the delivery they are sending.
func (ws *Deliverer) RunOnce(ctx context.Context) (DeliveryResult, error) {
	var res DeliveryResult
	routes := ws.p.cfg.Routes.Routes()
	var (
		// held are the destinations found held in this run: their other
		// deliveries wait without taking their locks, and the next reads
		// leave them out (a full batch of them would hide the deliveries
		// behind it). busy are the lanes running or queued, by
		// destination.
		held     = map[tg.ChatID]bool{}
		busy     = map[tg.ChatID]*lane{}
		queued   []*lane
		ended    = make(chan *lane)
		stopping atomic.Bool
		failure  error
		running  int
		wakes    int
		// read: the queue must be read (at the start, after a wake);
		// full: the last read was a full batch; moved: a lane changed the
		// queue since.
		read, full, moved = true, false, false
		readBefore        bool
		// woke fires wakeRead after a wake that no read has covered.
		woke <-chan time.Time
	)
	// A wake that came before the run is covered by its first read.
	select {
	case <-ws.p.wake:
	default:
	}
	for {
		for failure == nil && running < ws.cfg.Lanes && len(queued) > 0 {
			ln := queued[0]
			queued = queued[1:]
			ln.wakes = wakes
			running++
			go func() {
				ws.runLane(ctx, ln, &stopping)
				ended <- ln
			}()
		}
		if failure == nil && running < ws.cfg.Lanes && len(queued) == 0 && (read || full && moved) {
			if readBefore && running == 0 {
				// Counted while no lane sends, the queue is as the
				// batch left it.
				partial, _, err := ws.report(ctx, routes)
				res.Partial += partial
				if err != nil {
					failure = err
					stopping.Store(true)
					continue
				}
			}
			ws.observe(routes) // windows that opened since the last look
			except := append(slices.Collect(maps.Keys(held)), slices.Collect(maps.Keys(busy))...)
			for _, ln := range busy {
				ln.cut = true // its destination's later deliveries are not read
			}
			due, err := ws.store.DueWaiting(ctx, ws.p.cfg.Account, ws.p.cfg.Now(), ws.cfg.Batch, except...)
			readBefore = true
			if err != nil {
				failure = err
				stopping.Store(true)
				continue
			}
			read, moved, full = false, false, len(due) == ws.cfg.Batch
			woke = nil
			queued = byDestination(due)
			for _, ln := range queued {
				ln.cut = full
				busy[ln.dest] = ln
			}
			if len(queued) > 0 {
				continue
			}
		}
		if running == 0 {
			break
		}
		select {
		case ln := <-ended:
			running--
			delete(busy, ln.dest)
			res.Delivered += ln.res.Delivered
			res.Failed += ln.res.Failed
			res.Deferred += ln.res.Deferred
			res.Held += ln.res.Held
			if ln.held {
				held[ln.dest] = true
			}
			moved = moved || ln.moved || ln.held
			if ln.wakes < wakes || ln.cut && ln.moved {
				// Deliveries may have been queued to its destination,
				// or it has more than the lane was given.
				read = true
			}
			if ln.err != nil && failure == nil {
				failure = ln.err
				stopping.Store(true)
			}
		case <-ws.p.wake:
			// Read when a lane ends, or a moment later: a wake is
			// most often for a destination a lane holds, and a read
			// now would find nothing for it.
			wakes++
			if woke == nil {
				woke = time.After(wakeRead)
			}
		case <-woke:
			woke = nil
			read = true
		}
	}
	if failure != nil {
		return res, failure
	}
	partial, waiting, err := ws.report(ctx, routes)
	res.Partial += partial
	res.Waiting = waiting
	return res, err
}

// byDestination cuts due into lanes, a destination each, in the order
// their first deliveries come, each keeping its deliveries' order.
func byDestination(due []store.Waiting) []*lane {
	var lanes []*lane
	of := map[tg.ChatID]*lane{}
	for _, w := range due {
		ln := of[w.Destination]
		if ln == nil {
			ln = &lane{dest: w.Destination}
			of[w.Destination] = ln
			lanes = append(lanes, ln)
		}
		ln.due = append(ln.due, w)
	}
	return lanes
}

// runLane sends ln's deliveries in order until they are done, its
// destination is found held (the rest stay queued, counted held), it
// fails (ln.err), or stopping is set.
func (ws *Deliverer) runLane(ctx context.Context, ln *lane, stopping *atomic.Bool) {
	defer ln.claimAhead("") // a lock taken ahead for a delivery not run
	for i, w := range ln.due {
		if ln.held {
			ln.res.Held++
			continue
		}
		if stopping.Load() {
			return
		}
		var next *store.Waiting
		if i+1 < len(ln.due) {
			next = &ln.due[i+1]
		}
		ok, err := ws.one(ctx, ln, w, next)
		switch {
		case errors.Is(err, errHeld):
			ln.held = true
			ln.res.Held++
		case errors.Is(err, tg.ErrNoWriteAccess):
			// Its other deliveries are put off with it, without a try
			// each.
			ln.held = true
			ln.res.Held++
			if err := ws.holdUnwritable(ctx, w, err); err != nil {
				ln.err = err
				return
			}
			ln.moved = true
		case err == nil:
			// Left the queue, or (not ok) found its route's window
			// closed and put off to its next opening: either way no
			// longer due, so what is behind it may be read.
			ln.moved = true
			if ok {
				ln.res.Delivered++
				ws.mu.Lock()
				ws.sent[w.Route]++
				delete(ws.unwritable, w.Destination)
				ws.mu.Unlock()
			}
		case ctx.Err() != nil || errors.Is(err, tg.ErrLeaseLost) || errors.Is(err, store.ErrStaleEpoch):
			// The account is stopping or no longer ours: the row stays
			// for whoever runs it next.
			ln.err = err
			return
		case givesUp(ctx, err):
			// The package cannot be sent from its source any more (the
			// message is gone, the source lost): the delivery left the
			// queue (one did it, under its lock), and the rest goes on.
			ws.p.log.Warn("queued delivery cannot be sent; giving it up", "package", w.PackageID,
				"destination", w.Destination, "route", w.Route, "err", err)
			ln.res.Failed++
			ws.p.dropParts(w.PackageID, w.Parts)
			ln.moved = true
		default:
			n, perr := ws.putOffPaused(ctx, w, err)
			if perr == nil && n == 0 {
				perr = ws.deferDelivery(ctx, w, err)
				n = 1
			} else if n > 0 {
				// The rest of the destination's queue waits with it.
				ln.held = true
			}
			if perr != nil {
				ln.err = perr
				return
			}
			ln.res.Deferred += n
			ln.moved = true
		}
	}
}
