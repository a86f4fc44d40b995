package tgsim

import (
	"context"
	"time"

	"stashd/tg"
)

// pendingSend is a message between sendMessage and its outcome. The outcome
// is decided when the send is made (so the world's random stream does not
// depend on timer order) and applied when the timer fires or the client
// closes, whichever comes first.
type pendingSend struct {
	c       *Client
	tempID  tg.MessageID
	dest    *chat
	thread  int64 // forum topic; 0 for none
	uid     string
	caption string
	// album is the media_album_id of the album the send is part of; 0
	// for a lone send.
	album   int64
	outcome sendOutcome
	// limitErr is the chat's send limit refusing the send (429), decided
	// when it was made; nil when admitted.
	limitErr error
	// at is when the send was made (the world's clock), for TDLib's
	// one-day limit on re-sending after a restart.
	at time.Time
	// msg is the temporary message, in the sending session's view of dest
	// until the send settles.
	msg     *message
	batch   *sendBatch
	settled bool
}

// sendBatch is the sends one request made (an album's messages, or one
// message) and the timer that settles them together, in order; the timer
// is nil while sends are held (World.HoldSends, World.HoldInFlight).
type sendBatch struct {
	timer *time.Timer
	sends []*pendingSend
	// inFlight: held by HoldInFlight, landed by LandInFlight only, whether
	// or not its client has closed meanwhile.
	inFlight bool
	// satOut is the flood waits TDLib sat out for the request
	// (sitout.go).
	satOut time.Duration
}

// sendOutcome is how a pending send ends.
type sendOutcome int

const (
	sendSucceeds sendOutcome = iota
	sendFails                // updateMessageSendFailed, 500
	sendFloods               // updateMessageSendFailed, 429 retry after N
	sendVanishes             // updateDeleteMessages for the temporary id
	sendNotSent              // updateMessageSendFailed, 400 "Message was not sent": an album's message the answer left out
)

// drawOutcome draws how account a's next send request ends: from its
// injected outcomes when it has any (InjectSendFailures: one per message,
// consumed by startSend), else by SendFailRate, SendFloodRate and
// SendVanishRate, once for the whole request, as TDLib ends every message
// of a sendMessageAlbum the server refused with the request's error. w.mu
// is held.
func (w *World) drawOutcome(a *account) sendOutcome {
	switch {
	case len(a.sendFails) > 0:
		return sendSucceeds
	case w.chance(w.cfg.SendFailRate):
		return sendFails
	case w.chance(w.cfg.SendFloodRate):
		return sendFloods
	case w.chance(w.cfg.SendVanishRate):
		return sendVanishes
	}
	return sendSucceeds
}

// SendDocument implements tg.Client: sendMessage with inputFileRemote. The
// account must be a member of chat and the remote id must be this account's
// remote id of a file it can see (posted in an accessible chat it is a
// member of); otherwise the request fails with 400. It returns a temporary
// message (a local id, not a multiple of 2^20); after SendLatency the world
// appends the real message to chat and the client receives SendSucceeded;
// or, with probability SendFailRate, SendFailed (500); with SendFloodRate,
// SendFailed with a 429 flood wait; with SendVanishRate, MessagesDeleted for
// the temporary id and nothing lands.
func (c *Client) SendDocument(ctx context.Context, chat tg.ChatID, remoteFileID, caption string) (tg.Message, error) {
	return c.SendDocumentTo(ctx, chat, 0, remoteFileID, caption, tg.SendOptions{})
}

// SendDocumentTo implements tg.Client: SendDocument into forum topic
// thread of chat; the message lands in that topic. Like TDLib, a thread on
// a chat that is not a supergroup or forum fails with 400 "Chat doesn't
// have threads", and one that is no topic of the forum with 400 "Invalid
// message thread ID specified". Thread 0 in a forum is its General topic.
func (c *Client) SendDocumentTo(ctx context.Context, chat tg.ChatID, thread int64, remoteFileID, caption string, opts tg.SendOptions) (tg.Message, error) {
	return call(ctx, c, tg.MethodSendMessage, func() (tg.Message, error) {
		ms, err := c.sendDocs(tg.MethodSendMessage, chat, thread, []tg.AlbumItem{{RemoteFileID: remoteFileID, Caption: caption}}, opts)
		if err != nil {
			return tg.Message{}, err
		}
		return ms[0], nil
	})
}

// checkThread refuses a send into thread of dest as TDLib does: dest has
// no topics, or thread is not one of them. w.mu is held.
func checkThread(dest *chat, thread int64) error {
	if thread == 0 {
		return nil
	}
	switch {
	case dest.kind != tg.KindForum && dest.kind != tg.KindSupergroup:
		return errBadRequest("Chat doesn't have threads")
	case !tg.MessageID(thread).IsServer() || dest.topics[thread] == nil && !dest.deletedTopics[thread]:
		// TDLib knows no such topic; one deleted since it was seen goes
		// to the server, which refuses it (TOPIC_DELETED, see
		// topicRefusal).
		return errBadRequest("Invalid message thread ID specified")
	}
	return nil
}

// checkItem returns the file remoteFileID names, or the error TDLib
// refuses a document with caption with: a caption too long, a remote id of
// another account's, a file the account cannot see, or protected content.
// w.mu is held.
func (c *Client) checkItem(remoteFileID, caption string) (*file, error) {
	w := c.w
	if captionTooLong(caption) {
		return nil, errBadRequest("Message caption is too long")
	}
	ref, ok := w.remotes[remoteFileID]
	if !ok || ref.account != c.account {
		return nil, errBadRequest("Wrong remote file identifier specified: can't unserialize it")
	}
	if !w.canSee(w.accounts[c.account], ref.uid) {
		return nil, errBadRequest("FILE_REFERENCE_INVALID")
	}
	if w.onlyProtected(w.accounts[c.account], ref.uid) {
		return nil, errProtectedContent()
	}
	return w.files[ref.uid], nil
}

// startSend makes the temporary message of a send of f into thread of dest
// (of album, when not 0) that ends as outcome unless an injected outcome
// decides (InjectSendFailures: a lone message fails with 500, an album's
// is left out of the server's answer); limitErr is the chat's send limit
// refusing it. It returns the pending send, for settleLater, and the
// temporary message. w.mu is held.
func (c *Client) startSend(dest *chat, thread int64, f *file, caption string, opts tg.SendOptions, album int64, outcome sendOutcome, limitErr error) (*pendingSend, tg.Message) {
	w := c.w
	tempID := c.nextTempID(dest)
	tmp := &message{id: tempID, chat: dest.id, date: w.now(), caption: caption, albumID: album,
		doc: &docRef{uid: f.uid, name: f.name, mime: f.mime}, thread: thread, isTopic: thread != 0}

	ps := &pendingSend{c: c, tempID: tempID, dest: dest, thread: thread, uid: f.uid, caption: caption, album: album,
		at: tmp.date, limitErr: limitErr, outcome: outcome, msg: tmp}
	if a := w.accounts[c.account]; len(a.sendFails) > 0 {
		switch {
		case !a.sendFails[0]:
			ps.outcome = sendSucceeds
		case album != 0:
			ps.outcome = sendNotSent
		default:
			ps.outcome = sendFails
		}
		a.sendFails = a.sendFails[1:]
	}
	c.sends[tempID] = ps
	c.announceSend(ps)
	at := w.cfg.Now()
	if w.cfg.AccountNow != nil {
		at = w.cfg.AccountNow(c.account)
	}
	w.sendLog = append(w.sendLog, SendRecord{Account: c.account, Chat: dest.id, Thread: thread, Caption: caption,
		Silent: opts.Silent, Album: album, At: at})
	return ps, c.view(tmp)
}

// settleLater settles pss, in order, after SendLatency (an album's
// messages land together, under consecutive ids), after the reconnect
// when the account is offline, or when the client closes while sends are
// held. w.mu is held.
func (c *Client) settleLater(pss []*pendingSend) {
	w := c.w
	b := &sendBatch{sends: pss}
	for _, ps := range pss {
		ps.batch = b
	}
	if w.holdInFlight {
		b.inFlight = true
		w.inFlight = append(w.inFlight, b)
		return // settled by LandInFlight
	}
	if w.holdSends {
		return // settled by Close
	}
	if a := w.accounts[c.account]; a.offline {
		a.unsent = append(a.unsent, b) // armed at the reconnect, or landed by Close
		return
	}
	c.armSend(b)
}

// armSend settles b after SendLatency. w.mu is held.
func (c *Client) armSend(b *sendBatch) {
	w := c.w
	c.wg.Add(1)
	b.timer = time.AfterFunc(w.cfg.SendLatency, func() {
		defer c.wg.Done()
		w.finishBatch(b)
	})
}

// nextTempID returns a new temporary message id in dest: between the
// chat's last server id and the next one, as TDLib's yet-unsent message
// ids are. The low bits come from a per-client counter so that temporary
// ids never repeat within a client, whatever the chat. w.mu is held.
func (c *Client) nextTempID(dest *chat) tg.MessageID {
	return c.localIDAfter(dest.lastSeq)
}

// localIDAfter returns a new local message id between server id seq and
// the next one. w.mu is held.
func (c *Client) localIDAfter(seq int64) tg.MessageID {
	c.tempSeq++
	return tg.MessageIDFromServer(seq) + tg.MessageID(1+(c.tempSeq-1)%(1<<tg.ServerIDShift-1))
}

// resendMaxAge is how old a pending message TDLib still re-sends after a
// restart; an older one fails with errTooOldToResend.
const resendMaxAge = 24 * time.Hour

// errTooOldToResend is TDLib's failure of a pending message more than
// resendMaxAge old at start-up (MessagesManager::continue_send_message).
func errTooOldToResend() error {
	return errBadRequest("Message is too old to be re-sent automatically")
}

// resend re-sends, from new client c, a send a closed client on its
// database directory left pending, as TDLib does at start-up from its
// binlog (continue_send_message): under a new temporary id of c's, dated
// now, announced to c as a send's start is (updateNewMessage,
// updateChatLastMessage), then settled. One more than a day old is not
// sent: it fails with 400 "Message is too old to be re-sent
// automatically" and stays in c's view as a failed message. The server
// judges a re-sent message as it does any send reaching it: the chat's
// send limit may refuse it (429), and one inside a flood wait that holds
// it is noted (floodwaits.go). w.mu is held.
func (w *World) resend(c *Client, pss []*pendingSend) {
	var live []*pendingSend
	for _, ps := range pss {
		tooOld := w.now().Sub(ps.at) > resendMaxAge
		ps.c = c
		old := ps.tempID
		for ps.tempID == old { // a new id, never the one the closed client knew
			ps.tempID = c.nextTempID(ps.dest)
		}
		ps.at = w.now()
		if ps.msg != nil {
			m := *ps.msg
			m.id, m.date = ps.tempID, ps.at
			ps.msg = &m
			c.announceSend(ps)
		}
		if tooOld {
			ps.settled = true
			w.sendStats.Expired++
			w.failSend(ps, errTooOldToResend())
			continue
		}
		live = append(live, ps)
	}
	if len(live) == 0 {
		return
	}
	// One request, as the closed client's was (an album's messages
	// together): judged once by the chat's limit, sat out together.
	dest := live[0].dest
	w.noteRequestInWait(w.accounts[c.account], tg.MethodSendMessage, dest.id, true)
	var limitErr error
	if l := dest.sendLimit; l != nil {
		limitErr = l.admitSend(c.account, w.cfg.Now(), len(live))
	}
	b := &sendBatch{sends: live}
	for _, ps := range live {
		ps.limitErr = limitErr
		ps.batch = b
		c.sends[ps.tempID] = ps
		w.sendStats.Resent++
	}
	w.settleBatch(b)
}

// announceSend tells ps's session of its temporary message as TDLib does
// when the send starts, before its answer: updateNewMessage (the message
// being sent) and updateChatLastMessage (it is the chat's last;
// localmsgs.go). The database's last message, which stands for the last
// one learned from the server, does not move. w.mu is held.
func (c *Client) announceSend(ps *pendingSend) {
	c.enqueue(tg.NewMessage{Message: c.view(ps.msg)})
	c.enqueue(tg.ChatLastMessage{Chat: ps.dest.id, LastMessageID: ps.tempID})
}

// HoldSends makes the sends started while hold is true wait for their
// client to close before they settle, as when the process dies between
// sendMessage and its outcome (downloads keep their pace).
func (w *World) HoldSends(hold bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holdSends = hold
}

// HoldInFlight makes the sends started while hold is true stay in flight
// until LandInFlight, also past their client's Close: the request has left
// the client and reached the server, which posts the message a little
// later, as when a session is closed (a remote logout, a stop) right after
// sendMessage. The message then lands in the chat, and every other session
// that follows the chat is told of it (updateNewMessage) as of any post;
// the closed session hears nothing. A session still open when the send
// lands gets its outcome as usual.
func (w *World) HoldInFlight(hold bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holdInFlight = hold
}

// LandInFlight lands the sends HoldInFlight held, in the order they were
// made, and returns how many batches (requests) it landed.
func (w *World) LandInFlight() int {
	w.mu.Lock()
	held := w.inFlight
	w.inFlight = nil
	w.mu.Unlock()
	for _, b := range held {
		w.finishBatch(b)
	}
	return len(held)
}

// finishBatch applies the outcomes of b's sends, once each, in order and
// under one lock, so an album's messages land together. A message lands in
// the destination even when the sending client has closed meanwhile; only
// the outcome update is then lost.
func (w *World) finishBatch(b *sendBatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.settleBatch(b)
}

// settleBatch applies the outcomes of b's sends, in order, unless TDLib
// sits out the wait a chat's send limit refused them with (sitout.go).
// w.mu is held.
func (w *World) settleBatch(b *sendBatch) {
	if w.sitOutSends(b) {
		return
	}
	for _, ps := range b.sends {
		w.settleSend(ps)
	}
}

// deferBatch keeps a closed client's pending sends of b for the account's
// next client on the same database directory, which TDLib re-sends them
// from (its binlog).
func (w *World) deferBatch(b *sendBatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ps := range b.sends {
		if !ps.settled {
			a := w.accounts[ps.c.account]
			a.resend = append(a.resend, ps)
		}
	}
}

// settleSend applies one send's outcome, once; w.mu is held.
func (w *World) settleSend(ps *pendingSend) {
	if ps.settled {
		return
	}
	ps.settled = true
	c := ps.c
	delete(c.sends, ps.tempID)
	if ps.limitErr != nil {
		w.sendStats.ChatFlooded++
		w.failSend(ps, ps.limitErr)
		return
	}
	if ps.outcome != sendVanishes {
		// The server judges the sender's rights and the topic when the
		// send reaches it.
		if ps.dest.private || ps.dest.lostAccess || c.removedFrom(ps.dest) {
			// The account is no member any more: the session learns it
			// left, then hears the send failed.
			w.sendStats.WriteRefused++
			c.learnLeft(ps.dest)
			refusal := errChannelPrivate()
			if w.accounts[c.account].banned[ps.dest.id] {
				refusal = errUserBanned()
			}
			w.failSend(ps, refusal)
			return
		}
		if err := w.writeRefusal(c.account, ps.dest); err != nil {
			w.sendStats.WriteRefused++
			w.failSend(ps, err)
			return
		}
		if err := w.topicRefusal(c.account, ps.dest, ps.thread); err != nil {
			w.sendStats.TopicRefused++
			w.failSend(ps, err)
			return
		}
	}
	switch ps.outcome {
	case sendFails:
		w.sendStats.Failed++
		w.failSend(ps, errSendFailed())
		return
	case sendNotSent:
		w.sendStats.Failed++
		w.failSend(ps, errBadRequest("Message was not sent"))
		return
	case sendFloods:
		w.sendStats.FloodWaited++
		w.failSend(ps, errFloodWait(w.cfg.SendFloodWait))
		return
	case sendVanishes:
		w.sendStats.Vanished++
		w.vanished = append(w.vanished, ps.caption)
		c.enqueue(tg.MessagesDeleted{Chat: ps.dest.id, IDs: []tg.MessageID{ps.tempID}, IsPermanent: true})
		return
	}
	w.sendStats.Succeeded++
	m := w.newMessage(ps.dest)
	m.caption = ps.caption
	m.sender = c.account
	m.albumID = ps.album
	if ps.thread != 0 {
		m.thread, m.isTopic = ps.thread, true
	}
	f := w.files[ps.uid]
	ps.dest.setDoc(m, &docRef{uid: f.uid, name: f.name, mime: f.mime})
	c.remember(m)
	c.enqueue(tg.SendSucceeded{Message: c.view(m), OldMessageID: ps.tempID})
	w.publish(ps.dest, m, c)
}

// CreateForumTopic implements tg.Client: like World.AddTopic, made by the
// account, which must be a member of chat with write access. A chat that
// is not a forum fails with 400 "The chat is not a forum" as in TDLib. As
// TDLib does, the name is cleaned first (tg.CleanTopicName); one that
// cleans to nothing fails with 400 "Name must be non-empty".
// World.Calls counts the requests (createForumTopic).
func (c *Client) CreateForumTopic(ctx context.Context, chat tg.ChatID, name string) (int64, error) {
	return call(ctx, c, tg.MethodCreateForumTopic, func() (int64, error) {
		w := c.w
		ch, err := c.serverChat(chat)
		if err != nil {
			return 0, err
		}
		if ch.kind != tg.KindForum {
			return 0, errBadRequest("The chat is not a forum")
		}
		if w.accounts[c.account].readOnly[chat] {
			return 0, errBadRequest("Not enough rights to create a topic")
		}
		// TDLib cleans the name before it reaches the server
		// (clean_name: spaces folded, cut to 128 characters).
		name = tg.CleanTopicName(name)
		if name == "" {
			return 0, errBadRequest("Name must be non-empty")
		}
		if err := c.needsServer(); err != nil {
			return 0, err
		}
		return w.addTopic(ch, name, c.account), nil
	})
}
