package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"stashd/store"
	"stashd/tg"
)

// floodWaitWriteTimeout bounds the write of one flood wait.
const floodWaitWriteTimeout = 10 * time.Second

// pauseRecorder writes an account's flood waits to the store as they
// start (migration 033), so that the account's next run, in this
// instance or the one taking it over, honours a wait that outlives the
// process: restorePauses puts them back before its first request. A wait
// is the account's whoever holds its lease, so the write is not fenced.
type pauseRecorder struct {
	st      *store.Store
	account string
	log     *slog.Logger
	// chats are the writes of chat pauses in flight (recordChat).
	chats sync.WaitGroup
}

// record writes one wait of scope holding the account for d from now. It
// holds no connection beyond the one statement, and no wait of Telegram's
// is sat out meanwhile.
func (p *pauseRecorder) record(scope store.FloodWaitScope, chat tg.ChatID, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), floodWaitWriteTimeout)
	defer cancel()
	if err := p.st.RecordFloodWait(ctx, p.account, scope, chat, d); err != nil {
		p.log.Warn("flood wait not recorded: a restart within it would not honour it", "err", err,
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
// the session's pump, which must not block: the write runs on its own.
func (p *pauseRecorder) recordChat(chat tg.ChatID, d time.Duration) {
	p.chats.Add(1)
	go func() {
		defer p.chats.Done()
		p.record(store.FloodWaitChat, chat, d)
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

// pausedAtStart returns how long a recorded flood wait still holds every
// request of account (0 for none).
func (d *Daemon) pausedAtStart(ctx context.Context, account string) (time.Duration, error) {
	waits, err := d.store.FloodWaits(ctx, account)
	if err != nil {
		return 0, err
	}
	for _, w := range waits {
		if w.Scope == store.FloodWaitAll {
			return w.Left, nil
		}
	}
	return 0, nil
}
