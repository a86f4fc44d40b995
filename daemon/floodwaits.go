package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"stashd/internal/service"
	"stashd/store"
	"stashd/tg"
)

// floodWaitWriteTimeout bounds the write of one flood wait.
const floodWaitWriteTimeout = 10 * time.Second

// floodWaitCheck is how often a running account with a live flood wait
// looks whether the table still holds it.
const floodWaitCheck = 10 * time.Second

// floodWaitSlack is how much shorter than the account's file the table
// may say a wait runs before the table counts as having lost it: the two
// were read a moment apart.
const floodWaitSlack = time.Second

// pauseRecorder writes an account's flood waits as they start to the
// account's file (floodFile) and to the store (migration 033), so that
// the account's next run, in this instance or the one taking it over,
// honours a wait that outlives the process: restorePauses puts them back
// before its first request. A wait is the account's whoever holds its
// lease, so the write is not fenced.
type pauseRecorder struct {
	st      *store.Store
	file    *floodFile
	account string
	log     *slog.Logger
	// chats are the writes of chat pauses in flight (recordChat).
	chats sync.WaitGroup
	run   service.Runner
}

// Start runs the loop that records in the table again, every
// floodWaitCheck, the live waits of the account's file that the table
// lost while the account runs (a dump restored or a lagging failover
// under it, the database down at the 429), so that an instance taking
// the account over honours them. It asks the database only while a wait
// runs, and makes no request of Telegram's, so a wait of every request
// does not hold it up. Without a file it does not run.
func (p *pauseRecorder) Start(ctx context.Context) error {
	if p.file == nil {
		return nil
	}
	return p.run.StartFunc(ctx, func(ctx context.Context) {
		service.Ticks(ctx, floodWaitCheck, nil, func(ctx context.Context) {
			if len(p.file.waits()) == 0 {
				return
			}
			if _, err := recordedWaits(ctx, p.st, p.file, p.account, p.log); err != nil && ctx.Err() == nil {
				p.log.Warn("read the flood waits the database recorded", "err", err)
			}
		})
	})
}

// Stop stops the loop.
func (p *pauseRecorder) Stop() { p.run.Stop() }

// record writes one wait of scope holding the account for d from now:
// the file first (local, a few milliseconds), then the table. It holds
// no connection beyond the one statement, and no wait of Telegram's is
// sat out meanwhile.
func (p *pauseRecorder) record(scope store.FloodWaitScope, chat tg.ChatID, d time.Duration) {
	p.file.add(store.FloodWait{Scope: scope, Chat: chat, Left: d})
	p.recordInStore(scope, chat, d)
}

// recordInStore writes one wait of scope holding the account for d from
// now to the table.
func (p *pauseRecorder) recordInStore(scope store.FloodWaitScope, chat tg.ChatID, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), floodWaitWriteTimeout)
	defer cancel()
	if err := p.st.RecordFloodWait(ctx, p.account, scope, chat, d); err != nil {
		p.log.Warn("flood wait not recorded in the database: only this instance's next run of the account honours it", "err", err,
			"scope", scope, "chat", chat, "wait", d.String())
	}
}

// recordPaced is tg.PacedConfig.OnPause: the wait is written before the
// request that met the 429 returns, so a stop after that (before the
// delivery it refused is put off, say) leaves it recorded.
func (p *pauseRecorder) recordPaced(send bool, d time.Duration) {
	scope := store.FloodWaitAll
	if send {
		scope = store.FloodWaitSends
	}
	p.record(scope, 0, d)
}

// recordChat is the session's RecordChatPauses hook. It is called from
// the session's pump, which must wait neither on the database nor on the
// disk (an fsync can stall for seconds behind the downloads' writes): both
// writes run on their own, the file's first, and a stop waits for them
// (wait). The session holds the chat's sends meanwhile.
func (p *pauseRecorder) recordChat(chat tg.ChatID, d time.Duration) {
	at := time.Now()
	p.chats.Add(1)
	go func() {
		defer p.chats.Done()
		if left := d - time.Since(at); left > 0 {
			p.record(store.FloodWaitChat, chat, left)
		}
	}()
}

// wait waits for the chat pauses' writes in flight (called once the
// session's pump has ended, so no more start).
func (p *pauseRecorder) wait() { p.chats.Wait() }

// restorePauses puts the flood waits an earlier run of the account
// recorded, and that still run, back into r's pacing and session, before
// the account makes its first request.
func restorePauses(r *accountRun, waits []store.FloodWait) {
	for _, w := range waits {
		switch w.Scope {
		case store.FloodWaitAll, store.FloodWaitSends:
			r.paced.RestorePause(w.Scope == store.FloodWaitSends, w.Left)
		case store.FloodWaitChat:
			r.sess.RestoreChatPause(w.Chat, w.Left)
		default:
			continue
		}
		r.log.Info("a flood wait recorded by an earlier run still holds the account; its requests wait for it",
			"scope", w.Scope, "chat", w.Chat, "left", w.Left.Round(time.Second).String())
	}
}

// recordedWaits returns the flood waits of account that still run: for
// each scope and chat, the later end of what flood_waits and the
// account's file say. A wait the table lost (a restore or lagging
// failover rewound it, or the database was down at the 429) is recorded
// there again, so that an instance taking the account over honours it
// too; one only the table knows (met by another instance) is added to
// the file.
func (d *Daemon) recordedWaits(ctx context.Context, account string) ([]store.FloodWait, error) {
	return recordedWaits(ctx, d.store, d.floodFiles[account], account, d.log.With("account", account))
}

// recordedWaits is Daemon.recordedWaits over st and the account's file
// f, logging to the account's log.
func recordedWaits(ctx context.Context, st *store.Store, f *floodFile, account string, log *slog.Logger) ([]store.FloodWait, error) {
	waits, err := st.FloodWaits(ctx, account)
	if err != nil {
		return nil, err
	}
	f.add(waits...)
	at := map[floodKey]int{}
	for i, w := range waits {
		at[floodKey{scope: w.Scope, chat: w.Chat}] = i
	}
	for _, w := range f.waits() {
		i, ok := at[floodKey{scope: w.Scope, chat: w.Chat}]
		if ok && waits[i].Left >= w.Left-floodWaitSlack {
			continue
		}
		log.Warn("the database lost a flood wait the account's directory kept; it is recorded again",
			"scope", w.Scope, "chat", w.Chat, "left", w.Left.Round(time.Second).String())
		if err := st.RecordFloodWait(ctx, account, w.Scope, w.Chat, w.Left); err != nil {
			log.Warn("flood wait not recorded in the database again: an instance taking the account over would not honour it",
				"err", err)
		}
		if ok {
			waits[i].Left = w.Left
		} else {
			waits = append(waits, w)
		}
	}
	return waits, nil
}

// clientHold returns how long the account's TDLib client must not start
// yet, and which wait holds it (0 when it may start now). TDLib re-sends,
// as its client starts and before any request of stashd's, the sends its
// database holds pending, and the pacing restorePauses puts back cannot
// hold those. So the start waits for a wait of every request (TDLib's
// start makes requests of its own as well), for a wait of the account's
// sends while any of its delivery intents is open, and for a chat's wait
// while one is open to that chat: an open intent is a send that may be
// pending there (one never sent holds the start no longer than the wait
// does). The deliveries are read only when such a wait runs.
func clientHold(ctx context.Context, st *store.Store, account string, waits []store.FloodWait) (time.Duration, store.FloodWait, error) {
	var hold store.FloodWait
	var open map[tg.ChatID]bool // read at the first wait of sends
	for _, w := range waits {
		if w.Left <= hold.Left {
			continue
		}
		if w.Scope != store.FloodWaitAll && open == nil {
			dests, err := st.IntentDestinations(ctx, account)
			if err != nil {
				return 0, hold, err
			}
			open = make(map[tg.ChatID]bool, len(dests))
			for _, c := range dests {
				open[c] = true
			}
		}
		switch {
		case w.Scope == store.FloodWaitAll,
			w.Scope == store.FloodWaitSends && len(open) > 0,
			w.Scope == store.FloodWaitChat && open[w.Chat]:
			hold = w
		}
	}
	return hold.Left, hold, nil
}

// waitClientHold waits, before the account's TDLib client starts, until
// no recorded flood wait holds the start (clientHold), saying once why (a
// wait of every request, or a re-send it would break) and until when. It returns early with ctx's error, or with
// tg.ErrLeaseLost when the lease is lost meanwhile (kept by its renewals
// while it waits). The waits are read again after each hold: none starts
// while the account does not run, so the second look lets it go.
func (d *Daemon) waitClientHold(ctx context.Context, account string, h *holding) ([]store.FloodWait, error) {
	log := d.log.With("account", account)
	for {
		waits, err := d.recordedWaits(ctx, account)
		if err != nil {
			return nil, err
		}
		left, w, err := clientHold(ctx, d.store, account, waits)
		if err != nil || left <= 0 {
			return waits, err
		}
		why := "TDLib would re-send at once what it holds pending, inside the wait"
		if w.Scope == store.FloodWaitAll {
			why = "TDLib's start makes requests of its own, inside the wait of every request"
		}
		log.Info("a flood wait holds the account's start: "+why,
			"scope", w.Scope, "chat", w.Chat, "until", time.Now().Add(left).UTC().Round(time.Second).Format(time.RFC3339),
			"left", left.Round(time.Second).String())
		t := time.NewTimer(left)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-h.lostCh:
			t.Stop()
			return nil, tg.ErrLeaseLost
		}
	}
}
