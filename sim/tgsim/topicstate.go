package tgsim

import (
	"context"
	"fmt"
	"slices"

	"stashd/tg"
)

// SetTopicRights gives account the right to manage the topics of forum
// chat (an administrator's can_manage_topics), or takes it away. With it
// the account closes and reopens any topic and posts in closed ones;
// without it, it may close and reopen only the topics it created, and a
// send into a closed topic fails with 400 TOPIC_CLOSED.
func (w *World) SetTopicRights(account string, chat tg.ChatID, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	w.mustChat(chat)
	if a.manageTopics == nil {
		a.manageTopics = make(map[tg.ChatID]bool)
	}
	a.manageTopics[chat] = ok
}

// CloseTopic closes (closed true) or reopens a forum topic, as an
// administrator does. Like Telegram it posts a service message in the
// topic, and clients that opened the chat receive updateForumTopicInfo
// with is_closed. Closing a closed topic changes nothing.
func (w *World) CloseTopic(chat tg.ChatID, thread int64, closed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	if c.topics[thread] == nil {
		panic(fmt.Sprintf("tgsim: CloseTopic: chat %d has no topic %d", chat, thread))
	}
	if w.setTopicClosed(c, thread, closed) && closed {
		w.topicsClosed++
	}
}

// TopicEvents returns how many forum topics the world closed (CloseTopic)
// and deleted (DeleteTopic).
func (w *World) TopicEvents() (closed, deleted int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.topicsClosed, w.topicsDeleted
}

// setTopicClosed is CloseTopic with w.mu held; it reports whether the
// topic changed.
func (w *World) setTopicClosed(c *chat, thread int64, closed bool) bool {
	t := c.topics[thread]
	if t.closed == closed {
		return false
	}
	t.closed = closed
	m := w.newMessage(c)
	m.thread, m.isTopic = thread, true
	w.publish(c, m, nil)
	w.topicChanged(c, thread)
	return true
}

// TopicClosed reports whether a topic of chat is closed.
func (w *World) TopicClosed(chat tg.ChatID, thread int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.mustChat(chat).topics[thread]
	return t != nil && t.closed
}

// DeleteTopic deletes a forum topic with every message in it, as an
// administrator does. Clients that opened the chat receive
// updateDeleteMessages for its messages. A send into the topic afterwards
// is accepted by TDLib (it does not know yet) and fails with 400
// TOPIC_DELETED. The deleted messages are kept for DeletedTopicMessages.
func (w *World) DeleteTopic(chat tg.ChatID, thread int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	t := c.topics[thread]
	if t == nil {
		panic(fmt.Sprintf("tgsim: DeleteTopic: chat %d has no topic %d", chat, thread))
	}
	var del []tg.MessageID
	kept := c.msgs[:0:0]
	for _, m := range c.msgs {
		if m.isTopic && m.thread == thread {
			del = append(del, m.id)
			if m.doc != nil {
				v := w.neutralView(m)
				w.topicGone = append(w.topicGone, goneMessage{msg: v, topic: t.name})
			}
			c.setDoc(m, nil)
			continue
		}
		kept = append(kept, m)
	}
	c.msgs = kept
	delete(c.topics, thread)
	w.topicsDeleted++
	if c.deletedTopics == nil {
		c.deletedTopics = make(map[int64]bool)
	}
	c.deletedTopics[thread] = true
	if len(del) == 0 {
		return
	}
	u := tg.MessagesDeleted{Chat: chat, IDs: del, IsPermanent: true}
	w.eachClient(c, func(cl *Client) {
		if cl.opened[chat] {
			cl.enqueue(u)
		}
	})
	w.lastMessageChanged(c)
}

// goneMessage is a document deleted with its forum topic.
type goneMessage struct {
	msg   tg.Message
	topic string
}

// DeletedTopicMessages returns the documents of chat that were deleted
// with their forum topic (DeleteTopic), as they were, by the name of their
// topic: what was delivered there before a user deleted it.
func (w *World) DeletedTopicMessages(chat tg.ChatID) map[string][]tg.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]tg.Message{}
	for _, g := range w.topicGone {
		if g.msg.ChatID == chat {
			out[g.topic] = append(out[g.topic], g.msg)
		}
	}
	return out
}

// ToggleForumTopicIsClosed implements tg.Client (toggleForumTopicIsClosed).
// As in TDLib, the account needs the right to manage topics
// (SetTopicRights) unless it created the topic: otherwise 400 "Not enough
// rights to close or open the topic". A chat that is not a forum fails
// with 400 "Chat is not a forum", a thread that is no topic with 400
// "Invalid message thread ID specified". World.Calls counts the requests.
func (c *Client) ToggleForumTopicIsClosed(ctx context.Context, chat tg.ChatID, thread int64, closed bool) error {
	return call0(ctx, c, tg.MethodToggleForumTopicIsClosed, func() error {
		w := c.w
		ch, err := c.serverChat(chat)
		if err != nil {
			return err
		}
		if ch.kind != tg.KindForum {
			return errBadRequest("Chat is not a forum")
		}
		if err := c.needsServer(); err != nil {
			return err
		}
		t := ch.topics[thread]
		if t == nil {
			if ch.deletedTopics[thread] {
				return errBadRequest("TOPIC_DELETED")
			}
			return errBadRequest("Invalid message thread ID specified")
		}
		if !w.accounts[c.account].manageTopics[chat] && t.creator != c.account {
			return errBadRequest("Not enough rights to close or open the topic")
		}
		if !w.setTopicClosed(ch, thread, closed) {
			return errBadRequest("TOPIC_NOT_MODIFIED")
		}
		return nil
	})
}

// topicRefusal returns the error the server answers a send into forum
// topic thread of dest with, nil when the send may land: 400
// TOPIC_DELETED for a deleted topic, 400 TOPIC_CLOSED for a closed one
// unless the account may manage topics there. It runs with w.mu held.
func (w *World) topicRefusal(account string, dest *chat, thread int64) error {
	if thread == 0 {
		return nil
	}
	if dest.deletedTopics[thread] {
		return errBadRequest("TOPIC_DELETED")
	}
	if t := dest.topics[thread]; t != nil && t.closed && !w.accounts[account].manageTopics[dest.id] {
		return errBadRequest("TOPIC_CLOSED")
	}
	return nil
}

// failSend ends a pending send with err as TDLib does: the temporary
// message becomes a failed message under a new local id, which stays in
// this session's view of the chat until it is deleted (deleteMessages),
// and the client receives updateMessageSendFailed naming both ids. The
// new id keeps the temporary message's place, after the server message
// the temporary id followed, however many messages the chat received
// since (MessagesManager::fail_send_message, "trying to keep message
// position"). A 429 starts a wait of the account's sends to the chat
// (floodwaits.go). It runs with w.mu held.
func (w *World) failSend(ps *pendingSend, err error) {
	c := ps.c
	id := c.localIDAfter(ps.tempID.ServerFloor())
	if c.failed == nil {
		c.failed = make(map[tg.ChatID]map[tg.MessageID]*failedMessage)
	}
	if c.failed[ps.dest.id] == nil {
		c.failed[ps.dest.id] = make(map[tg.MessageID]*failedMessage)
	}
	f := &failedMessage{err: err}
	if ps.msg != nil {
		f.msg = *ps.msg
	}
	f.msg.id, f.msg.chat = id, ps.dest.id
	c.failed[ps.dest.id][id] = f
	w.noteSendRefused(w.accounts[c.account], ps.dest.id, err)
	c.enqueue(tg.SendFailed{Chat: ps.dest.id, OldMessageID: ps.tempID, MessageID: id, Err: err})
}

// FailedMessages returns the failed local messages this session keeps in
// chat (sends that failed and were not deleted since), ascending.
func (c *Client) FailedMessages(chat tg.ChatID) []tg.MessageID {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	var out []tg.MessageID
	for id := range c.failed[chat] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// FailedMessages returns how many failed local messages the live sessions
// of account keep, over every chat.
func (w *World) FailedMessages(account string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.mustAccount(account).clients {
		for _, ids := range c.failed {
			n += len(ids)
		}
	}
	return n
}

// deleteFailed removes the failed local messages among ids from this
// session's view of chat and returns the ids that are none. TDLib deletes
// them locally: no other session sees them. It runs with w.mu held.
func (c *Client) deleteFailed(chat tg.ChatID, ids []tg.MessageID) (gone, rest []tg.MessageID) {
	for _, id := range ids {
		if c.failed[chat][id] != nil {
			delete(c.failed[chat], id)
			gone = append(gone, id)
			continue
		}
		rest = append(rest, id)
	}
	return gone, rest
}
