package tgsim

import (
	"math"
	"time"

	"stashd/tg"
)

// requestLimit is Telegram's per-account request limit as the simulator
// enforces it: a token bucket over the account's server requests. A request
// that finds the bucket empty fails with 429 "Too Many Requests: retry
// after N", N the whole seconds until a token is back (at least one), as
// Telegram's FLOOD_WAIT does.
type requestLimit struct {
	rate    float64 // tokens per second
	burst   float64
	tokens  float64
	last    time.Time
	refused int
}

// LimitRequests makes Telegram enforce a request limit on account: at most
// rate server requests per second, with bursts of up to burst (zero or less
// means one second's worth). Requests beyond it fail with 429 "Too Many
// Requests: retry after N" and are counted in Calls and RateLimited. Local
// requests (getChat, openChat, deleteFile, cancelDownloadFile) are never
// limited. A rate of zero or less removes the limit.
func (w *World) LimitRequests(account string, rate float64, burst int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	if rate <= 0 {
		a.limit = nil
		return
	}
	b := float64(burst)
	if burst <= 0 {
		b = math.Max(1, rate)
	}
	a.limit = &requestLimit{rate: rate, burst: b, tokens: b, last: w.cfg.Now()}
}

// RateLimited returns how many of account's requests the limit refused
// with 429.
func (w *World) RateLimited(account string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l := w.mustAccount(account).limit; l != nil {
		return l.refused
	}
	return 0
}

// admit takes a token for one request of method, or returns the 429 that
// refuses it. It runs with w.mu held.
func (a *account) admit(method string, now time.Time) error {
	l := a.limit
	if l == nil || tg.LocalMethod(method) {
		return nil
	}
	l.tokens = math.Min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return nil
	}
	l.refused++
	wait := time.Duration((1 - l.tokens) / l.rate * float64(time.Second))
	return errFloodWait(max(wait, time.Second))
}
