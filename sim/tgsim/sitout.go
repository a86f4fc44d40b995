package tgsim

import (
	"errors"
	"time"

	"stashd/tg"
)

// TDLib sits out short flood waits itself (NetQueryDelayer): a query the
// server refuses with FLOOD_WAIT_N is sent again N seconds later, as long
// as the waits the query has sat out total no more than its limit
// (total_timeout_limit_, 60 s unless the query sets another), and only a
// wait past that reaches the client, as 429 "Too Many Requests: retry
// after N". The client sees nothing of a wait TDLib sat out but a slow
// answer: a request that takes up to a minute, a message that stays
// pending that long before it lands.
//
// The world models it for the refusals of Telegram's own limits, which
// are the server's FLOOD_WAITs: the account's request limit
// (LimitRequests) refusing a request other than a send, and a chat's send
// limit (LimitChatSends) refusing a send request's messages, which stay
// pending meanwhile and are judged by the limit again at each try.
// Injected waits (InjectFloodWait, SendFloodRate) are TDLib's 429s as the
// client receives them, past any sit-out.
//
// Known differences from TDLib: a send request refused by the account's
// request limit fails at once (TDLib would answer with the temporary
// message and sit out the wait behind it); a request whose caller gives
// up during a sit-out is not sent again (TDLib sends it and drops the
// answer); and a sit-out's re-send is never noted as a breach of another
// wait (World.FloodWaitBreaches): it is TDLib's, which no client can hold.

// DefaultFloodSitOut is TDLib's default limit on the flood waits one
// query sits out (Config.FloodSitOut).
const DefaultFloodSitOut = 60 * time.Second

// sitOut returns how long TDLib waits before it sends again a query that
// err refused, having sat out satOut already; false when err is no flood
// wait, or when TDLib gives up and hands the client the 429. TDLib waits
// the server's whole seconds. w.mu need not be held.
func (w *World) sitOut(err error, satOut time.Duration) (time.Duration, bool) {
	var fw *tg.FloodWaitError
	if w.cfg.FloodSitOut < 0 || !errors.As(err, &fw) {
		return 0, false
	}
	d := (fw.RetryAfter + time.Second - 1).Truncate(time.Second)
	if d > w.cfg.FloodSitOut-satOut {
		return 0, false
	}
	return d, true
}

// FloodWaitsSatOut returns how many flood waits TDLib sat out for
// account's requests and sends (each wait of each try once), which the
// account's clients never saw.
func (w *World) FloodWaitsSatOut(account string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mustAccount(account).satOut
}

// sitOutSends holds b's messages, pending, through the wait a chat's send
// limit refused them with, when TDLib sits it out: after the wait the
// request reaches the server again, the chat's limit judges it again, and
// b settles (or waits again). It reports whether it did; a closed
// client's sends are not held (their outcome reaches nobody, or TDLib
// re-sends them from its binlog at the next start). w.mu is held.
func (w *World) sitOutSends(b *sendBatch) bool {
	first := b.sends[0]
	c := first.c
	if first.settled || first.limitErr == nil {
		return false
	}
	if c.closed {
		if b.satOut == 0 {
			return false
		}
		w.abandonSitOut(b)
		return true
	}
	d, ok := w.sitOut(first.limitErr, b.satOut)
	if !ok {
		return false
	}
	b.satOut += d
	w.accounts[c.account].satOut++
	w.sendStats.ChatWaitsSatOut++
	c.wg.Add(1)
	b.timer = time.AfterFunc(d, func() {
		defer c.wg.Done()
		w.mu.Lock()
		defer w.mu.Unlock()
		if c.closed { // Close found this timer fired: not sent again
			w.abandonSitOut(b)
			return
		}
		var err error
		if l := first.dest.sendLimit; l != nil {
			err = l.admitSend(c.account, w.cfg.Now(), len(b.sends))
		}
		for _, ps := range b.sends {
			ps.limitErr = err
		}
		w.settleBatch(b)
	})
	return true
}

// abandonSitOut ends the sit-out of b, whose client closed meanwhile:
// TDLib's delayer aborts the query (NetQueryDelayer::tear_down), so no
// 429 reaches anyone and nothing is counted; the messages stay in the
// binlog for the next client when TDLib re-sends after a restart. w.mu
// is held.
func (w *World) abandonSitOut(b *sendBatch) {
	for _, ps := range b.sends {
		if ps.settled {
			continue
		}
		c := ps.c
		delete(c.sends, ps.tempID)
		if w.cfg.ResendAfterRestart {
			a := w.accounts[c.account]
			a.resend = append(a.resend, ps)
			continue
		}
		ps.settled = true
	}
}
