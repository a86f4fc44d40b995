package tgsim

import "stashd/tg"

// The update queue models TDLib's internal buffering: the world appends to
// it without ever blocking, and one pump goroutine per client hands the
// updates to the consumer in order. Undelivered updateNewMessage are counted
// per chat so that channel gaps can be modelled: an update counts as
// undelivered until the consumer has received it from the channel.

// enqueue appends u to the client's queue. It runs with w.mu held (so the
// closed flag is stable) and never blocks.
func (c *Client) enqueue(u tg.Update) {
	if c.closed {
		return
	}
	c.qmu.Lock()
	if nm, ok := u.(tg.NewMessage); ok {
		chat := nm.Message.ChatID
		if c.pending[chat] >= c.w.cfg.ChannelGap {
			c.qmu.Unlock()
			return // channel gap: TDLib skips the update
		}
		c.pending[chat]++
	}
	c.queue = append(c.queue, u)
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pump moves updates from the queue to the Updates channel until Close.
// The head of the queue stays queued (and counted) while it waits for the
// consumer.
func (c *Client) pump() {
	defer close(c.pumpDone)
	defer close(c.out)
	for {
		c.qmu.Lock()
		for len(c.queue) == 0 {
			c.qmu.Unlock()
			select {
			case <-c.wake:
			case <-c.done:
				return
			}
			c.qmu.Lock()
		}
		u := c.queue[0]
		c.qmu.Unlock()

		select {
		case c.out <- u:
		case <-c.done:
			return
		}

		c.qmu.Lock()
		c.queue[0] = nil
		c.queue = c.queue[1:]
		if nm, ok := u.(tg.NewMessage); ok {
			if c.pending[nm.Message.ChatID]--; c.pending[nm.Message.ChatID] == 0 {
				delete(c.pending, nm.Message.ChatID)
			}
		}
		c.qmu.Unlock()
	}
}
