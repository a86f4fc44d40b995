package tgsim

import (
	"cmp"
	"slices"
	"time"

	"stashd/tg"
)

// A session's own messages that are not on the server are part of its
// view of a chat, as in TDLib: a message being sent (yet unsent, under its
// temporary id) and one whose send failed (under the failure's new local
// id, until deleteMessages removes it) are in the chat's message list
// (MessagesManager::add_message_to_dialog, from send_message and
// on_send_message_fail). So getChatHistory returns them among the server's
// messages in id order, getMessage finds them, and the newest of them is
// the chat's last message (d->last_message_id; a temporary id lies above
// the last server id it was made from), which getChat reports and
// getChatMessageByDate answers with when the date is not before it
// (get_dialog_message_by_date answers from the loaded messages when its
// find is the last message). No other session sees them.

// SendingState is how a session's message stands towards the server.
type SendingState int

const (
	// OnServer: not a local message of the session (a server message, or
	// an id the session does not hold).
	OnServer SendingState = iota
	// SendPending: being sent (messageSendingStatePending).
	SendPending
	// SendFailedState: its send failed (messageSendingStateFailed).
	SendFailedState
)

// failedMessage is a failed send kept in the session's view.
type failedMessage struct {
	msg message
	err error
}

// localMessages returns this session's pending and failed messages in
// chat, in no order. w.mu is held.
func (c *Client) localMessages(chat tg.ChatID) []*message {
	var out []*message
	for _, ps := range c.sends {
		if ps.dest.id == chat && !ps.settled && ps.msg != nil {
			out = append(out, ps.msg)
		}
	}
	for _, f := range c.failed[chat] {
		out = append(out, &f.msg)
	}
	return out
}

// localMessage returns this session's pending or failed message id of
// chat, with its state. w.mu is held.
func (c *Client) localMessage(chat tg.ChatID, id tg.MessageID) (*message, SendingState, error) {
	if id.IsServer() {
		return nil, OnServer, nil
	}
	if ps := c.sends[id]; ps != nil && ps.dest.id == chat && !ps.settled && ps.msg != nil {
		return ps.msg, SendPending, nil
	}
	if f := c.failed[chat][id]; f != nil {
		return &f.msg, SendFailedState, f.err
	}
	return nil, OnServer, nil
}

// MessageSendingState reports whether message id of chat is one of this
// session's messages being sent or failed, and for a failed one the error
// its send failed with.
func (c *Client) MessageSendingState(chat tg.ChatID, id tg.MessageID) (SendingState, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	_, st, err := c.localMessage(chat, id)
	return st, err
}

// withLocal merges this session's local messages of chat at or below
// upTo (0: no bound) and above down (0: no bound) into page, newest first,
// and keeps the newest limit. w.mu is held.
func (c *Client) withLocal(chat tg.ChatID, page []*message, upTo, down tg.MessageID, limit int) []*message {
	local := c.localMessages(chat)
	if len(local) == 0 {
		return page
	}
	for _, m := range local {
		if (upTo == 0 || m.id <= upTo) && m.id > down {
			page = append(page, m)
		}
	}
	slices.SortFunc(page, func(a, b *message) int { return cmp.Compare(b.id, a.id) })
	return page[:min(len(page), limit)]
}

// lastLocal is this session's newest local message in chat, nil when none.
// w.mu is held.
func (c *Client) lastLocal(chat tg.ChatID) *message {
	var last *message
	for _, m := range c.localMessages(chat) {
		if last == nil || m.id > last.id {
			last = m
		}
	}
	return last
}

// lastByDate is getChatMessageByDate's answer from the session's loaded
// messages: the chat's last message as the session knows it (its own
// newest local message, or the last server message its database learned,
// which may lag the server) when it is dated at or before date; nil sends
// the request to the server. w.mu is held.
func (c *Client) lastByDate(ch *chat, date time.Time) *message {
	m := c.lastLocal(ch.id)
	if last := c.historyEnd(ch); m == nil || m.id < last {
		m = nil
		if last != 0 {
			if s, ok := c.stored(ch, last); ok {
				m = s
			} else {
				m = ch.find(last)
			}
		}
	}
	if m == nil || m.date.After(date) || c.knowsDeleted(ch.id, m.id) {
		return nil
	}
	return m
}
