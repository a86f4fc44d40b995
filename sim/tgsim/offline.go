package tgsim

import (
	"context"
	"errors"

	"stashd/tg"
)

// errNeedsServer is what a request's answer returns, with w.mu held, when
// only the server can answer it and the account is offline (needsServer):
// TDLib keeps such a query until its connection is back and answers it
// then. answer waits for the reconnect and runs the answer again.
var errNeedsServer = errors.New("tgsim: the answer needs the server")

// needsServer is called where a request's answer stops coming from the
// session's own database and asks the server: it returns errNeedsServer
// while the account is offline (Disconnect), nil otherwise. w.mu is held.
func (c *Client) needsServer() error {
	if c.reconnected() != nil {
		return errNeedsServer
	}
	return nil
}

// reconnected returns the channel closed at the reconnect while the
// account is offline (Disconnect), nil while it is online. w.mu is held.
func (c *Client) reconnected() <-chan struct{} {
	if a := c.w.accounts[c.account]; a.offline {
		return a.back
	}
	return nil
}

// asksServerFor reports whether getMessage asks the server for message id
// of ch, which the session's database lacks. TDLib does not for a basic
// group's or a private chat's message newer than the last it knows: that
// one can only come with its update (get_message_force_from_server). A
// channel's it asks for, and drops the answer when too new. w.mu is held.
func (c *Client) asksServerFor(ch *chat, id tg.MessageID) bool {
	if !commonBox(ch) || c.w.cfg.ServerView || c.db == nil {
		return true
	}
	last, ok := c.db.last[ch.id]
	return !ok || id <= last
}

// holdsAll reports whether the session's database holds every message of
// page: TDLib answers a history read from its database then, and asks the
// server otherwise. w.mu is held.
func (c *Client) holdsAll(ch *chat, page []*message) bool {
	for _, m := range page {
		if _, ok := c.stored(ch, m.id); !ok {
			return false
		}
	}
	return true
}

// answer runs fn with w.mu held and returns its answer. When fn needs the
// server while the account is offline, answer waits for the reconnect,
// as TDLib holds the query, and runs fn again then: the answer is the
// server's at that moment. It returns tg.ErrClosed as soon as the client
// closes, and ctx's error when ctx ends first (the caller gave up; TDLib
// would still answer later, to nobody).
func answer[T any](ctx context.Context, c *Client, fn func() (T, error)) (T, error) {
	var zero T
	for {
		c.w.mu.Lock()
		if c.closed {
			c.w.mu.Unlock()
			return zero, tg.ErrClosed
		}
		v, err := fn()
		if !errors.Is(err, errNeedsServer) {
			c.w.mu.Unlock()
			return v, err
		}
		back := c.reconnected()
		c.w.mu.Unlock()
		select {
		case <-back:
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-c.done:
			return zero, tg.ErrClosed
		}
	}
}

// awaitConnection waits while the account is offline (Disconnect): TDLib
// downloads nothing without its connection, and goes on where it stopped
// once the connection is back. It returns tg.ErrClosed as soon as the
// client closes, or errDownloadCancelled when the download is cancelled.
func (c *Client) awaitConnection(cancel <-chan struct{}) error {
	c.w.mu.Lock()
	back := c.reconnected()
	c.w.mu.Unlock()
	if back == nil {
		return nil
	}
	select {
	case <-back:
		return nil
	case <-c.done:
		return tg.ErrClosed
	case <-cancel:
		return errDownloadCancelled
	}
}
