package tgsim

import (
	"context"
	"sync"
	"time"

	"stashd/tg"
)

// Client is one simulated TDLib instance for one account. It implements
// tg.Client. Every method honours its context and Config.Latency, counts
// itself in World.Calls, and returns tg.ErrClosed after Close.
type Client struct {
	w       *World
	account string
	session int32  // see sessions.go
	dir     string // database directory (ClientIn)
	// filesDir is the instance's files directory (ClientWithFiles).
	filesDir string
	proxy    *tg.Proxy // added with AddProxy

	out      chan tg.Update
	done     chan struct{} // closed by Close
	pumpDone chan struct{}
	wake     chan struct{}
	wg       sync.WaitGroup // downloads and send timers

	// qmu guards the update queue only (see queue.go).
	qmu     sync.Mutex
	queue   []tg.Update
	pending map[tg.ChatID]int

	// The fields below are guarded by w.mu.
	closed bool
	// revoked: the session was logged out (LogOut); requests fail 401.
	revoked bool
	loaded  bool // the main chat list
	// archiveLoaded: the archive chat list has been loaded.
	archiveLoaded bool
	opened        map[tg.ChatID]bool
	// differing holds the chats whose delayed channel difference
	// (fetchDifference) is under way.
	differing map[tg.ChatID]bool
	// public holds the public channels this session resolved by name
	// without being a member (searchPublicChat): TDLib then knows them
	// and reads their history from the server.
	public     map[tg.ChatID]bool
	fileIDs    map[string]int32 // unique id -> session-local file id
	files      map[int32]*clientFile
	nextFileID int32
	tempSeq    int64
	sends      map[tg.MessageID]*pendingSend
	// failed holds the session's failed local messages by chat (see
	// topicstate.go): TDLib keeps a failed send in the chat, under a new
	// local id, until it is deleted.
	failed map[tg.ChatID]map[tg.MessageID]*failedMessage
	// db is the message database of the client's directory (localview.go).
	db *localDB
	// deleted holds the messages the instance learned were deleted for
	// good, by chat (knowsDeleted).
	deleted map[tg.ChatID]map[tg.MessageID]bool
	// left holds the chats this session learned it left when the server
	// refused a send there with CHANNEL_PRIVATE (see sendChat);
	// leftReported those it was told it left (reportLeft), heldReported
	// those it was told it is a member of since (reportHeld).
	left, leftReported, heldReported map[tg.ChatID]bool
}

// clientFile is a file as one TDLib instance knows it: its session-local id
// and local download state.
type clientFile struct {
	id         int32
	uid        string
	name       string
	localPath  string
	downloaded int64
	active     bool
	done       bool
	// cancel is closed to stop the running download (cancelDownloadFile,
	// deleteFile); nil while none runs.
	cancel chan struct{}
	// partial is the partial download TDLib kept (a download cancelled,
	// failed, or cut by a stop), of downloaded bytes; the next download
	// goes on from it. deleting: deleteFile stopped the running
	// download, which removes its partial file instead.
	partial  string
	deleting bool
}

var _ tg.Client = (*Client)(nil)

// fileIDStride separates the session-local file ids of successive clients,
// so that a file id that survives a restart by mistake names nothing (or
// another file) instead of silently working.
const fileIDStride = 10_000

func newClient(w *World, account string, serial int32) *Client {
	c := &Client{
		w:          w,
		account:    account,
		session:    serial,
		out:        make(chan tg.Update),
		done:       make(chan struct{}),
		pumpDone:   make(chan struct{}),
		wake:       make(chan struct{}, 1),
		pending:    make(map[tg.ChatID]int),
		opened:     make(map[tg.ChatID]bool),
		public:     make(map[tg.ChatID]bool),
		fileIDs:    make(map[string]int32),
		files:      make(map[int32]*clientFile),
		nextFileID: serial * fileIDStride,
		sends:      make(map[tg.MessageID]*pendingSend),
	}
	go c.pump()
	return c
}

// Account returns the name of the account the client is logged in as.
func (c *Client) Account() string { return c.account }

// Updates implements tg.Client. The channel is unbuffered: an update counts
// as delivered once the consumer has received it.
func (c *Client) Updates() <-chan tg.Update { return c.out }

// Close implements tg.Client. Sends still in flight complete in the world
// (their messages appear in the destination) but no outcome is delivered to
// anyone, unless Config.ResendAfterRestart holds them for the account's next
// client, or World.HoldInFlight holds them until World.LandInFlight;
// downloads in flight stop. A second Close returns tg.ErrClosed.
func (c *Client) Close() error {
	w := c.w
	w.mu.Lock()
	if c.closed {
		w.mu.Unlock()
		return tg.ErrClosed
	}
	c.closed = true
	w.accounts[c.account].removeClient(c)
	// The batches whose timer will never fire (or that have none), read
	// under w.mu: a sit-out re-arms a batch's timer (sitout.go).
	type stopped struct {
		b     *sendBatch
		timed bool
	}
	var land []stopped
	seen := make(map[*sendBatch]bool)
	for _, ps := range c.sends {
		b := ps.batch
		if seen[b] || b.inFlight && b.timer == nil {
			continue // an in-flight send lands at LandInFlight
		}
		seen[b] = true
		if b.timer == nil || b.timer.Stop() {
			land = append(land, stopped{b, b.timer != nil})
		}
	}
	w.mu.Unlock()

	close(c.done)
	for _, s := range land {
		// Land the messages now (or, when TDLib re-sends after a
		// restart, when the next client starts), in order, so the world
		// does not depend on a goroutine outliving the client.
		if w.cfg.ResendAfterRestart {
			w.deferBatch(s.b)
		} else {
			w.finishBatch(s.b)
		}
		if s.timed {
			c.wg.Done()
		}
	}
	c.wg.Wait()
	<-c.pumpDone
	return nil
}

// call runs one request: it fails on a closed client or done context,
// counts the request, applies Latency and any injected flood wait or
// error, then runs fn with w.mu held (answer: an fn that needs the server
// while the account is offline runs again once it is back). A request
// other than a send that the account's request limit refuses is sent again
// after the wait while TDLib sits it out (sitout.go), each try after
// Latency.
func call[T any](ctx context.Context, c *Client, method string, fn func() (T, error)) (T, error) {
	var zero T
	w := c.w
	var satOut time.Duration // the waits TDLib sat out for this request
	for try := 0; ; try++ {
		w.mu.Lock()
		if c.closed {
			w.mu.Unlock()
			return zero, tg.ErrClosed
		}
		if c.revoked {
			w.mu.Unlock()
			return zero, errUnauthorized()
		}
		if err := ctx.Err(); err != nil {
			w.mu.Unlock()
			return zero, err
		}
		a := w.accounts[c.account]
		var failure error
		if try == 0 { // TDLib's own tries are no requests of the client's
			a.calls[method]++
			if !tg.LocalMethod(method) { // answered by the session's own TDLib
				w.noteRequest(a, c, method)
				if !tg.SendMethod(method) { // a send is judged with its chat (sendDocs)
					w.noteRequestInWait(a, method, 0, false)
				}
			}
			failure = a.takeFlood(method)
		}
		var hold time.Duration
		if failure == nil {
			failure = a.admit(method, w.cfg.Now())
			if d, ok := w.sitOut(failure, satOut); ok && !tg.SendMethod(method) {
				hold = d
			}
		}
		if try == 0 { // injected answers are the client's, drawn once
			if injected := a.takeError(method); injected != nil {
				failure, hold = injected, 0
			} else if failure == nil && ignorable[method] && w.chance(w.cfg.IgnorableErrorRate) {
				failure = errIgnorable()
			}
		}
		if hold > 0 {
			a.satOut++
		}
		w.mu.Unlock()

		if err := c.sleep(ctx, w.cfg.Latency); err != nil {
			return zero, err
		}
		if hold > 0 {
			if err := c.sleep(ctx, hold); err != nil {
				return zero, err
			}
			satOut += hold
			continue
		}
		if failure != nil {
			w.noteFloodAnswer(a, method, failure)
			return zero, failure
		}
		return answer(ctx, c, fn)
	}
}

// ignorable are the methods Config.IgnorableErrorRate applies to: server
// requests that read history (the ones stashd repeats anyway).
var ignorable = map[string]bool{
	tg.MethodSearchChatMessages: true, tg.MethodGetMessage: true,
	tg.MethodGetChatMessageByDate: true, tg.MethodGetForumTopic: true,
}

func call0(ctx context.Context, c *Client, method string, fn func() error) error {
	_, err := call(ctx, c, method, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

// sleep waits d unless ctx ends or the client closes first.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return tg.ErrClosed
	}
}

// reportLeft tells the session, once, that the account left ch: TDLib's
// updateSupergroup with the status left, or updateBasicGroup with the
// status banned (ChatAccessLost). w.mu is held.
func (c *Client) reportLeft(ch *chat) {
	delete(c.heldReported, ch.id)
	if !hasStatus(ch) || c.leftReported[ch.id] {
		return
	}
	if c.leftReported == nil {
		c.leftReported = make(map[tg.ChatID]bool)
	}
	c.leftReported[ch.id] = true
	c.enqueue(tg.ChatAccessLost{Chat: ch.id})
}

// rejoin forgets that the session left ch: access is back, and TDLib
// hears the account's new status, a member (updateSupergroup or
// updateBasicGroup: ChatAccessHeld). w.mu is held.
func (c *Client) rejoin(ch *chat) {
	if ch.lostAccess || c.removedFrom(ch) {
		// Given back to others (or opened again) while this account is
		// still out: it is no member yet.
		return
	}
	delete(c.left, ch.id)
	delete(c.leftReported, ch.id)
	if c.knows(ch) {
		c.reportHeld(ch)
	}
}

// reportHeld tells the session the account is a member of ch, as TDLib
// does with updateSupergroup or updateBasicGroup (ChatAccessHeld): once,
// until a loss is reported (reportLeft). w.mu is held.
func (c *Client) reportHeld(ch *chat) {
	if !hasStatus(ch) || c.heldReported[ch.id] {
		return
	}
	if c.heldReported == nil {
		c.heldReported = make(map[tg.ChatID]bool)
	}
	c.heldReported[ch.id] = true
	c.enqueue(tg.ChatAccessHeld{Chat: ch.id})
}

// GetMe implements tg.Client.
func (c *Client) GetMe(ctx context.Context) (tg.User, error) {
	return call(ctx, c, tg.MethodGetMe, func() (tg.User, error) {
		a := c.w.accounts[c.account]
		return tg.User{ID: a.userID, Username: a.name, IsPremium: a.premium}, nil
	})
}

// GetChat implements tg.Client.
func (c *Client) GetChat(ctx context.Context, id tg.ChatID) (tg.Chat, error) {
	return call(ctx, c, tg.MethodGetChat, func() (tg.Chat, error) {
		ch, err := c.chat(id)
		if err != nil {
			return tg.Chat{}, err
		}
		out := tg.Chat{ID: ch.id, Kind: ch.kind, Title: ch.title, LastMessageID: c.lastMessage(ch), Protected: ch.protected}
		if ch.lastUnknown || c.w.chance(c.w.cfg.UnknownLastMessageRate) {
			out.LastMessageID = 0
		}
		if m := c.lastLocal(ch.id); m != nil && m.id > out.LastMessageID {
			// A message being sent, or failed, is the chat's last.
			out.LastMessageID = m.id
		}
		return out, nil
	})
}

// OpenChat implements tg.Client: channels, supergroups and forums deliver
// updateNewMessage only to clients that opened them. The first open
// fetches the chat's difference; a later one does nothing. A chat the
// account has no access to is answered ok and left closed, as TDLib's
// open_dialog does without an input peer to read it: access given back,
// the chat is not followed until it is opened again.
func (c *Client) OpenChat(ctx context.Context, id tg.ChatID) error {
	return call0(ctx, c, tg.MethodOpenChat, func() error {
		ch, err := c.chat(id)
		if err != nil {
			return err
		}
		if ch.lostAccess || c.removedFrom(ch) {
			return nil
		}
		if c.opened[id] {
			return nil // TDLib's open_dialog does nothing past the first open
		}
		c.opened[id] = true
		c.fetchDifference(ch)
		return nil
	})
}

// fetchDifference is TDLib's channel difference when the session opens
// ch (MessagesManager::open_dialog sends get_channel_difference and
// returns): the session learns what changed in ch (differ). w.mu is held.
func (c *Client) fetchDifference(ch *chat) {
	c.differ(ch, func() {
		c.learnDifference(ch)
		c.catchUpLast(ch)
	})
}

// differ runs learn, a channel difference of ch, at once or, with
// DifferenceDelay, that much later (a client closing meanwhile learns
// nothing, and its Close does not wait for the delay). One asked for while
// the chat's difference is under way is that one, as in TDLib
// (get_channel_difference runs once per channel at a time). A delayed
// difference due while the account is away does not come: the chat is
// marked missed, and the reconnect brings it. w.mu is held, and is held
// again while the delayed learn runs.
func (c *Client) differ(ch *chat, learn func()) {
	if c.w.cfg.DifferenceDelay <= 0 {
		learn()
		return
	}
	if c.differing[ch.id] {
		return
	}
	if c.differing == nil {
		c.differing = make(map[tg.ChatID]bool)
	}
	c.differing[ch.id] = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if c.sleep(context.Background(), c.w.cfg.DifferenceDelay) != nil {
			return // closed
		}
		c.w.mu.Lock()
		defer c.w.mu.Unlock()
		delete(c.differing, ch.id)
		if a := c.w.accounts[c.account]; a.offline {
			a.markMissed(ch.id)
			return
		}
		learn()
	}()
}

// GetMessage implements tg.Client: from the session's database when it
// holds the message, from the server otherwise (waiting while the account
// is offline).
func (c *Client) GetMessage(ctx context.Context, chat tg.ChatID, id tg.MessageID) (tg.Message, error) {
	return call(ctx, c, tg.MethodGetMessage, func() (tg.Message, error) {
		ch, err := c.serverChat(chat)
		if err != nil {
			return tg.Message{}, err
		}
		if m, _, _ := c.localMessage(chat, id); m != nil {
			return c.view(m), nil
		}
		if m, ok := c.stored(ch, id); ok {
			return c.view(m), nil
		}
		if c.knowsDeleted(chat, id) {
			return tg.Message{}, errMessageNotFound()
		}
		if c.asksServerFor(ch, id) {
			if err := c.needsServer(); err != nil {
				return tg.Message{}, err
			}
		}
		m := ch.find(id)
		if m == nil || len(c.hideTooNew(ch, []*message{m})) == 0 {
			return tg.Message{}, errMessageNotFound()
		}
		c.remember(m)
		return c.view(m), nil
	})
}

// GetChatMessageByDate implements tg.Client: the newest message dated at or
// before date; like TDLib, a 404 (ErrMessageNotFound) when there is none.
// As TDLib, the session first looks at the chat's last message as it
// knows it (lastByDate): when that is not newer than date it is the
// answer, although the server may hold newer messages the session has not
// learned, and although it may be the session's own message being sent or
// failed. Otherwise the server answers (waiting while the account is
// offline).
func (c *Client) GetChatMessageByDate(ctx context.Context, chat tg.ChatID, date time.Time) (tg.Message, error) {
	return call(ctx, c, tg.MethodGetChatMessageByDate, func() (tg.Message, error) {
		ch, err := c.serverChat(chat)
		if err != nil {
			return tg.Message{}, err
		}
		if m := c.lastByDate(ch, date); m != nil {
			return c.view(m), nil
		}
		if err := c.needsServer(); err != nil {
			return tg.Message{}, err
		}
		for i := len(ch.msgs) - 1; i >= 0; i-- {
			if !ch.msgs[i].date.After(date) {
				return c.view(ch.msgs[i]), nil
			}
		}
		return tg.Message{}, errMessageNotFound()
	})
}

// GetForumTopic implements tg.Client, from the server (waiting while the
// account is offline). LastMessageID is 0 when no message of the topic is
// left.
func (c *Client) GetForumTopic(ctx context.Context, chat tg.ChatID, thread int64) (tg.Topic, error) {
	return call(ctx, c, tg.MethodGetForumTopic, func() (tg.Topic, error) {
		ch, err := c.serverChat(chat)
		if err != nil {
			return tg.Topic{}, err
		}
		if ch.kind != tg.KindForum {
			return tg.Topic{}, errBadRequest("Chat is not a forum")
		}
		if err := c.needsServer(); err != nil {
			return tg.Topic{}, err
		}
		if ch.topics[thread] == nil {
			return tg.Topic{}, errBadRequest("Topic not found")
		}
		return c.w.topicView(ch, thread), nil
	})
}

// chat resolves a chat for a request: unknown before its chat list is
// loaded and to non-members, CHANNEL_PRIVATE once access is lost.
func (c *Client) chat(id tg.ChatID) (*chat, error) {
	ch := c.w.chats[id]
	if ch != nil && !ch.isMem[c.account] && c.public[id] && !ch.private {
		return ch, nil // a public channel read without joining it
	}
	if !c.knows(ch) {
		return nil, errChatNotFound()
	}
	if ch.private {
		return nil, errChannelPrivate()
	}
	return ch, nil
}

// knows reports whether this session's TDLib knows ch as a chat of the
// account's: a member's chat, loaded (loadChats, or the archive's).
func (c *Client) knows(ch *chat) bool {
	return ch != nil && ch.isMem[c.account] && (c.loaded || ch.archived) && (!ch.archived || c.archiveLoaded)
}

// sendChat resolves the chat a send goes to as TDLib judges the send
// before making it, from what the session knows
// (can_send_message_to_dialog). A chat the session was told it left (the
// account lost access: ChatAccessLost), or learned it left when the
// server refused a send, is refused at once with 400 "Have no write
// access to the chat". A chat made private on the server alone passes:
// the session does not know, and the server refuses the send when it
// arrives (settleSend). w.mu is held.
func (c *Client) sendChat(id tg.ChatID) (*chat, error) {
	ch := c.w.chats[id]
	switch {
	case !c.knows(ch):
		return c.chat(id)
	case ch.lostAccess || c.left[id] || c.removedFrom(ch):
		return nil, errBadRequest("Have no write access to the chat")
	case ch.private:
		return ch, nil
	}
	return c.chat(id)
}

// learnLeft is TDLib's answer to the server's CHANNEL_PRIVATE for a send:
// it takes the account as having left ch (on_get_channel_error emulates
// leaving: updateSupergroup with status left, ChatAccessLost at the port)
// before it reports the send failed. w.mu is held.
func (c *Client) learnLeft(ch *chat) {
	if c.left[ch.id] {
		return
	}
	if c.left == nil {
		c.left = make(map[tg.ChatID]bool)
	}
	c.left[ch.id] = true
	c.reportLeft(ch)
}

// serverChat resolves a chat for a request TDLib sends to the server: like
// chat, and it fails with "Can't access the chat" once access is lost.
func (c *Client) serverChat(id tg.ChatID) (*chat, error) {
	ch, err := c.chat(id)
	if err == nil && (ch.lostAccess || c.removedFrom(ch)) {
		return nil, errNoAccess()
	}
	return ch, err
}

// fileAccessLost reports whether every chat through which this account
// could see the file with unique id uid has been lost, by every member or
// by this account alone (removed from it): downloading it is then a
// server call TDLib cannot make.
func (c *Client) fileAccessLost(uid string) bool {
	lost := false
	for _, ch := range c.w.chats {
		if ch.fileRefs[uid] == 0 || !ch.isMem[c.account] {
			continue
		}
		if !ch.lostAccess && !c.removedFrom(ch) {
			return false
		}
		lost = true
	}
	return lost
}

// receivesMessages reports whether updateNewMessage of ch reach this client:
// supergroups and channels only while opened; other chats always.
func (c *Client) receivesMessages(ch *chat) bool {
	switch ch.kind {
	case tg.KindChannel, tg.KindSupergroup, tg.KindForum:
		return c.opened[ch.id]
	}
	return true
}

// view renders m as this client sees it: session-local file id, this
// account's remote id, local download state.
func (c *Client) view(m *message) tg.Message {
	out := baseView(m)
	if ch := c.w.chats[m.chat]; ch != nil && ch.protected {
		out.Protected = true
	}
	if m.doc != nil {
		f := c.w.files[m.doc.uid]
		out.Document = &tg.Document{FileName: m.doc.name, MimeType: m.doc.mime, File: c.fileView(c.file(f))}
	}
	return out
}

// file returns the client's record of f, assigning a session-local id the
// first time the client sees it.
func (c *Client) file(f *file) *clientFile {
	if id, ok := c.fileIDs[f.uid]; ok {
		return c.files[id]
	}
	c.nextFileID++
	cf := &clientFile{id: c.nextFileID, uid: f.uid, name: f.name}
	c.fileIDs[f.uid] = cf.id
	c.files[cf.id] = cf
	c.recallFile(cf)
	return cf
}

func (c *Client) fileView(cf *clientFile) tg.File {
	return tg.File{
		ID:             cf.id,
		Size:           int64(len(c.w.files[cf.uid].data)),
		RemoteID:       c.w.remoteID(c.account, cf.uid),
		UniqueID:       cf.uid,
		LocalPath:      cf.localPath,
		Downloaded:     cf.downloaded,
		DownloadDone:   cf.done,
		DownloadActive: cf.active,
	}
}
