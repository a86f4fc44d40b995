package tdjsonsim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// TDLib's authorization states, as TDLib names them.
const (
	stateWaitTdlibParameters = "authorizationStateWaitTdlibParameters"
	stateWaitPhoneNumber     = "authorizationStateWaitPhoneNumber"
	stateReady               = "authorizationStateReady"
	stateClosing             = "authorizationStateClosing"
	stateClosed              = "authorizationStateClosed"
)

// session is one TDLib instance: one client id of one connection. Its
// requests run concurrently, as TDLib runs them.
type session struct {
	c   *conn
	id  int
	log *slog.Logger

	// ctx is cancelled (cause errAborted) when the session starts closing:
	// the tgsim calls still running return at once.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	inflight sync.WaitGroup // requests being handled
	done     chan struct{}  // closed once the session is closed

	mu      sync.Mutex
	state   string // the authorization state
	account string
	client  *tgsim.Client // set once ready
	login   *loginState   // set while logging in (tgsim's RequireLogin)
	proxy   *tg.Proxy     // an addProxy made before the session was ready
	fwdDone chan struct{} // closed when the update forwarder has returned
	// chatsLoaded records the chat lists a loadChats has loaded: TDLib
	// answers the next loadChats of that list 404, all its chats being
	// loaded.
	chatsLoaded map[string]bool
	// kinds remembers the kind of each supergroup getChat has shown, for
	// getSupergroup (a local call in TDLib, which the port does not have).
	kinds map[int64]tg.ChatKind
	// TDLib answers sendMessage before it reports the send's outcome; the
	// simulator settles sends on a timer of its own. So the forwarder holds
	// an outcome back while sendMessage requests are unanswered (sending),
	// until its temporary message is among the answered ones (sent), which
	// also gives updateMessageSendFailed the message, as TDLib writes it.
	// answered is signalled (with mu) whenever sending drops.
	sending  int
	sent     map[tg.MessageID]tg.Message
	answered *sync.Cond
}

func newSession(c *conn, id int) *session {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &session{
		c: c, id: id, log: c.log.With("client", id),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		state:       stateWaitTdlibParameters,
		kinds:       make(map[int64]tg.ChatKind),
		chatsLoaded: make(map[string]bool),
		sent:        make(map[tg.MessageID]tg.Message),
	}
	s.answered = sync.NewCond(&s.mu)
	return s
}

// request starts handling r. Nothing is sent after authorizationStateClosed;
// while closing, new requests are answered 500 "Request aborted" (under
// s.mu, so the answer precedes Closed).
func (s *session) request(r *request) {
	s.mu.Lock()
	switch s.state {
	case stateClosed:
		s.mu.Unlock()
		return
	case stateClosing:
		s.c.reply(s.id, r, errorObject(500, msgRequestAborted))
		s.mu.Unlock()
		return
	}
	if r.Type == "close" {
		s.mu.Unlock()
		s.c.goHandle(func() { s.terminate(r, true) })
		return
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	s.c.goHandle(func() {
		defer s.inflight.Done()
		s.serve(r)
	})
}

// terminate closes the session as TDLib closes: the answer to close
// (closeReq, when a close request asked), authorizationStateClosing, the
// requests still running answered, the simulated client closed, then
// authorizationStateClosed. notify is false when the peer is gone and
// nothing is written. A second call waits for the first to finish.
func (s *session) terminate(closeReq *request, notify bool) {
	s.mu.Lock()
	if s.state == stateClosing || s.state == stateClosed {
		if closeReq != nil && s.state == stateClosing {
			s.c.reply(s.id, closeReq, errorObject(500, msgRequestAborted))
		}
		s.mu.Unlock()
		<-s.done
		return
	}
	s.state = stateClosing
	s.mu.Unlock()

	if notify {
		if closeReq != nil {
			// TDLib answers close before it reports Closing (and so
			// before Closed, after which go-tdlib crashes on an answer).
			s.c.reply(s.id, closeReq, okObject())
		}
		s.c.send(s.id, updateAuthorizationState(stateClosing))
	}
	s.cancel(errAborted)
	s.inflight.Wait()
	// Read only now: a setTdlibParameters that was running may have
	// started the client.
	s.mu.Lock()
	cl, fwdDone := s.client, s.fwdDone
	s.mu.Unlock()
	if cl != nil {
		_ = cl.Close()
		<-fwdDone
	}
	s.mu.Lock()
	if notify {
		s.c.send(s.id, updateAuthorizationState(stateClosed))
	}
	s.state = stateClosed
	s.mu.Unlock()
	s.c.s.unlockDir(s)
	close(s.done)
	s.log.Debug("TDLib instance closed", "account", s.account)
}

// serve handles one request and answers it.
func (s *session) serve(r *request) {
	switch r.Type {
	case "setTdlibParameters":
		s.setTdlibParameters(r)
		return
	case tg.MethodSendMessage:
		s.sendMessage(r)
		return
	case tg.MethodSendMessageAlbum:
		s.sendMessageAlbum(r)
		return
	}
	res, err := s.handle(r)
	s.c.reply(s.id, r, s.result(res, err))
}

// result is the answer to a request that returned res or err.
func (s *session) result(res object, err error) object {
	if err == nil {
		return res
	}
	if s.ctx.Err() != nil {
		err = errAborted
	}
	return errorFor(err)
}

// params decodes r's parameters into v; a mismatch is TDLib's 400.
func (r *request) params(v any) error {
	if err := json.Unmarshal(r.raw, v); err != nil {
		return tdError(400, "Failed to parse JSON object as TDLib request: %v", err)
	}
	return nil
}

// tdInt is an integer parameter: TDLib accepts int64 values as numbers or
// strings.
type tdInt int64

func (n *tdInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("parse integer %s: %w", b, err)
	}
	*n = tdInt(v)
	return nil
}

// typeOnly is a nested object of which only "@type" matters.
type typeOnly struct {
	Type string `json:"@type"`
}

// notSimulated is the answer to what TDLib would do but the simulator
// does not model.
func notSimulated(what string) error {
	return tdError(400, "tdjsonsim: %s is not simulated", what)
}

// setTdlibParameters starts the instance: a world account is logged in and
// gets a fresh tgsim client; any other name waits for a phone number. The
// answer precedes the new state, and the state precedes the client's first
// updates, as in TDLib.
func (s *session) setTdlibParameters(r *request) {
	var p struct {
		DatabaseDirectory string `json:"database_directory"`
		FilesDirectory    string `json:"files_directory"`
		APIID             tdInt  `json:"api_id"`
		APIHash           string `json:"api_hash"`
	}
	fail := func(err error) { s.c.reply(s.id, r, errorFor(err)) }
	if err := r.params(&p); err != nil {
		fail(err)
		return
	}
	if p.APIID == 0 || p.APIHash == "" {
		fail(tdError(400, "Valid api_id must be provided. Can be obtained at https://my.telegram.org"))
		return
	}
	account := accountOf(p.DatabaseDirectory)
	if account == "" {
		fail(tdError(400, "tdjsonsim: database_directory must be <state dir>/database, the state directory being named after the account"))
		return
	}
	// TDLib locks the directory's binlog: a second instance on it waits,
	// then fails. A killed process's lock goes with it, as flock's does.
	dir := filepath.Clean(p.DatabaseDirectory)
	if !s.c.s.lockDir(s.ctx, dir, s) {
		fail(tdError(400, "Can't lock file %q, because it is already in use; check for another program instance running", filepath.Join(dir, "td.binlog")))
		return
	}

	// TDLib keeps downloads in files_directory, or in the database
	// directory when that is empty.
	files := filepath.Clean(cmp.Or(p.FilesDirectory, p.DatabaseDirectory))

	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateWaitTdlibParameters:
	case stateClosing:
		s.c.reply(s.id, r, errorObject(500, msgRequestAborted))
		return
	default:
		s.c.reply(s.id, r, errorObject(400, "Unexpected setTdlibParameters"))
		return
	}
	s.account = account
	s.log = s.log.With("account", account)
	if need, password := needsLogin(s.c.s.world, account, dir); need {
		s.login = &loginState{dir: dir, filesDir: files, password: password}
		s.state = stateWaitPhoneNumber
		s.c.reply(s.id, r, okObject())
		s.c.send(s.id, updateAuthorizationState(stateWaitPhoneNumber))
		return
	}
	cl, ok := worldClient(s.c.s.world, account, dir, files)
	if !ok {
		s.state = stateWaitPhoneNumber
		s.c.reply(s.id, r, okObject())
		s.c.send(s.id, updateAuthorizationState(stateWaitPhoneNumber))
		s.log.Info("unknown account: waiting for a login that cannot happen")
		return
	}
	s.c.reply(s.id, r, okObject())
	s.becomeReady(cl)
}

// becomeReady starts serving cl's world, with s.mu held.
func (s *session) becomeReady(cl *tgsim.Client) {
	s.state = stateReady
	s.client = cl
	s.fwdDone = make(chan struct{})
	s.c.send(s.id, updateAuthorizationState(stateReady))
	s.addPendingProxy(cl)
	s.c.goHandle(func() { s.forward(cl) })
	// At Info: the simulator's session numbers, which overlaps name, are
	// traced to their connections here.
	s.log.Info("TDLib instance ready", "session", cl.Session())
}

// accountOf names the account of a database directory: the name of the
// directory holding it ("/var/lib/stashd/accounts/main/database" is
// "main"). "" when there is none.
func accountOf(databaseDir string) string {
	if databaseDir == "" {
		return ""
	}
	name := filepath.Base(filepath.Dir(filepath.Clean(databaseDir)))
	if name == "." || name == "/" || name == ".." {
		return ""
	}
	return name
}

// forward writes the simulated client's updates until the client closes.
func (s *session) forward(cl *tgsim.Client) {
	defer close(s.fwdDone)
	for u := range cl.Updates() {
		var failed *tg.Message
		switch u := u.(type) {
		case tg.OptionChanged:
			// The tgsim client starts with these, but the TDLib instance
			// started before it and reported them then (startUpdates):
			// TDLib reports them once.
			if isStartOption(u.Name) {
				continue
			}
		case tg.SendSucceeded:
			s.awaitAnswer(u.OldMessageID)
		case tg.SendFailed:
			failed = s.awaitAnswer(u.OldMessageID)
		case tg.ChatAccessLost:
			// The server's CHANNEL_PRIVATE for a send tells TDLib the
			// account left: that comes after the send's answer too.
			s.awaitSends()
		case tg.MessagesDeleted:
			// A send that vanished (its temporary message deleted) is
			// reported after its answer too, and its record goes.
			if !u.FromCache {
				for _, id := range u.IDs {
					if !id.IsServer() {
						s.awaitAnswer(id)
					}
				}
			}
		case tg.LoggedOut:
			// The session was terminated on Telegram's side: TDLib
			// reports loggingOut, then closes (Closing, Closed) by itself.
			s.mu.Lock()
			s.state = tg.AuthStateLoggingOut
			s.c.send(s.id, updateAuthorizationState(tg.AuthStateLoggingOut))
			s.mu.Unlock()
			go s.terminate(nil, true)
			continue
		}
		obj, err := updateObject(u, failed)
		if err != nil {
			s.log.Error("drop update", "err", err)
			continue
		}
		s.c.send(s.id, obj)
	}
}

// startUpdates are what a new TDLib instance reports before anything
// else, its first authorization state last: the version and commit of
// TDLib, as TDLib 1.8.40 writes them.
func startUpdates() []object {
	return []object{
		updateOption("version", tgsim.TDLibVersion),
		updateOption("commit_hash", tgsim.TDLibCommitHash),
		updateAuthorizationState(stateWaitTdlibParameters),
	}
}

// isStartOption names the options startUpdates reports.
func isStartOption(name string) bool { return name == "version" || name == "commit_hash" }

// awaitAnswer returns once the sendMessage that made the temporary message
// id has been answered, and returns that message (nil when no answer
// carried it). A send's handler always answers, even while the session
// closes, so the wait ends.
func (s *session) awaitAnswer(id tg.MessageID) *tg.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if m, ok := s.sent[id]; ok {
			delete(s.sent, id)
			return &m
		}
		if s.sending == 0 {
			return nil
		}
		s.answered.Wait()
	}
}

// awaitSends waits until no send is being answered.
func (s *session) awaitSends() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.sending > 0 {
		s.answered.Wait()
	}
}

// readyClient returns the simulated client, or TDLib's 401 before the
// instance is logged in.
func (s *session) readyClient() (*tgsim.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateReady {
		return nil, tdError(401, msgUnauthorized)
	}
	return s.client, nil
}

// handle runs every request but setTdlibParameters and close.
func (s *session) handle(r *request) (object, error) {
	switch r.Type {
	case "getAuthorizationState":
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.authStateObject(), nil
	case "getOption":
		var p struct {
			Name string `json:"name"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		switch p.Name {
		case "version":
			return optionValueObject(p.Name, tgsim.TDLibVersion), nil
		case "commit_hash":
			return optionValueObject(p.Name, tgsim.TDLibCommitHash), nil
		}
		return typed("optionValueEmpty"), nil
	case "setAuthenticationPhoneNumber", "checkAuthenticationCode", "checkAuthenticationPassword",
		"requestQrCodeAuthentication", "registerUser":
		return s.loginStep(r)
	case tgsim.MethodAddProxy:
		return s.addProxy(r)
	}

	cl, err := s.readyClient()
	if err != nil {
		return nil, err
	}
	ctx := s.ctx
	switch r.Type {
	case tg.MethodLoadChats:
		return s.loadChats(ctx, cl, r)
	case tg.MethodGetMe:
		u, err := cl.GetMe(ctx)
		if err != nil {
			return nil, err
		}
		return userObject(u), nil
	case tg.MethodGetChat:
		var p struct {
			ChatID tdInt `json:"chat_id"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		c, err := cl.GetChat(ctx, tg.ChatID(p.ChatID))
		if err != nil {
			return nil, err
		}
		return s.chat(c), nil
	case tg.MethodSearchPublicChat:
		var p struct {
			Username string `json:"username"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		c, err := cl.SearchPublicChat(ctx, p.Username)
		if err != nil {
			return nil, err
		}
		return s.chat(c), nil
	case tg.MethodGetSupergroup:
		return s.getSupergroup(cl, r)
	case tg.MethodGetChats:
		return s.getChats(ctx, cl, r)
	case tg.MethodOpenChat:
		var p struct {
			ChatID tdInt `json:"chat_id"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		if err := cl.OpenChat(ctx, tg.ChatID(p.ChatID)); err != nil {
			return nil, err
		}
		return okObject(), nil
	case tg.MethodSearchChatMessages:
		return s.searchChatMessages(ctx, cl, r)
	case tg.MethodGetChatHistory:
		var p struct {
			ChatID        tdInt `json:"chat_id"`
			FromMessageID tdInt `json:"from_message_id"`
			Offset        tdInt `json:"offset"`
			Limit         tdInt `json:"limit"`
			OnlyLocal     bool  `json:"only_local"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		if p.Offset != 0 {
			return nil, notSimulated("getChatHistory with an offset")
		}
		if p.OnlyLocal {
			return nil, notSimulated("getChatHistory only_local")
		}
		msgs, err := cl.GetChatHistory(ctx, tg.ChatID(p.ChatID), tg.MessageID(p.FromMessageID), int(p.Limit))
		if err != nil {
			return nil, err
		}
		return messagesObject(msgs, viewOptions(cl)), nil
	case tg.MethodGetMessage:
		var p struct {
			ChatID    tdInt `json:"chat_id"`
			MessageID tdInt `json:"message_id"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		m, err := cl.GetMessage(ctx, tg.ChatID(p.ChatID), tg.MessageID(p.MessageID))
		if err != nil {
			return nil, err
		}
		return messageObject(m, viewOptions(cl)(m)), nil
	case tg.MethodGetChatMessageByDate:
		var p struct {
			ChatID tdInt `json:"chat_id"`
			Date   tdInt `json:"date"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		m, err := cl.GetChatMessageByDate(ctx, tg.ChatID(p.ChatID), time.Unix(int64(p.Date), 0))
		if err != nil {
			return nil, err
		}
		if m.ID == 0 {
			// tgsim answers "no message" with a zero Message; TDLib with
			// a 404.
			return nil, tdError(404, msgNotFound)
		}
		return messageObject(m, viewOptions(cl)(m)), nil
	case tg.MethodGetForumTopic:
		var p struct {
			ChatID          tdInt `json:"chat_id"`
			MessageThreadID tdInt `json:"message_thread_id"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		t, err := cl.GetForumTopic(ctx, tg.ChatID(p.ChatID), int64(p.MessageThreadID))
		if err != nil {
			return nil, err
		}
		return forumTopicObject(t), nil
	case tg.MethodCreateForumTopic:
		var p struct {
			ChatID tdInt  `json:"chat_id"`
			Name   string `json:"name"`
			Icon   *struct {
				Color int32 `json:"color"`
			} `json:"icon"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		thread, err := cl.CreateForumTopic(ctx, tg.ChatID(p.ChatID), p.Name)
		if err != nil {
			return nil, err
		}
		// The server keeps the name cleaned, and answers with it.
		t := tg.Topic{ChatID: tg.ChatID(p.ChatID), ThreadID: thread, Name: tg.CleanTopicName(p.Name)}
		return createdForumTopicInfoObject(t), nil
	case tg.MethodGetForumTopics:
		return getForumTopics(ctx, cl, r)
	case tg.MethodDownloadFile:
		return downloadFile(ctx, cl, r)
	case tg.MethodCancelDownloadFile:
		var p struct {
			FileID        tdInt `json:"file_id"`
			OnlyIfPending bool  `json:"only_if_pending"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		if p.OnlyIfPending {
			return nil, notSimulated("cancelDownloadFile only_if_pending")
		}
		if err := cl.CancelDownloadFile(ctx, int32(p.FileID)); err != nil {
			return nil, err
		}
		return okObject(), nil
	case tg.MethodDeleteFile:
		var p struct {
			FileID tdInt `json:"file_id"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		if err := cl.DeleteFile(ctx, int32(p.FileID)); err != nil {
			return nil, err
		}
		return okObject(), nil
	case tg.MethodDeleteMessages:
		// Answered ok; the deletion itself arrives as updateDeleteMessages.
		var p struct {
			ChatID     tdInt   `json:"chat_id"`
			MessageIDs []tdInt `json:"message_ids"`
			Revoke     bool    `json:"revoke"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		ids := make([]tg.MessageID, len(p.MessageIDs))
		for i, id := range p.MessageIDs {
			ids[i] = tg.MessageID(id)
		}
		if err := cl.DeleteMessages(ctx, tg.ChatID(p.ChatID), ids, p.Revoke); err != nil {
			return nil, err
		}
		return okObject(), nil
	case tg.MethodToggleForumTopicIsClosed:
		var p struct {
			ChatID          tdInt `json:"chat_id"`
			MessageThreadID tdInt `json:"message_thread_id"`
			IsClosed        bool  `json:"is_closed"`
		}
		if err := r.params(&p); err != nil {
			return nil, err
		}
		if err := cl.ToggleForumTopicIsClosed(ctx, tg.ChatID(p.ChatID), int64(p.MessageThreadID), p.IsClosed); err != nil {
			return nil, err
		}
		return okObject(), nil
	}
	return nil, notSimulated(r.Type)
}
