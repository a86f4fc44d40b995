package tgsim

import (
	"math"
	"time"

	"stashd/tg"
)

// LimitChatSends makes Telegram limit the messages sent into chat, per
// account, as it limits the posting rate of each chat apart from an
// account's overall request limit: at most rate sends per second, in
// bursts of up to burst (zero or less: one second's worth). TDLib accepts
// a send beyond it (the temporary message) and reports the server's
// refusal in updateMessageSendFailed as 429 "Too Many Requests: retry
// after N", N the whole seconds until the chat takes a send again (at
// least one). Other chats and other requests of the account are not
// limited by it. A rate of zero or less removes the limit.
func (w *World) LimitChatSends(chat tg.ChatID, rate float64, burst int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	if rate <= 0 {
		c.sendLimit = nil
		return
	}
	b := float64(burst)
	if burst <= 0 {
		b = math.Max(1, rate)
	}
	c.sendLimit = &chatSendLimit{rate: rate, burst: b, buckets: map[string]*chatBucket{}}
}

// ChatFlooded returns how many messages sent into chat its send limit
// refused (each of an album's).
func (w *World) ChatFlooded(chat tg.ChatID) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l := w.mustChat(chat).sendLimit; l != nil {
		return l.refused
	}
	return 0
}

// chatSendLimit is a chat's per-account send limit (LimitChatSends).
type chatSendLimit struct {
	rate, burst float64
	buckets     map[string]*chatBucket // by account
	refused     int
}

type chatBucket struct {
	tokens float64
	last   time.Time
}

// admitSend takes the tokens of n messages of account sent into the chat
// in one request (an album's, n > 1), or returns the 429 that refuses
// them all. A request of more messages than the burst needs a full
// bucket. It runs with w.mu held.
func (l *chatSendLimit) admitSend(account string, now time.Time, n int) error {
	b := l.buckets[account]
	if b == nil {
		b = &chatBucket{tokens: l.burst, last: now}
		l.buckets[account] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	need := math.Min(float64(n), l.burst)
	if b.tokens >= need {
		b.tokens -= need
		return nil
	}
	l.refused += n
	wait := time.Duration((need - b.tokens) / l.rate * float64(time.Second))
	return errFloodWait(max(wait, time.Second))
}
