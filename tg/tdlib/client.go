//go:build libtdjson

package tdlib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/zelenin/go-tdlib/client"

	"stashd/tg"
)

var _ tg.Client = (*Client)(nil)

// closeTimeout bounds how long Close waits for TDLib to report
// authorizationStateClosed; TDLib flushes its databases first.
const closeTimeout = 30 * time.Second

// queueWarnLen is the update queue length from which the pump warns (at
// every power of two) that the consumer of Updates is not keeping up.
const queueWarnLen = 1 << 12

// Client is one account's TDLib client; it implements tg.Client. Create it
// with New; the zero value is not usable. Its methods are safe for
// concurrent use.
type Client struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// tdc is go-tdlib's client. go-tdlib hands it over in the first
	// authorization callback, before its NewClient returns.
	tdc *client.Client
	// closing is set by Close, by a failed start and when TDLib starts
	// closing by itself: no request is sent after it, since an answer
	// arriving after authorizationStateClosed would crash go-tdlib.
	closing bool
	// tdClosing is set when TDLib reports that it is closing (or logging
	// out, which ends in closing): it needs no close request then.
	tdClosing bool
	// cancelStart cancels the context of a start in progress (the
	// Authorizer may be waiting for a person), with the reason as cause.
	cancelStart context.CancelCauseFunc
	// inflight counts the go-tdlib Send calls that have not returned.
	inflight sync.WaitGroup

	queue     *updateQueue
	updates   chan tg.Update
	pumpDone  chan struct{} // the pump saw authorizationStateClosed
	stop      chan struct{} // the forwarder drops the queue and returns
	fwdDone   chan struct{}
	startDone chan struct{}

	teardownOnce sync.Once
	teardownErr  error

	// dirLock holds the account's TDLib database directory for this client
	// (see LockDir) until TDLib has closed.
	dirLock *DirLock
	// sweepDone, set under mu, is closed when sweepKeptLater returns.
	sweepDone chan struct{}
}

// New starts the TDLib client of cfg.Account and returns once the account
// is logged in (authorizationStateReady). An account that is not logged in
// fails with the Authorizer's error: with the default Authorizer a
// *NotLoggedInError naming the authorization state. On any failure TDLib is
// closed again before New returns.
//
// After New, call LoadChats before GetChat or OpenChat, and drain Updates.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configure TDLib client: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.makeDirs(); err != nil {
		return nil, err
	}
	// Two TDLib clients on one database corrupt it or fight over the
	// session: refused before TDLib opens anything.
	lock, err := LockDir(cfg.DatabaseDir())
	if err != nil {
		return nil, fmt.Errorf("start account %s: %w", cfg.Account, err)
	}
	if err := configureLog(cfg); err != nil {
		lock.Unlock()
		return nil, err
	}
	n, bytes, kept, err := sweepDownloads(cfg.FilesDir(), time.Now())
	logRemoved(cfg.Logger, n, bytes, err, "older_than", staleDownload)
	c := newClient(cfg)
	c.dirLock = lock
	if err := c.start(ctx); err != nil {
		// TDLib is closed again by now (see start).
		lock.Unlock()
		return nil, err
	}
	if len(kept) > 0 {
		c.mu.Lock()
		if !c.closing {
			c.sweepDone = make(chan struct{})
			go sweepKeptLater(kept, staleDownload, c.stop, c.log, c.sweepDone)
		}
		c.mu.Unlock()
	}
	return c, nil
}

// processLog is TDLib's log configuration, applied once per process.
var processLog = &logConfig{exec: func(r request) error {
	_, err := execute(r)
	return err
}}

// configureLog sets TDLib's own log, which is process-wide, once, before
// the first client is created; later calls change nothing.
func configureLog(cfg Config) error { return processLog.configure(cfg) }

// newClient builds a Client of a validated cfg with defaults and starts
// its forwarder; start connects it to TDLib.
func newClient(cfg Config) *Client {
	c := &Client{
		cfg:       cfg,
		log:       cfg.Logger,
		queue:     newUpdateQueue(),
		updates:   make(chan tg.Update),
		pumpDone:  make(chan struct{}),
		stop:      make(chan struct{}),
		fwdDone:   make(chan struct{}),
		startDone: make(chan struct{}),
	}
	go func() {
		defer close(c.fwdDone)
		c.queue.forward(c.updates, c.pumpDone, c.stop)
	}()
	return c
}

// start creates the go-tdlib client and walks it through authorization.
func (c *Client) start(ctx context.Context) error {
	defer close(c.startDone)
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return tg.ErrClosed
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.cancelStart = cancel
	c.mu.Unlock()

	h := &authHandler{c: c, ctx: ctx}
	var err error
	done := make(chan struct{})
	go func() {
		// go-tdlib's NewClient runs its authorization loop. A failing
		// handler ends this goroutine from inside it (see authHandler.fail),
		// so the result comes through h.err and this deferred close.
		defer close(done)
		_, err = client.NewClient(h)
	}()
	<-done

	failure := h.err
	if errors.Is(failure, context.Canceled) {
		// Say why: Close (tg.ErrClosed) or TDLib closing (errTDLibClosing).
		failure = context.Cause(ctx)
	}
	var notLoggedIn *NotLoggedInError
	switch {
	case errors.As(failure, &notLoggedIn):
		return failure
	case failure != nil:
		return fmt.Errorf("start account %s: %w", c.cfg.Account, failure)
	case err != nil:
		// TDLib itself failed the authorization loop (a request timed out).
		_ = c.teardown()
		return fmt.Errorf("start account %s: %w", c.cfg.Account, err)
	}
	select {
	case <-c.pumpDone:
		// go-tdlib's loop also returns without error when TDLib closed by
		// itself while logging in.
		_ = c.teardown()
		return fmt.Errorf("start account %s: TDLib closed during login", c.cfg.Account)
	default:
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		_ = c.teardown()
		return tg.ErrClosed
	}
	c.log.Info("TDLib client ready")
	return nil
}

// attach takes go-tdlib's client on its first authorization callback and
// starts the update pump on a listener of its own.
func (c *Client) attach(tdc *client.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tdc != nil {
		return
	}
	c.tdc = tdc
	l := tdc.GetListener()
	go c.pump(l)
}

// pump drains go-tdlib's listener. go-tdlib's receiver blocks on a full
// listener channel, and every response waits behind it, so the pump never
// makes a request and never waits (beyond the client's mutex, which is
// never held across a blocking call): it decodes, pushes onto the unbounded
// queue and goes back for the next update. It returns on
// authorizationStateClosed, after which go-tdlib sends nothing more.
func (c *Client) pump(l *client.Listener) {
	defer close(c.pumpDone)
	for typ := range l.Updates {
		if s, ok := typ.(*client.UpdateAuthorizationState); ok {
			state := s.AuthorizationState.AuthorizationStateType()
			switch state {
			case client.TypeAuthorizationStateLoggingOut, client.TypeAuthorizationStateClosing, client.TypeAuthorizationStateClosed:
				// TDLib still answers requests while closing, but not after
				// closed, and go-tdlib crashes on an answer that comes
				// after closed: stop sending now, while it is safe.
				c.mu.Lock()
				c.closing = true
				c.tdClosing = true
				if c.cancelStart != nil {
					// A login waiting for a person cannot finish any more.
					c.cancelStart(errTDLibClosing)
				}
				c.mu.Unlock()
			}
			switch state {
			case client.TypeAuthorizationStateClosed:
				c.log.Info("TDLib client closed")
				return
			case client.TypeAuthorizationStateLoggingOut:
				c.log.Warn("account is being logged out", "state", state)
				// The session was terminated elsewhere (or the account
				// banned): the consumer stops this account only.
				c.queue.push(tg.LoggedOut{State: tg.AuthStateLoggingOut})
			default:
				c.log.Debug("TDLib authorization state", "state", state)
			}
			continue
		}
		if !isPortUpdate(typ.GetType()) {
			continue
		}
		// go-tdlib has decoded the update already; its types encode back to
		// TDLib JSON, which the one decoder of this package reads.
		data, err := json.Marshal(typ)
		if err != nil {
			c.log.Warn("drop TDLib update", "type", typ.GetType(), "err", err)
			continue
		}
		u, ok, err := decodeUpdate(data)
		if err != nil {
			c.log.Warn("drop TDLib update", "type", typ.GetType(), "err", err)
			continue
		}
		if !ok {
			continue
		}
		if n := c.queue.push(u); n >= queueWarnLen && n&(n-1) == 0 {
			c.log.Warn("update queue is growing: its consumer is not keeping up", "length", n)
		}
	}
}

// call sends one request and returns the response's JSON, or the TDLib
// error mapped to the port's typed errors. It returns when ctx is done even
// if TDLib has not answered (go-tdlib then waits for the answer in the
// background, up to its own 60-second timeout), and at the latest after
// Config.RequestTimeout with tg.ErrRequestTimeout: TDLib may hold a request
// for 60 s under FLOOD_WAIT, and go-tdlib's receiver can lose the reply, or
// panic, when it lands at go-tdlib's own 60-second timeout, so no caller
// waits that long.
func (c *Client) call(ctx context.Context, req request) (json.RawMessage, error) {
	if !tg.LocalMethod(req.Method) {
		// A method of several requests asks its account's gate before
		// each (tg.WithGate).
		if err := tg.Gated(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", req.Method, err)
		}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.RequestTimeout, tg.ErrRequestTimeout)
	defer cancel()
	pending, err := c.send(req)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-pending:
		return r.decode(req.Method)
	case <-ctx.Done():
		if cause := context.Cause(ctx); errors.Is(cause, tg.ErrRequestTimeout) {
			return nil, fmt.Errorf("%s: %w (%s)", req.Method, cause, c.cfg.RequestTimeout)
		}
		return nil, ctx.Err()
	}
}

// send counts req as in flight and hands it to go-tdlib; the answer
// arrives on the returned channel. It refuses once Close has begun.
func (c *Client) send(req request) (<-chan response, error) {
	c.mu.Lock()
	tdc := c.tdc
	if c.closing || tdc == nil {
		c.mu.Unlock()
		return nil, tg.ErrClosed
	}
	c.inflight.Add(1)
	c.mu.Unlock()
	return c.dispatch(tdc, req), nil
}

// response is go-tdlib's answer to one request.
type response struct {
	resp *client.Response
	err  error
}

// decode returns the answer's JSON, or its error mapped to the port's.
func (r response) decode(method string) (json.RawMessage, error) {
	if r.err != nil {
		// go-tdlib's only error: no answer within its 60 s timeout.
		return nil, fmt.Errorf("%s: %w", method, r.err)
	}
	if r.resp.Type == "error" {
		return nil, decodeError(r.resp.Data)
	}
	return r.resp.Data, nil
}

// dispatch runs go-tdlib's blocking Send on a goroutine of its own; the
// caller has counted req in inflight.
func (c *Client) dispatch(tdc *client.Client, req request) <-chan response {
	ch := make(chan response, 1)
	go func() {
		defer c.inflight.Done()
		r := client.Request{Data: req.Params}
		r.Type = req.Method
		resp, err := tdc.Send(r)
		ch <- response{resp, err}
	}()
	return ch
}

// execute runs a request TDLib can answer synchronously (td_execute),
// without a client.
func execute(req request) (json.RawMessage, error) {
	r := client.Request{Data: req.Params}
	r.Type = req.Method
	resp, err := client.Execute(r)
	if err != nil {
		return nil, fmt.Errorf("execute %s: %w", req.Method, err)
	}
	if resp.Type == "error" {
		return nil, fmt.Errorf("execute %s: %w", req.Method, decodeError(resp.Data))
	}
	return resp.Data, nil
}

// Version returns the version of the linked TDLib ("1.8.40"), asked
// synchronously with td_execute; it needs no client.
func Version() (string, error) {
	data, err := execute(getOptionRequest("version"))
	if err != nil {
		return "", fmt.Errorf("get TDLib version: %w", err)
	}
	return decodeOptionValue(data)
}

// Updates implements tg.Client. The channel is closed by Close, or when
// TDLib closes by itself (the account was logged out).
func (c *Client) Updates() <-chan tg.Update { return c.updates }

// LoadChats implements tg.Client. It loads the main chat list and then the
// archive list, each to its end (TDLib answers 404 once every chat of a
// list is loaded): a source in the archive is "Chat not found" until the
// archive list has been loaded.
func (c *Client) LoadChats(ctx context.Context) error {
	for _, list := range []string{chatListMain, chatListArchive} {
		for {
			_, err := c.call(ctx, loadChatsRequest(list))
			var te *tg.Error
			if errors.As(err, &te) && te.Code == 404 {
				break
			}
			if err != nil {
				return fmt.Errorf("load chats (%s): %w", list, err)
			}
		}
	}
	return nil
}

// GetMe implements tg.Client.
func (c *Client) GetMe(ctx context.Context) (tg.User, error) {
	data, err := c.call(ctx, getMeRequest())
	if err != nil {
		return tg.User{}, fmt.Errorf("get me: %w", err)
	}
	return decodeUser(data)
}

// GetChat implements tg.Client. For a supergroup that is not a channel it
// also asks TDLib for the supergroup (a local call) to tell a forum apart.
func (c *Client) GetChat(ctx context.Context, chat tg.ChatID) (tg.Chat, error) {
	data, err := c.call(ctx, getChatRequest(chat))
	if err != nil {
		return tg.Chat{}, fmt.Errorf("get chat %d: %w", chat, err)
	}
	return c.chatWithKind(ctx, data)
}

// chatWithKind decodes a chat object. A supergroup's forum flag is not in
// the chat: it costs one more (local) getSupergroup.
func (c *Client) chatWithKind(ctx context.Context, data json.RawMessage) (tg.Chat, error) {
	out, supergroup, err := decodeChat(data)
	if err != nil || supergroup == 0 {
		return out, err
	}
	data, err = c.call(ctx, getSupergroupRequest(supergroup))
	if err != nil {
		return tg.Chat{}, fmt.Errorf("get supergroup of chat %d: %w", out.ID, err)
	}
	forum, err := decodeSupergroupIsForum(data)
	if err != nil {
		return tg.Chat{}, err
	}
	if forum {
		out.Kind = tg.KindForum
	}
	return out, nil
}

// SearchPublicChat implements tg.Client.
func (c *Client) SearchPublicChat(ctx context.Context, username string) (tg.Chat, error) {
	data, err := c.call(ctx, searchPublicChatRequest(username))
	if err != nil {
		return tg.Chat{}, fmt.Errorf("resolve @%s: %w", username, err)
	}
	return c.chatWithKind(ctx, data)
}

// OpenChat implements tg.Client.
func (c *Client) OpenChat(ctx context.Context, chat tg.ChatID) error {
	if _, err := c.call(ctx, openChatRequest(chat)); err != nil {
		return fmt.Errorf("open chat %d: %w", chat, err)
	}
	return nil
}

// SearchChatMessages implements tg.Client.
func (c *Client) SearchChatMessages(ctx context.Context, q tg.Search) ([]tg.Message, error) {
	req, err := searchChatMessagesRequest(q)
	if err != nil {
		return nil, tg.Permanent(err)
	}
	data, err := c.call(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("search chat %d: %w", q.Chat, err)
	}
	return decodeMessages(data)
}

// GetChatHistory implements tg.Client.
func (c *Client) GetChatHistory(ctx context.Context, chat tg.ChatID, from tg.MessageID, limit int) ([]tg.Message, error) {
	if limit <= 0 {
		return nil, tg.Permanent(fmt.Errorf("chat %d history: limit %d is not positive", chat, limit))
	}
	data, err := c.call(ctx, getChatHistoryRequest(chat, from, limit))
	if err != nil {
		return nil, fmt.Errorf("chat %d history: %w", chat, err)
	}
	return decodeMessages(data)
}

// GetMessage implements tg.Client.
func (c *Client) GetMessage(ctx context.Context, chat tg.ChatID, id tg.MessageID) (tg.Message, error) {
	data, err := c.call(ctx, getMessageRequest(chat, id))
	if err != nil {
		return tg.Message{}, fmt.Errorf("get message %d in chat %d: %w", id, chat, err)
	}
	return decodeMessage(data)
}

// GetChatMessageByDate implements tg.Client. No message at or before date
// is tg.ErrMessageNotFound.
func (c *Client) GetChatMessageByDate(ctx context.Context, chat tg.ChatID, date time.Time) (tg.Message, error) {
	data, err := c.call(ctx, getChatMessageByDateRequest(chat, date))
	if err != nil {
		return tg.Message{}, fmt.Errorf("get message of %s in chat %d: %w", date.UTC().Format(time.RFC3339), chat, err)
	}
	return decodeMessage(data)
}

// GetForumTopic implements tg.Client (TDLib's getForumTopic; 1.8.40 has
// no getForumTopicInfo).
func (c *Client) GetForumTopic(ctx context.Context, chat tg.ChatID, threadID int64) (tg.Topic, error) {
	data, err := c.call(ctx, getForumTopicRequest(chat, threadID))
	if err != nil {
		return tg.Topic{}, fmt.Errorf("get topic %d of chat %d: %w", threadID, chat, err)
	}
	return decodeForumTopic(chat, data)
}

// DownloadFile implements tg.Client: it starts an asynchronous download and
// returns the file's state at once; progress arrives as tg.FileUpdated.
func (c *Client) DownloadFile(ctx context.Context, file int32) (tg.File, error) {
	data, err := c.call(ctx, downloadFileRequest(file))
	if err != nil {
		return tg.File{}, fmt.Errorf("download file %d: %w", file, err)
	}
	return decodeFile(data)
}

// CancelDownloadFile implements tg.Client.
func (c *Client) CancelDownloadFile(ctx context.Context, file int32) error {
	if _, err := c.call(ctx, cancelDownloadFileRequest(file)); err != nil {
		return fmt.Errorf("cancel download of file %d: %w", file, err)
	}
	return nil
}

// DeleteFile implements tg.Client.
func (c *Client) DeleteFile(ctx context.Context, file int32) error {
	if _, err := c.call(ctx, deleteFileRequest(file)); err != nil {
		return fmt.Errorf("delete file %d: %w", file, err)
	}
	return nil
}

// SendDocument implements tg.Client.
func (c *Client) SendDocument(ctx context.Context, chat tg.ChatID, remoteFileID, caption string) (tg.Message, error) {
	return c.SendDocumentTo(ctx, chat, 0, remoteFileID, caption, tg.SendOptions{})
}

// SendDocumentTo implements tg.Client.
func (c *Client) SendDocumentTo(ctx context.Context, chat tg.ChatID, thread int64, remoteFileID, caption string, opts tg.SendOptions) (tg.Message, error) {
	data, err := c.call(ctx, sendDocumentRequest(chat, thread, remoteFileID, caption, opts))
	if err != nil {
		if thread != 0 {
			return tg.Message{}, fmt.Errorf("send document to chat %d topic %d: %w", chat, thread, err)
		}
		return tg.Message{}, fmt.Errorf("send document to chat %d: %w", chat, err)
	}
	return decodeMessage(data)
}

// SendDocumentAlbum implements tg.Client.
func (c *Client) SendDocumentAlbum(ctx context.Context, chat tg.ChatID, thread int64, items []tg.AlbumItem, opts tg.SendOptions) ([]tg.Message, error) {
	data, err := c.call(ctx, sendAlbumRequest(chat, thread, items, opts))
	if err != nil {
		return nil, fmt.Errorf("send album of %d documents to chat %d: %w", len(items), chat, err)
	}
	return decodeMessages(data)
}

// SearchForumTopics implements tg.Client.
func (c *Client) SearchForumTopics(ctx context.Context, chat tg.ChatID, query string, offset tg.TopicOffset, limit int) (tg.TopicPage, error) {
	data, err := c.call(ctx, getForumTopicsRequest(chat, query, offset, limit))
	if err != nil {
		return tg.TopicPage{}, fmt.Errorf("search forum topics %q of chat %d: %w", query, chat, err)
	}
	return decodeForumTopics(chat, data)
}

// CreateForumTopic implements tg.Client.
func (c *Client) CreateForumTopic(ctx context.Context, chat tg.ChatID, name string) (int64, error) {
	data, err := c.call(ctx, createForumTopicRequest(chat, name))
	if err != nil {
		return 0, fmt.Errorf("create forum topic %q in chat %d: %w", name, chat, err)
	}
	return decodeForumTopicInfo(data)
}

// ToggleForumTopicIsClosed implements tg.Client.
func (c *Client) ToggleForumTopicIsClosed(ctx context.Context, chat tg.ChatID, thread int64, closed bool) error {
	if _, err := c.call(ctx, toggleForumTopicIsClosedRequest(chat, thread, closed)); err != nil {
		return fmt.Errorf("toggle topic %d of chat %d closed=%t: %w", thread, chat, closed, err)
	}
	return nil
}

// DeleteMessages implements tg.Client. TDLib answers ok and reports the
// deletion as updateDeleteMessages.
func (c *Client) DeleteMessages(ctx context.Context, chat tg.ChatID, ids []tg.MessageID, revoke bool) error {
	if _, err := c.call(ctx, deleteMessagesRequest(chat, ids, revoke)); err != nil {
		return fmt.Errorf("delete messages %v of chat %d: %w", ids, chat, err)
	}
	return nil
}

// Close implements tg.Client: it refuses new requests, closes TDLib (which
// answers the requests still pending with 500 "Request aborted"), waits for
// authorizationStateClosed and for the pending requests, and closes the
// update stream. Updates not yet delivered are dropped. Close during New
// abandons the login. It is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closing = true
	cancel := c.cancelStart
	c.mu.Unlock()
	if cancel != nil {
		cancel(tg.ErrClosed)
	}
	// A start still in progress sees the cancelled context and tears down
	// itself; wait for it rather than race it.
	<-c.startDone
	return c.teardown()
}

// teardown closes TDLib, unless it is closing by itself, waits for it to
// report closed, and stops the pump and the forwarder. It runs once; later
// calls return the first call's result.
func (c *Client) teardown() error {
	c.teardownOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		tdc := c.tdc
		sendClose := tdc != nil && !c.tdClosing
		if sendClose {
			c.inflight.Add(1)
		}
		c.mu.Unlock()

		if tdc != nil {
			if sendClose {
				r := <-c.dispatch(tdc, request{"close", map[string]any{}})
				if _, err := r.decode("close"); err != nil {
					c.log.Warn("close TDLib", "err", err)
				}
			}
			select {
			case <-c.pumpDone:
			case <-time.After(closeTimeout):
				c.teardownErr = fmt.Errorf("close account %s: TDLib did not close within %s", c.cfg.Account, closeTimeout)
			}
		}
		c.inflight.Wait()
		close(c.stop)
		<-c.fwdDone
		c.mu.Lock()
		sweeping := c.sweepDone
		c.mu.Unlock()
		if sweeping != nil {
			<-sweeping
		}
		// A TDLib that did not report closed may still have its database
		// open: the directory stays locked for the rest of the process.
		if c.teardownErr == nil {
			c.dirLock.Unlock()
		}
	})
	return c.teardownErr
}
