package tgsim

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"stashd/tg"
)

// A 429 asks the account to wait: the world remembers, per account, until
// when each 429 it answered holds what, and notes every request that
// reaches the server before that end (World.FloodWaitBreaches), TDLib's
// own re-send at a client's start included. What a wait holds is what
// stashd holds on it: a 429 answering a request other than a send, every
// server request of the account; one answering a send request, the
// account's sends; one failing a sent message (updateMessageSendFailed),
// the account's sends to that chat. A wait starts when its 429 reaches
// the client (after Latency), so a request already on its way then is no
// breach, nor one within floodWaitGrace of it. A breach is noted, not refused, except where Telegram's own
// limit refuses it (a chat's send limit, LimitChatSends, judges a re-sent
// message again; the account's request limit, LimitRequests, every
// request).

// floodHold is what a wait holds: every request, the sends, or the sends
// to one chat.
type floodHold struct {
	sends bool
	chat  tg.ChatID // with sends: only the sends to this chat
}

// FloodWaitBreach is a request that reached the server while a 429 the
// world had answered the account with still asked it to wait.
type FloodWaitBreach struct {
	Account string `json:"account"`
	Method  string `json:"method"`
	// Chat is the chat a send went to; 0 for any other request.
	Chat tg.ChatID `json:"chat,omitempty"`
	// Left is how much of the wait was left.
	Left time.Duration `json:"left"`
	// Resend is set for TDLib's re-send, at a client's start, of a message
	// a closed client on its directory left pending (ResendAfterRestart):
	// the request is TDLib's own, made before stashd can ask anything.
	Resend bool `json:"resend,omitempty"`
}

// FloodWaitBreaches returns the requests account made inside a flood wait
// the world had asked of it, in order.
func (w *World) FloodWaitBreaches(account string) []FloodWaitBreach {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]FloodWaitBreach(nil), w.mustAccount(account).breaches...)
}

// noteFloodAnswer starts the wait err asks of account a when it is a 429
// answering a request of method (a send's holds the sends). It locks
// w.mu.
func (w *World) noteFloodAnswer(a *account, method string, err error) {
	var fw *tg.FloodWaitError
	if tg.LocalMethod(method) || !errors.As(err, &fw) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.cfg.Now()
	a.hold(floodHold{sends: tg.SendMethod(method)}, now, now.Add(fw.RetryAfter))
}

// noteSendRefused starts the wait a 429 failing a message sent into chat
// asks of account a (any other error starts none). w.mu is held.
func (w *World) noteSendRefused(a *account, chat tg.ChatID, err error) {
	var fw *tg.FloodWaitError
	if errors.As(err, &fw) {
		now := w.cfg.Now()
		a.hold(floodHold{sends: true, chat: chat}, now, now.Add(fw.RetryAfter))
	}
}

// floodSpan is when a wait started (its 429 reached the client) and ends.
type floodSpan struct{ from, until time.Time }

// floodWaitGrace is how long after a 429 reaches the client a request it
// holds is still no breach: a request the client had decided on before it
// could read the 429. A send's 429 comes in an update the session's pump
// hands on (updateMessageSendFailed), and a send to the same chat already
// under way meanwhile goes out, from TDLib as from stashd; Telegram then
// answers it with its own 429. Any request made once the wait is known
// comes later than that; TDLib's re-sends at a client's start are
// breaches however soon they come.
const floodWaitGrace = 250 * time.Millisecond

// hold notes that a wait holds h of a from from until until (a later end
// stays). w.mu is held.
func (a *account) hold(h floodHold, from, until time.Time) {
	if a.holds == nil {
		a.holds = make(map[floodHold]floodSpan)
	}
	if until.After(a.holds[h].until) {
		a.holds[h] = floodSpan{from, until}
	}
}

// noteRequestInWait notes a breach when a request of method (into chat,
// for a send) reaches the server inside a wait that holds it. w.mu is
// held.
func (w *World) noteRequestInWait(a *account, method string, chat tg.ChatID, resend bool) {
	now := w.cfg.Now()
	var left time.Duration
	for h, span := range a.holds {
		if !span.until.After(now) {
			delete(a.holds, h)
			continue
		}
		if h.sends && (!tg.SendMethod(method) || h.chat != 0 && h.chat != chat) || !resend && now.Sub(span.from) < floodWaitGrace {
			continue
		}
		left = max(left, span.until.Sub(now))
	}
	if left > 0 {
		a.breaches = append(a.breaches, FloodWaitBreach{Account: a.name, Method: method, Chat: chat, Left: left, Resend: resend})
	}
}

// AllFloodWaitBreaches returns how many requests every account made inside
// a flood wait the world had asked of it, and the first max of them, by
// account name, then in order.
func (w *World) AllFloodWaitBreaches(max int) (int, []FloodWaitBreach) {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.accounts))
	for name := range w.accounts {
		names = append(names, name)
	}
	sort.Strings(names)
	n := 0
	var first []FloodWaitBreach
	for _, name := range names {
		b := w.accounts[name].breaches
		n += len(b)
		first = append(first, b[:min(len(b), max-len(first))]...)
	}
	return n, first
}

func (b FloodWaitBreach) String() string {
	what := b.Method
	if b.Chat != 0 {
		what = fmt.Sprintf("%s to chat %d", b.Method, b.Chat)
	}
	if b.Resend {
		what += " (TDLib's re-send at a client's start)"
	}
	return fmt.Sprintf("account %s: %s with %s of a flood wait left", b.Account, what, b.Left.Round(time.Millisecond))
}
