package tg

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// AlbumResult is the outcome of one message of an album: the message as it
// exists on the server, or why it was not sent (as Send's errors: a
// SendFailed error, ErrSendVanished, ErrSendTimeout, ErrClosed).
type AlbumResult struct {
	Message Message
	Err     error
}

// SendAlbumTo sends items (1 to MaxAlbum) into forum topic thread of chat
// (0: the chat itself) as one album, one request under one turn of the
// account's send budget, and waits until Telegram has accepted or refused
// each of its messages. An error means no result for any item: the chat's
// send limit still pauses sends there (FloodWaitError, ErrChatFloodWait),
// the budget's wait ended, or TDLib refused the request (ErrSendRefused),
// in all of which no message was made; or the request timed out
// (ErrSendTimeout) or was answered with another number of messages than
// items, after which some may have landed and a retry must reconcile.
// Otherwise every item has its result, in order, and the results may
// differ: a message refused with 429 pauses the chat as Send's does, a
// refused one is deleted from the chat, and the others stand.
func (s *Session) SendAlbumTo(ctx context.Context, chat ChatID, thread int64, items []AlbumItem) ([]AlbumResult, error) {
	return s.send(ctx, chat, MethodSendMessageAlbum, len(items), func(ctx context.Context) ([]Message, error) {
		return s.Client.SendDocumentAlbum(ctx, chat, thread, items, SendOptions{Silent: s.Silent})
	})
}

// send makes one send request, method, of n messages into chat and waits
// for each message's outcome (SendTo, SendAlbumTo): at once a FloodWaitError
// while a 429 pauses chat, or the account's sends (ErrSendRefused); else after the send turn the caller took
// (SendTurn), or one of the budget; within SendTimeout. request makes the
// temporary messages.
func (s *Session) send(ctx context.Context, chat ChatID, method string, n int, request func(context.Context) ([]Message, error)) ([]AlbumResult, error) {
	if d := s.ChatPause(chat); d > 0 {
		return nil, &FloodWaitError{RetryAfter: d, Err: fmt.Errorf("send to %d: %w", chat, ErrChatFloodWait)}
	}
	timeout := s.SendTimeout
	if timeout <= 0 {
		timeout = DefaultSendTimeout
	}
	started := func() {}
	if t, ok := ctx.Value(sendTurnKey{}).(*sendTurn); ok {
		started = t.started // the caller took the turn (SendTurn)
	} else if s.Budget != nil {
		var done func()
		var err error
		started, done, err = s.Budget.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("wait for send budget: %w", err)
		}
		defer done()
	}
	sctx, cancel := context.WithTimeoutCause(ctx, timeout, ErrSendTimeout)
	defer cancel()
	timedOut := func() bool { return context.Cause(sctx) == ErrSendTimeout && ctx.Err() == nil }
	// The request does not sit out a flood wait: it holds the account's
	// send turn, and its caller an intent, which a wait of hours would
	// hold with it (and a stop would end unsent). The 429 pauses the
	// account's sends all the same (Paced) and comes back at once.
	tmps, err := request(WithoutFloodWaits(sctx))
	started()
	if err != nil {
		if timedOut() {
			return nil, fmt.Errorf("send to %d: %w", chat, ErrSendTimeout)
		}
		var api *Error
		if _, flood := FloodWait(err); flood || errors.As(err, &api) {
			// TDLib answered with an error, or the request was not made
			// (the account's sends are paused): no message was made.
			return nil, fmt.Errorf("%w: %w", ErrSendRefused, err)
		}
		return nil, err
	}
	if len(tmps) != n {
		return nil, fmt.Errorf("send to %d: %d messages for %d documents", chat, len(tmps), n)
	}
	keys := make([]sendKey, len(tmps))
	for i, m := range tmps {
		keys[i] = sendKey{chat, m.ID}
	}
	rs := s.awaitAll(sctx, keys)
	var failed []sendKey
	var flood time.Duration // the longest 429 among the messages
	out := make([]AlbumResult, len(rs))
	for i, r := range rs {
		if r.err != nil && timedOut() && errors.Is(r.err, context.DeadlineExceeded) {
			r.err = fmt.Errorf("send to %d: %w", chat, ErrSendTimeout)
		}
		if d, ok := FloodWait(r.err); ok {
			flood = max(flood, d)
		}
		if r.failed != 0 {
			failed = append(failed, sendKey{chat, r.failed})
		}
		out[i] = AlbumResult{Message: r.msg, Err: r.err}
	}
	if flood > 0 {
		// Refused by the chat's send limit: the pump paused sends to
		// chat (pauseChat); the account's other requests go on. One
		// request, one flood wait.
		if p, ok := s.Client.(interface{ CountFloodWait(string, time.Duration) }); ok {
			p.CountFloodWait(method, flood)
		}
	}
	if len(failed) > 0 {
		s.deleteFailed(ctx, failed...)
	}
	return out, nil
}

// awaitAll waits for the outcomes of the sends of temporary messages keys,
// registered together so that none is taken for a send nobody waits for
// while an earlier one is awaited. A wait ctx ends has ctx's error.
func (s *Session) awaitAll(ctx context.Context, keys []sendKey) []sendResult {
	out := make([]sendResult, len(keys))
	chs := make([]chan sendResult, len(keys))
	s.mu.Lock()
	for i, k := range keys {
		chs[i] = make(chan sendResult, 1)
		switch r, ok := s.early[k]; {
		case ok:
			// An outcome that arrived first stands, even after the
			// stream ended.
			delete(s.early, k)
			chs[i] <- r
		case s.ended:
			chs[i] <- sendResult{err: ErrClosed}
		default:
			s.sends[k] = chs[i]
		}
	}
	s.mu.Unlock()
	for i, ch := range chs {
		select {
		case out[i] = <-ch:
		case <-ctx.Done():
			s.mu.Lock()
			for _, k := range keys[i:] {
				delete(s.sends, k)
			}
			s.mu.Unlock()
			for j := i; j < len(out); j++ {
				select {
				case out[j] = <-chs[j]: // resolved before its wait was dropped
				default:
					out[j].err = ctx.Err()
				}
			}
			return out
		}
	}
	return out
}
