package tgsim

import (
	"maps"
	"slices"
	"time"

	"stashd/tg"
)

// account is a Telegram account: its memberships, live clients, request
// counts, injected flood waits and connection state.
type account struct {
	name    string
	userID  int64
	premium bool
	member  map[tg.ChatID]bool
	// readOnly holds chats the account is a member of without write
	// access, as its sessions' TDLib knows it (SetWriteAccess).
	readOnly map[tg.ChatID]bool
	// serverReadOnly holds the same as the server knows it: it differs
	// from readOnly while an update that would tell the sessions is lost
	// (SetServerWriteAccess).
	serverReadOnly map[tg.ChatID]bool
	// canDelete holds chats where the account may delete others'
	// messages (SetDeleteRights); nil until set.
	canDelete map[tg.ChatID]bool
	// removed holds chats the account alone was removed from
	// (RemoveMember); nil until set.
	removed map[tg.ChatID]bool
	// banned holds those of them it was banned from (BanMember).
	banned map[tg.ChatID]bool
	// manageTopics holds forums where the account may manage topics
	// (can_manage_topics: close, reopen, post in closed topics); nil
	// until set.
	manageTopics map[tg.ChatID]bool
	clients      []*Client // live clients, oldest first
	// activeSession is the newest session that has made a request
	// (sessions.go).
	activeSession int32
	calls         map[string]int
	flood         map[string]floodInjection
	errs          map[string]errInjection
	// limit is Telegram's request limit on the account (LimitRequests);
	// nil: none.
	limit *requestLimit
	// satOut counts the flood waits TDLib sat out for the account
	// (sitout.go).
	satOut int

	// offline is set between Disconnect and the reconnect; missed collects
	// the chats whose last message changed meanwhile.
	offline    bool
	offlineGen int
	reconnect  *time.Timer
	missed     map[tg.ChatID]bool
	missedList []tg.ChatID
	// back is closed at the reconnect that ends the offline window
	// (downloads wait on it).
	back chan struct{}
	// unsent holds the sends made while offline: TDLib keeps them pending
	// until its connection is back, and they land SendLatency after the
	// reconnect (or as a closed client's pending sends do).
	unsent []*sendBatch

	// proxyOnly, when set, is the only proxy server through which the
	// account reaches Telegram (RequireProxy).
	proxyOnly string

	// loggedOut is set by LogOut until LogIn (logout.go).
	loggedOut bool

	// login, when set, makes sessions on new database directories log in
	// first (RequireLogin).
	login *login

	// resend holds the sends a closed client left pending, for the next
	// client on its database directory (Config.ResendAfterRestart).
	resend []*pendingSend
	// sendFails decides the outcomes of the next messages sent
	// (InjectSendFailures): true fails one.
	sendFails []bool
	// local holds each database directory's message store (localview.go).
	local map[string]*localDB
	// holds are the flood waits the world asked of the account, by what
	// they hold, until when; breaches the requests made inside one
	// (floodwaits.go).
	holds    map[floodHold]floodSpan
	breaches []FloodWaitBreach
}

// errInjection is a pending InjectError.
type errInjection struct {
	err       error
	remaining int
}

// floodInjection is a pending InjectFloodWait.
type floodInjection struct {
	retryAfter time.Duration
	remaining  int
}

// Disconnect takes the account's network away: its live clients (and
// clients started meanwhile) report connecting; after d they report updating,
// report ready, and learn the deletions and edits made meanwhile in the
// chats they follow (updateDeleteMessages for the deletions) and the new
// last message of every chat that changed meanwhile
// (updateChatLastMessage): a basic group's before ready, a channel's with
// its own difference, Config.DifferenceDelay after ready. Until then the
// session shows a channel as it was when the account went offline: a
// message posted meanwhile is too new, and getMessage answers 404 for it
// (a channel's once the server has answered, so after the reconnect).
// updateNewMessage for messages posted during the window are lost, as
// TDLib does not replay channel updates. A d of zero or less keeps the
// account disconnected until Reconnect. Requests the session's own
// database answers keep being answered at once. One that needs the server
// (a message, history page or search its database lacks, a forum topic or
// page of topics, a topic made, closed or reopened, a public name it has
// not resolved, the chat lists of a directory that never loaded them) is
// answered only after the reconnect, as TDLib keeps the query until its
// connection is back (offline.go); a deletion is the session's own at
// once, its answer waiting for the server's (DeleteMessages). A send made meanwhile lands only SendLatency after the
// reconnect (TDLib keeps the message pending until then), and downloads
// make no progress until then.
func (w *World) Disconnect(account string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.mustAccount(account)
	a.offlineGen++
	gen := a.offlineGen
	if a.reconnect != nil {
		a.reconnect.Stop()
		a.reconnect = nil
	}
	if !a.offline {
		a.offline = true
		a.back = make(chan struct{})
		for _, cl := range a.clients {
			cl.enqueue(tg.ConnectionStateChanged{State: tg.ConnConnecting})
		}
	}
	if d > 0 {
		a.reconnect = time.AfterFunc(d, func() { w.reconnect(account, gen) })
	}
}

// Reconnect ends a Disconnect window now. It does nothing when the account
// is connected.
func (w *World) Reconnect(account string) {
	w.mu.Lock()
	gen := w.mustAccount(account).offlineGen
	w.mu.Unlock()
	w.reconnect(account, gen)
}

func (w *World) reconnect(name string, gen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.accounts[name]
	if !a.offline || a.offlineGen != gen {
		return // a later Disconnect owns the window
	}
	a.offline = false
	close(a.back)
	if a.reconnect != nil {
		a.reconnect.Stop()
		a.reconnect = nil
	}
	missed := a.missedList
	a.missed, a.missedList = make(map[tg.ChatID]bool), nil
	for _, cl := range a.clients {
		w.sendPendingDeletes(cl)
	}
	for _, cl := range a.clients {
		cl.enqueue(tg.ConnectionStateChanged{State: tg.ConnUpdating})
		for _, id := range missed {
			c := w.chats[id]
			if c.private || !cl.receivesMessages(c) {
				continue
			}
			// The difference brings the chat's deletions and edits
			// too. A basic group's comes in the account's common
			// difference, before the session reports ready; a
			// channel's is its own, fetched once the common one
			// told of it (updateChannelTooLong), so with
			// DifferenceDelay it comes that much after ready, and
			// brings nothing but the last message when it is too
			// long (learnDifference).
			if commonBox(c) {
				cl.relearnChat(c)
				cl.announceLast(c, c.lastID())
			} else {
				cl.differ(c, func() {
					cl.learnDifference(c)
					cl.announceLast(c, c.lastID())
				})
			}
		}
		if cl.reachable(a) {
			cl.enqueue(tg.ConnectionStateChanged{State: tg.ConnReady})
		}
	}
	unsent := a.unsent
	a.unsent = nil
	for _, b := range unsent {
		if c := b.sends[0].c; !c.closed && b.timer == nil {
			c.armSend(b)
		}
	}
}

// InjectFloodWait makes the next n calls of method (a tg.Method* name) by
// account fail with a FLOOD_WAIT of retryAfter. It replaces any earlier
// injection for that method.
func (w *World) InjectFloodWait(account, method string, retryAfter time.Duration, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustAccount(account).flood[method] = floodInjection{retryAfter: retryAfter, remaining: n}
}

// InjectError makes the next n requests of method by account's clients
// fail with err (for example a 406, which TDLib asks clients to drop
// silently).
func (w *World) InjectError(account, method string, err error, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustAccount(account).errs[method] = errInjection{err: err, remaining: n}
}

// InjectSendFailures decides the outcome of the next len(fails) messages
// account's clients send, in the order they are sent: true fails the
// message's send (updateMessageSendFailed: a lone message's with 500, as
// SendFailRate draws it; an album's with 400 "Message was not sent", the
// message TDLib finds missing from the server's answer), false lets it
// succeed. An album's messages take one each, so this lands an album in
// part. It replaces any earlier injection.
func (w *World) InjectSendFailures(account string, fails ...bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustAccount(account).sendFails = slices.Clone(fails)
}

// Calls returns the requests the account's clients have made, by method
// (tg.Method* names), failed ones included. A request refused before it
// started, because its client was closed or its context had ended, is not
// counted.
func (w *World) Calls(account string) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.mustAccount(account).calls)
}

// TotalCalls returns the requests every account made, by method.
func (w *World) TotalCalls() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int)
	for _, a := range w.accounts {
		for m, n := range a.calls {
			out[m] += n
		}
	}
	return out
}

// ResetCalls zeroes every account's call counts.
func (w *World) ResetCalls() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.accounts {
		clear(a.calls)
	}
}

// The account methods below run with w.mu held.

func (a *account) markMissed(id tg.ChatID) {
	if !a.missed[id] {
		a.missed[id] = true
		a.missedList = append(a.missedList, id)
	}
}

func (a *account) removeClient(c *Client) {
	a.clients = slices.DeleteFunc(a.clients, func(x *Client) bool { return x == c })
}

// takeFlood consumes one injected flood wait for method, if any.
// takeError returns the injected error due for method, if any.
func (a *account) takeError(method string) error {
	e, ok := a.errs[method]
	if !ok || e.remaining <= 0 {
		return nil
	}
	e.remaining--
	if e.remaining == 0 {
		delete(a.errs, method)
	} else {
		a.errs[method] = e
	}
	return e.err
}

func (a *account) takeFlood(method string) error {
	f, ok := a.flood[method]
	if !ok || f.remaining <= 0 {
		return nil
	}
	f.remaining--
	if f.remaining == 0 {
		delete(a.flood, method)
	} else {
		a.flood[method] = f
	}
	return errFloodWait(f.retryAfter)
}
