package tgsim

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"stashd/tg"
)

// Config configures a World. The zero Config is a perfect network: nothing
// dropped, no latency, no failures, seed 0.
type Config struct {
	// Seed seeds every random decision of the world (drops, failures, short
	// pages) and the identifiers it mints.
	Seed int64
	// DropRate is the probability that an updateNewMessage is not delivered
	// to a client (0..1). Zero drops nothing.
	DropRate float64
	// Latency is added to every request. Zero adds none.
	Latency time.Duration
	// SendLatency delays send outcomes and download completion. Zero delivers
	// them as soon as possible, but still asynchronously, as TDLib does.
	SendLatency time.Duration
	// SendFailRate is the probability that a send ends in
	// updateMessageSendFailed with a retryable 500-class error. Zero never
	// fails.
	SendFailRate float64
	// SendFloodRate is the probability that a send ends in
	// updateMessageSendFailed with 429 "Too Many Requests: retry after N",
	// N being SendFloodWait. Zero never.
	SendFloodRate float64
	// SendFloodWait is the retry-after of those 429s; zero means 1 s.
	SendFloodWait time.Duration
	// SendVanishRate is the probability that a pending send is deleted
	// instead: the client receives updateDeleteMessages for its temporary
	// id and neither success nor failure. Zero never.
	SendVanishRate float64
	// ResendAfterRestart models TDLib re-sending a closed client's pending
	// messages by itself: a send still pending when its client closes lands
	// only when the account's next client on the same database directory
	// starts, which re-sends it under a new temporary id of its own and
	// the current date and receives its outcome; a send more than a day
	// old fails instead, as TDLib fails it. When false, the send lands at
	// Close and its outcome reaches nobody.
	ResendAfterRestart bool
	// SearchIndexLag is how long the server takes to index a message for
	// searchChatMessages with a non-empty query: younger messages are not
	// found by one (an empty query lists them at once). Zero indexes at
	// once.
	SearchIndexLag time.Duration
	// StallDownloadRate is the probability that a download stops making
	// progress part-way and never completes: no further updateFile until
	// it is cancelled (cancelDownloadFile, deleteFile) or the client closes.
	// Zero never stalls.
	StallDownloadRate float64
	// FailDownloadRate is the probability that a download ends part-way
	// with updateFile neither active nor complete, as TDLib reports a
	// failed download. Zero never fails.
	FailDownloadRate float64
	// DownloadPartSize is the size in bytes of the parts a download
	// writes, each but the last reported by an updateFile. Zero means
	// TDLib's: 64 KiB, doubled while the file would take more than 4,000
	// parts, up to 512 KiB. Tests of small files set it to see a download
	// part-way.
	DownloadPartSize int
	// ShortPageRate is the probability that searchChatMessages returns fewer
	// messages than it could, as TDLib may. Zero always returns full pages.
	ShortPageRate float64
	// FilesDir is where downloads are written, one directory per account.
	// Downloads fail while it is empty.
	FilesDir string
	// ChannelGap is the number of undelivered updateNewMessage of one chat a
	// client may hold; further ones for that chat are dropped, as TDLib's
	// channel gaps do. Zero means 100.
	ChannelGap int
	// UnknownLastMessageRate is the probability that getChat reports a
	// chat's last message as unknown (chat.last_message null), as TDLib may
	// for a chat it has not synchronised. Zero always reports it.
	UnknownLastMessageRate float64
	// IgnorableErrorRate is the probability that a request fails with 406
	// (an error TDLib asks clients to drop silently; tg.ClassIgnored).
	// Zero never does.
	IgnorableErrorRate float64
	// Now is the world's clock; message dates come from it (truncated to
	// seconds, as TDLib dates are). Nil means time.Now.
	Now func() time.Time
	// ServerView answers every request from the server's truth, as if no
	// session kept a message database. Zero (false) gives each database
	// directory a local message store that answers the requests TDLib
	// answers locally (localview.go).
	ServerView bool
	// DifferenceDelay is how long TDLib's channel difference takes after
	// openChat: until then the session's database shows the chat as it
	// last knew it (getChat's last message, getChatHistory from the end),
	// and only then learns the newer messages and announces them. A
	// channel's difference after a reconnect takes as long, counted from
	// the reconnect; one due while the account is offline comes with the
	// next reconnect's. Zero learns them within the openChat request, and
	// at the reconnect.
	DifferenceDelay time.Duration
	// AccountNow, when set, is each account's own clock for the send log
	// (SendRecord.At): accounts paced on virtual clocks of their own are
	// then seen at their own times. Nil uses Now.
	AccountNow func(account string) time.Time
	// FloodSitOut is how much flood waiting TDLib does for one request
	// before it hands the client a 429 (sitout.go): a request other than
	// a send that the account's request limit refuses, and a send's
	// messages a chat's send limit refuses, are sent again once the wait
	// has passed while the waits sat out total no more than this. Zero
	// means TDLib's default, DefaultFloodSitOut; a negative value sits
	// out nothing, every wait reaching the client at once, as a wait
	// past TDLib's limit does (a test whose waits are seconds then stands
	// for longer ones).
	FloodSitOut time.Duration
}

// World is the ground truth the simulated TDLib clients look at: accounts,
// chats, topics, messages and file contents. All methods are safe for
// concurrent use. Methods that set the world up (AddChat, Post …) panic on an
// unknown account or chat: that is a mistake in the test, not a Telegram
// behaviour.
type World struct {
	cfg Config

	// mu guards the whole world and every client's state except its update
	// queue. Lock order: World.mu, then Client.qmu.
	mu       sync.Mutex
	rng      *rand.Rand
	accounts map[string]*account
	chats    map[tg.ChatID]*chat
	albumSeq int64                // the last album a client sent (SendDocumentAlbum)
	files    map[string]*file     // by unique id
	remotes  map[string]remoteRef // remote id -> owner and unique id
	nextChat int64
	nextUser int64
	nextFile int64
	boxSeq   int64 // the message box basic groups take server ids from
	serial   int32 // client instances started, for session-local ids
	logouts  int   // LogOut calls that logged an account out
	// sendStats counts send outcomes; vanished holds the captions of the
	// sends that ended in updateDeleteMessages.
	sendStats SendStats
	// sendLog records every accepted send (Sends).
	sendLog  []SendRecord
	vanished []string
	// topicGone holds the documents deleted with their forum topic
	// (DeleteTopic).
	topicGone []goneMessage
	// topicsClosed and topicsDeleted count CloseTopic and DeleteTopic.
	topicsClosed, topicsDeleted int
	holdSends                   bool
	// inFlight holds the sends started while HoldInFlight was on, until
	// LandInFlight; a client's Close leaves them in flight.
	holdInFlight bool
	inFlight     []*sendBatch
	// deletedIn counts the messages accounts deleted, by chat (Deleted).
	deletedIn map[tg.ChatID]int
	// mediaEdits records every editMessageMedia (EditMessageMedia).
	mediaEdits []MediaEdit
	// downloadFaults counts the stalls and failures injected into downloads.
	downloadFaults int
	// sessions records requests of overlapping sessions (sessions.go).
	sessions sessionLog
}

// SendStats counts the outcomes of the sends the world has settled.
type SendStats struct {
	Succeeded, Failed, FloodWaited, Vanished int
	// Resent counts sends of a closed client that landed when the account's
	// next client started (ResendAfterRestart).
	Resent int
	// TopicRefused counts sends the server refused because their forum
	// topic was closed or deleted (400 TOPIC_CLOSED, TOPIC_DELETED).
	TopicRefused int
	// WriteRefused counts sends the server refused because the account
	// may not post there, which its TDLib did not know
	// (SetServerWriteAccess).
	WriteRefused int
	// ChatFlooded counts sends a chat's send limit refused with 429
	// (LimitChatSends) past TDLib's sit-out.
	ChatFlooded int
	// ChatWaitsSatOut counts the waits a chat's send limit asked of a
	// send request that TDLib sat out (sitout.go), each wait once.
	ChatWaitsSatOut int
	// Expired counts sends of a closed client that the account's next
	// client failed unsent, being more than a day old.
	Expired int
}

// SendRecord is one sendMessage the world accepted: which account sent
// what where, and when by the world's clock (Config.Now, not truncated).
type SendRecord struct {
	Account string
	Chat    tg.ChatID
	// Thread is the forum topic the send went to; 0 for none.
	Thread  int64
	Caption string
	// Silent: the send asked for no notification (disable_notification).
	Silent bool
	// Album is the media_album_id of the album the message was sent in
	// (one sendMessageAlbum request); 0 for a lone sendMessage.
	Album int64
	At    time.Time
}

// Sends returns every send the world accepted, in order.
func (w *World) Sends() []SendRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.sendLog)
}

// SendStats returns the outcome counts of the sends settled so far.
func (w *World) SendStats() SendStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sendStats
}

// VanishedCaptions returns the captions of the sends that ended in
// updateDeleteMessages, in order.
func (w *World) VanishedCaptions() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.vanished)

}

// defaultChannelGap is how many pending updates TDLib tolerates per channel
// before it gives up on the difference and skips updateNewMessage.
const defaultChannelGap = 100

// NewWorld returns an empty world.
func NewWorld(cfg Config) *World {
	if cfg.ChannelGap <= 0 {
		cfg.ChannelGap = defaultChannelGap
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SendFloodWait <= 0 {
		cfg.SendFloodWait = time.Second
	}
	if cfg.FloodSitOut == 0 {
		cfg.FloodSitOut = DefaultFloodSitOut
	}
	return &World{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(uint64(cfg.Seed), 0x7467_7369_6d)), // "tgsim"
		accounts: make(map[string]*account),
		chats:    make(map[tg.ChatID]*chat),
		files:    make(map[string]*file),
		remotes:  make(map[string]remoteRef),
	}
}

// AddAccount registers a Telegram account. Adding an existing name only
// updates its Premium flag.
func (w *World) AddAccount(name string, premium bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a, ok := w.accounts[name]; ok {
		a.premium = premium
		return
	}
	w.nextUser++
	w.accounts[name] = &account{
		name:     name,
		userID:   7_000_000_000 + w.nextUser,
		premium:  premium,
		member:   make(map[tg.ChatID]bool),
		readOnly: make(map[tg.ChatID]bool), serverReadOnly: make(map[tg.ChatID]bool),
		calls:  make(map[string]int),
		flood:  make(map[string]floodInjection),
		errs:   make(map[string]errInjection),
		missed: make(map[tg.ChatID]bool),
	}
}

// AddChat creates a chat of the given kind with the given member accounts
// and returns its id. Channels, supergroups and forums get ids of the form
// -100xxxxxxxxxx; basic groups -xxxxxxxxxx; private chats a positive id.
// Basic groups take message ids from one shared message box, as Telegram
// numbers them per account: ids of one basic group jump whenever another
// basic group got a message meanwhile.
func (w *World) AddChat(kind tg.ChatKind, title string, members ...string) tg.ChatID {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextChat++
	id := tg.ChatID(-1_001_000_000_000 - w.nextChat)
	switch kind {
	case tg.KindPrivate:
		id = tg.ChatID(5_000_000_000 + w.nextChat)
	case tg.KindBasicGroup:
		id = tg.ChatID(-4_000_000_000 - w.nextChat)
	}
	c := &chat{
		id: id, kind: kind, title: title,
		isMem: make(map[string]bool), topics: make(map[int64]*topic), fileRefs: make(map[string]int),
	}
	w.chats[id] = c
	for _, m := range members {
		w.join(m, c)
	}
	return id
}

// SetUsername gives chat a public @username (without the @).
func (w *World) SetUsername(chat tg.ChatID, username string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustChat(chat).username = username
}

// Join makes account a member of chat. Joining twice is harmless.
func (w *World) Join(account string, chat tg.ChatID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.join(account, w.mustChat(chat))
}

func (w *World) join(name string, c *chat) {
	a := w.mustAccount(name)
	if c.isMem[name] {
		return
	}
	c.isMem[name] = true
	c.members = append(c.members, name)
	a.member[c.id] = true
}

// SetProtected gives chat protected content (has_protected_content), or
// takes it away: its messages then report can_be_saved false and their
// documents cannot be re-sent.
func (w *World) SetProtected(chat tg.ChatID, protected bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustChat(chat).protected = protected
}

// SetArchived moves chat to the archive chat list (or back to the main
// one). A client knows an archived chat only once it has loaded the
// archive list (LoadChats, or LoadChatList with archive set); before that
// getChat and openChat fail with "Chat not found".
func (w *World) SetArchived(chat tg.ChatID, archived bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustChat(chat).archived = archived
}

// SetLastMessageUnknown makes chat's last message unknown to every client
// (getChat reports none) or known again. While it is unknown, new messages
// are added without updateNewMessage or updateChatLastMessage, as TDLib may
// add them for a chat it has not synchronised.
func (w *World) SetLastMessageUnknown(chat tg.ChatID, unknown bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustChat(chat).lastUnknown = unknown
}

// UpgradeBasicGroup upgrades a basic group to a supergroup, as Telegram
// does when a group grows or an admin asks: a new supergroup chat (id
// -100…) with the same title and members, whose history starts with a
// service message (messageChatUpgradeFrom) and where messages continue.
// The old chat keeps its history and gets a last service message
// (messageChatUpgradeTo); clients that opened it receive that message, and
// every client of every member receives tg.ChatUpgraded (TDLib's
// updateBasicGroup with upgraded_to_supergroup_id). A member removed from
// the group (RemoveMember) is not carried over and is told nothing. It
// returns the new chat's id.
func (w *World) UpgradeBasicGroup(group tg.ChatID) tg.ChatID {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.mustChat(group)
	if old.kind != tg.KindBasicGroup || old.upgradedTo != 0 {
		panic(fmt.Sprintf("tgsim: UpgradeBasicGroup: chat %d is a %s (upgraded to %d)", group, old.kind, old.upgradedTo))
	}
	w.nextChat++
	c := &chat{
		id: tg.ChatID(-1_001_000_000_000 - w.nextChat), kind: tg.KindSupergroup, title: old.title,
		username: old.username, protected: old.protected, archived: old.archived,
		isMem: make(map[string]bool), topics: make(map[int64]*topic), fileRefs: make(map[string]int),
	}
	w.chats[c.id] = c
	// A member removed from the group (RemoveMember: chatForbidden to it)
	// is no participant the upgrade carries over, and hears nothing of it.
	for _, m := range old.members {
		if !w.accounts[m].removed[old.id] {
			w.join(m, c)
		}
	}
	w.publish(c, w.newMessage(c), nil) // messageChatUpgradeFrom
	m := w.newMessage(old)
	m.upgradedTo = c.id
	w.publish(old, m, nil)
	old.upgradedTo = c.id
	w.eachClient(old, func(cl *Client) {
		if !cl.removedFrom(old) {
			cl.enqueue(tg.ChatUpgraded{From: old.id, To: c.id})
		}
	})
	return c.id
}

// Post is one message to publish. Exactly one of Text, Data (with FileName)
// or SameFileAs is normally set.
type Post struct {
	// FileName and Data make a document message with a newly uploaded file
	// (a new unique id, even when the bytes were posted before).
	FileName string
	Data     []byte
	// Caption is the document's caption.
	Caption string
	// AlbumID groups documents into an album (media_album_id); zero is none.
	AlbumID int64
	// Text makes a text message when no document is given.
	Text string
	// SameFileAs re-posts the file with this unique id, like a forward: the
	// new message carries the same unique id, file name and bytes.
	SameFileAs string
}

// Post publishes a message in chat (in forum topic thread when thread is not
// zero) and returns it as seen by no particular account: its File has
// UniqueID and Size but no session-local ID or RemoteID.
func (w *World) Post(chat tg.ChatID, thread int64, p Post) tg.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	if thread != 0 && c.topics[thread] == nil {
		panic(fmt.Sprintf("tgsim: Post: chat %d has no topic %d", chat, thread))
	}
	if c.upgradedTo != 0 {
		panic(fmt.Sprintf("tgsim: Post: chat %d was upgraded to %d", chat, c.upgradedTo))
	}
	m := w.newMessage(c)
	if thread != 0 {
		m.thread, m.isTopic = thread, true
	}
	m.albumID, m.caption, m.text = p.AlbumID, p.Caption, p.Text
	c.setDoc(m, w.docFor(p))
	w.publish(c, m, nil)
	return w.neutralView(m)
}

// docFor stores the file a post carries and returns its reference, or nil
// for a text post.
func (w *World) docFor(p Post) *docRef {
	switch {
	case p.SameFileAs != "":
		f := w.files[p.SameFileAs]
		if f == nil {
			panic(fmt.Sprintf("tgsim: Post: no file with unique id %q", p.SameFileAs))
		}
		return &docRef{uid: f.uid, name: f.name, mime: f.mime}
	case p.FileName != "" || p.Data != nil:
		w.nextFile++
		f := &file{uid: w.mintUniqueID(w.nextFile), name: p.FileName, mime: mimeType(p.FileName), data: slices.Clone(p.Data)}
		w.files[f.uid] = f
		return &docRef{uid: f.uid, name: f.name, mime: f.mime}
	}
	return nil
}

// EditIntoDocument makes an existing message carry a document (and the
// post's caption), as when a channel admin edits media into an old post.
// Clients that opened the chat receive updateMessageContent; nothing else
// announces it.
func (w *World) EditIntoDocument(chat tg.ChatID, id tg.MessageID, p Post) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	m := c.find(id)
	if m == nil {
		panic(fmt.Sprintf("tgsim: EditIntoDocument: chat %d has no message %d", chat, id))
	}
	c.setDoc(m, w.docFor(p))
	m.caption, m.edited = p.Caption, w.now()
	if c.private || c.lostAccess {
		return
	}
	w.eachClient(c, func(cl *Client) {
		if cl.receivesMessages(c) {
			cl.relearn(m)
			cl.enqueue(tg.MessageContentChanged{Chat: c.id, Message: id})
		}
	})
}

// Messages returns the ground truth of chat, oldest first, as seen by no
// particular account (File has UniqueID and Size only).
func (w *World) Messages(chat tg.ChatID) []tg.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.mustChat(chat)
	out := make([]tg.Message, len(c.msgs))
	for i, m := range c.msgs {
		out[i] = w.neutralView(m)
	}
	return out
}

// FileData returns the bytes of the file with the given unique id, nil when
// there is none. The caller must not modify them.
func (w *World) FileData(uniqueID string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f := w.files[uniqueID]; f != nil {
		return f.data
	}
	return nil
}

// The TDLib the simulator stands for: version 1.8.40 at the commit
// go-tdlib v0.7.6 was generated from, as its "version" and "commit_hash"
// options report it.
const (
	TDLibVersion    = "1.8.40"
	TDLibCommitHash = "22d49d5b87a4d5fc60a194dab02dd1d71529687f"
)

// Client starts a fresh TDLib instance for account, like a process start:
// it has loaded no chats, opened none, and has its own session-local file
// ids and temporary message ids. Its first updates report the TDLib version
// and the connection state. It is ClientIn with the account's one database
// directory.
func (w *World) Client(account string) *Client { return w.ClientIn(account, "") }

// ClientIn starts a fresh TDLib instance for account on the database
// directory dir (a login of its own: another process's instance of the
// same account has another directory), like Client; what a closed
// instance on dir left pending it re-sends (ResendAfterRestart), and the
// deletions it left for the server it sends (DeleteMessages). Its
// downloads go to Config.FilesDir/<account>.
func (w *World) ClientIn(account, dir string) *Client { return w.ClientWithFiles(account, dir, "") }

// ClientWithFiles is ClientIn with the instance's files directory (TDLib's
// files_directory) at filesDir: downloads are written under its temp/
// and, once complete, moved to its documents/ (DownloadFile). "" means
// Config.FilesDir/<account>.
func (w *World) ClientWithFiles(account, dir, filesDir string) *Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	w.serial++
	c := newClient(w, a.name, w.serial)
	c.dir = dir
	c.filesDir = filesDir
	if filesDir == "" && w.cfg.FilesDir != "" {
		c.filesDir = filepath.Join(w.cfg.FilesDir, sanitize(a.name))
	}
	c.db = a.localDB(dir)
	a.clients = append(a.clients, c)
	c.enqueue(tg.OptionChanged{Name: "version", Value: TDLibVersion})
	c.enqueue(tg.OptionChanged{Name: "commit_hash", Value: TDLibCommitHash})
	state := tg.ConnReady
	if a.offline || !c.reachable(a) {
		state = tg.ConnConnecting
	}
	c.enqueue(tg.ConnectionStateChanged{State: state})
	// TDLib re-sends what the previous instance on its directory left
	// pending, under new temporary ids (send.go).
	pending := a.takeResend(dir)
	for len(pending) > 0 { // deferBatch keeps a batch's sends together
		n := 1
		for n < len(pending) && pending[n].batch == pending[0].batch {
			n++
		}
		w.resend(c, pending[:n])
		pending = pending[n:]
	}
	// And the deletions its binlog holds for the server (DeleteMessages).
	if !a.offline {
		w.sendPendingDeletes(c)
	}
	c.startDifference(a)
	return c
}

// --- internals; every function below runs with w.mu held ---

func (w *World) mustAccount(name string) *account {
	a := w.accounts[name]
	if a == nil {
		panic(fmt.Sprintf("tgsim: unknown account %q", name))
	}
	return a
}

func (w *World) mustChat(id tg.ChatID) *chat {
	c := w.chats[id]
	if c == nil {
		panic(fmt.Sprintf("tgsim: unknown chat %d", id))
	}
	return c
}

func (w *World) now() time.Time { return time.Unix(w.cfg.Now().Unix(), 0) }

// chance draws one random decision of probability p from the world's seeded
// generator.
func (w *World) chance(p float64) bool {
	switch {
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	return w.rng.Float64() < p
}

// newMessage appends an empty message with the chat's next server id.
func (w *World) newMessage(c *chat) *message {
	c.lastSeq++
	if c.kind == tg.KindBasicGroup {
		w.boxSeq++
		c.lastSeq = w.boxSeq
	}
	m := &message{id: tg.MessageIDFromServer(c.lastSeq), chat: c.id, date: w.now()}
	c.msgs = append(c.msgs, m)
	return m
}

// publish delivers a new message: updateNewMessage to clients that opened
// the chat (subject to DropRate and channel gaps), updateChatLastMessage to
// every client of every member that receives the chat's updates (a
// channel's or supergroup's only while opened: TDLib's openChat, "in
// supergroups and channels all updates are received only for opened
// chats"; the others learn it when they open it). skipNew is a client that learns about the
// message otherwise (the sender, through updateMessageSendSucceeded).
func (w *World) publish(c *chat, m *message, skipNew *Client) {
	if c.private || c.lastUnknown || c.lostAccess {
		return
	}
	w.eachFollower(c, func(cl *Client) {
		if cl != skipNew && !w.chance(w.cfg.DropRate) {
			cl.remember(m)
			cl.enqueue(tg.NewMessage{Message: cl.view(m)})
		}
		cl.announceLast(c, m.id)
	})
	w.eachOpenedNonMember(c, func(cl *Client) {
		if cl != skipNew && !w.chance(w.cfg.DropRate) {
			cl.enqueue(tg.NewMessage{Message: cl.view(m)})
		}
		cl.announceLast(c, m.id)
	})
}

func (w *World) lastMessageChanged(c *chat) {
	if c.private || c.lastUnknown || c.lostAccess {
		return
	}
	w.eachFollower(c, func(cl *Client) { cl.announceLast(c, c.lastID()) })
}

// eachFollower calls fn for every client of every member of c whose
// updates c reaches (Client.receivesMessages). A member removed from c is
// skipped; for a member offline, c is marked missed instead (its
// reconnect brings what changed). w.mu is held.
func (w *World) eachFollower(c *chat, fn func(*Client)) {
	for _, name := range c.members {
		a := w.accounts[name]
		if a.removed[c.id] {
			continue // removed from the chat: no update reaches it
		}
		if a.offline {
			a.markMissed(c.id)
			continue
		}
		for _, cl := range a.clients {
			if cl.receivesMessages(c) {
				fn(cl)
			}
		}
	}
}

// eachClient calls fn for every live, connected client of every member of c.
func (w *World) eachClient(c *chat, fn func(*Client)) {
	for _, name := range c.members {
		a := w.accounts[name]
		if a.offline {
			continue
		}
		for _, cl := range a.clients {
			fn(cl)
		}
	}
}
