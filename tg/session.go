package tg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Session owns one client's update stream. Its pump goroutine drains
// Client.Updates without ever blocking and never makes a request itself, so
// an adapter's receiver is never held up by stashd. It resolves the
// asynchronous parts of the API (sends and downloads) for callers of Send and
// Download, remembers options and the connection state, and hands every
// other update to the handler, which must not block either.
type Session struct {
	Client

	// SendTimeout bounds how long Send waits for a send's outcome; zero
	// means DefaultSendTimeout. Set it before the first Send.
	SendTimeout time.Duration
	// Silent sends every document without a notification
	// (SendOptions.Silent). Set it before the first Send.
	Silent bool
	// Budget, when set, paces Send: each send takes its turn and an
	// in-flight slot until its outcome. Set it before the first Send.
	Budget *SendBudget

	handler func(Update)

	mu        sync.Mutex
	sends     map[sendKey]chan sendResult // temporary message -> waiter
	early     map[sendKey]sendResult      // results that beat their waiter
	earlyFIFO []sendKey
	downloads map[int32][]chan File
	// orphans are failed local messages of sends nobody waited for,
	// deleted with the next failed message (deleteFailed).
	orphans []sendKey
	// chatPauses holds, by chat, when sends there may go again after a
	// send was refused with 429 (pauseChat).
	chatPauses map[ChatID]time.Time
	// onChatPause is told of every pause pauseChat starts
	// (RecordChatPauses).
	onChatPause func(chat ChatID, d time.Duration)
	options     map[string]string
	// lastKnown holds, by chat, the newest server message updates told
	// of (KnownLast).
	lastKnown map[ChatID]MessageID
	conn      ConnectionState
	connSince time.Time // when conn last changed (or the session began)

	// ended is set, with the waiters failed, when the update stream has
	// ended: a wait registered after that would never be answered.
	ended bool
	done  chan struct{}
}

// sendKey names a temporary message: TDLib's temporary ids are unique
// within a chat only.
type sendKey struct {
	chat ChatID
	id   MessageID
}

type sendResult struct {
	msg Message
	err error
	// failed is the failed local message a refused send left in the chat
	// (SendFailed.MessageID); 0 for none.
	failed MessageID
}

// DefaultSendTimeout is how long Send waits for a send's outcome when
// Session.SendTimeout is zero. TDLib may hold a send for a long flood wait;
// past this the caller reconciles by token rather than wait for ever.
const DefaultSendTimeout = 5 * time.Minute

// maxEarly bounds the results kept for sends whose caller has not yet
// registered (the outcome can arrive before SendDocument returns).
const maxEarly = 4096

// NewSession starts the pump for c. handler receives every update that
// Session does not consume itself (new messages, chat last message, topics,
// content changes, deletions, connection state); it is called from the pump
// goroutine and must return quickly without blocking. It also receives each
// SendSucceeded that no Send was waiting for when it arrived: after a
// restart TDLib finishes the previous session's pending sends by itself,
// under temporary ids this session never issued, and only the caption says
// which delivery the message is. (A Send whose request has not returned yet
// may still claim it, so recording it must be idempotent.)
func NewSession(c Client, handler func(Update)) *Session {
	s := &Session{
		Client:    c,
		handler:   handler,
		sends:     make(map[sendKey]chan sendResult),
		early:     make(map[sendKey]sendResult),
		downloads: make(map[int32][]chan File),
		options:   make(map[string]string),
		done:      make(chan struct{}),
		connSince: time.Now(),
	}
	go s.pump()
	return s
}

// Done is closed when the client's update stream has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

func (s *Session) pump() {
	defer close(s.done)
	for u := range s.Client.Updates() {
		s.learnLast(u)
		switch u := u.(type) {
		case SendSucceeded:
			if !s.resolveSend(sendKey{u.Message.ChatID, u.OldMessageID}, sendResult{msg: u.Message}) {
				s.handler(u)
			}
		case MessagesDeleted:
			// A pending send deleted instead of sent: TDLib reports neither
			// success nor failure for it, so fail its waiter here. Cache
			// evictions delete nothing.
			if !u.FromCache {
				for _, id := range u.IDs {
					if !id.IsServer() {
						s.resolveSend(sendKey{u.Chat, id}, sendResult{err: fmt.Errorf("send to %d: %w", u.Chat, ErrSendVanished)})
					}
				}
			}
			s.handler(u)
		case SendFailed:
			if d, ok := FloodWait(u.Err); ok {
				s.pauseChat(u.Chat, d)
			}
			r := sendResult{err: fmt.Errorf("send to %d: %w: %w", u.Chat, ErrSendRefused, u.Err), failed: u.MessageID}
			if !s.resolveSend(sendKey{u.Chat, u.OldMessageID}, r) && u.MessageID != 0 {
				// Nobody waits for it (a send of an earlier session that
				// TDLib re-sent by itself): nothing will ever resend it.
				s.mu.Lock()
				if len(s.orphans) < maxEarly {
					s.orphans = append(s.orphans, sendKey{u.Chat, u.MessageID})
				}
				s.mu.Unlock()
			}
		case FileUpdated:
			s.fileUpdated(u.File)
		case OptionChanged:
			s.mu.Lock()
			s.options[u.Name] = u.Value
			s.mu.Unlock()
		case ConnectionStateChanged:
			s.mu.Lock()
			if u.State != s.conn {
				s.conn, s.connSince = u.State, time.Now()
			}
			s.mu.Unlock()
			s.handler(u)
		default:
			s.handler(u)
		}
	}
	// Fail everyone still waiting: no outcome can arrive any more.
	s.mu.Lock()
	s.ended = true
	for id, ch := range s.sends {
		ch <- sendResult{err: ErrClosed}
		delete(s.sends, id)
	}
	for id, chs := range s.downloads {
		for _, ch := range chs {
			close(ch)
		}
		delete(s.downloads, id)
	}
	s.mu.Unlock()
}

// resolveSend hands r to the Send waiting for k and reports whether one
// was; otherwise it keeps r for a Send that has not registered yet.
func (s *Session) resolveSend(k sendKey, r sendResult) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.sends[k]; ok {
		delete(s.sends, k)
		ch <- r // buffered, never blocks
		return true
	}
	if len(s.earlyFIFO) >= maxEarly {
		delete(s.early, s.earlyFIFO[0])
		s.earlyFIFO = s.earlyFIFO[1:]
	}
	s.early[k] = r
	s.earlyFIFO = append(s.earlyFIFO, k)
	return false
}

// fileUpdated passes a file's new state to every caller waiting for its
// download. Each waiter's channel holds the latest state: an unread
// progress report is replaced. A final state (complete, or stopped: not
// active) ends the wait, so the waiters are dropped.
func (s *Session) fileUpdated(f File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chs := s.downloads[f.ID]
	if f.DownloadDone || !f.DownloadActive {
		delete(s.downloads, f.ID)
	}
	for _, ch := range chs {
		select {
		case <-ch: // stale progress
		default:
		}
		ch <- f // only the pump writes, under s.mu: there is room now
	}
}

// Option returns the last value TDLib reported for an option.
func (s *Session) Option(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.options[name]
	return v, ok
}

// ConnectionState returns the last reported connection state.
func (s *Session) ConnectionState() ConnectionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// ConnectionSince returns the last reported connection state and how long
// it has held (since the session began when none was reported yet).
func (s *Session) ConnectionSince() (ConnectionState, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn, time.Since(s.connSince)
}

// Send sends a document by remote id and waits until Telegram has accepted
// or refused it, returning the message as it exists on the server. A send
// TDLib deletes instead fails with ErrSendVanished; one without an outcome
// within SendTimeout fails with ErrSendTimeout (it may still land). A send
// refused with 429 in updateMessageSendFailed pauses the sends to that
// chat, not the account (see pauseChat); until the pause ends a Send
// there fails at once with a FloodWaitError (ErrChatFloodWait) carrying
// the rest of the wait.
func (s *Session) Send(ctx context.Context, chat ChatID, remoteFileID, caption string) (Message, error) {
	return s.SendTo(ctx, chat, 0, remoteFileID, caption)
}

// SendTo is Send into forum topic thread of chat; thread 0 is Send.
func (s *Session) SendTo(ctx context.Context, chat ChatID, thread int64, remoteFileID, caption string) (Message, error) {
	rs, err := s.send(ctx, chat, MethodSendMessage, 1, func(ctx context.Context) ([]Message, error) {
		m, err := s.Client.SendDocumentTo(ctx, chat, thread, remoteFileID, caption, SendOptions{Silent: s.Silent})
		return []Message{m}, err
	})
	if err != nil {
		return Message{}, err
	}
	return rs[0].Message, rs[0].Err
}

// pauseChat holds sends to chat for d: Telegram refused a send there with
// 429 in updateMessageSendFailed. Telegram limits the posting rate of
// each chat apart from the account's request rate, so only sends to that
// chat wait; the account's other requests (catch-up, downloads, sends to
// other chats) go on.
func (s *Session) pauseChat(chat ChatID, d time.Duration) {
	s.RestoreChatPause(chat, d)
	s.mu.Lock()
	record := s.onChatPause
	s.mu.Unlock()
	if record != nil {
		record(chat, d)
	}
}

// RecordChatPauses makes the session tell record of every pause of the
// sends to a chat that a 429 starts (d from now), so that the account's
// next run honours a wait that outlives this process
// (RestoreChatPause). record is called from the pump goroutine and must
// not block: neither a database round trip nor a disk write.
func (s *Session) RecordChatPauses(record func(chat ChatID, d time.Duration)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChatPause = record
}

// RestoreChatPause holds sends to chat for d, as a 429 refusing a send
// there does (pauseChat), without telling RecordChatPauses' record: the
// daemon restores a wait an earlier run recorded.
func (s *Session) RestoreChatPause(chat ChatID, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chatPauses == nil {
		s.chatPauses = make(map[ChatID]time.Time)
	}
	now := time.Now()
	if until := now.Add(d); until.After(s.chatPauses[chat]) {
		s.chatPauses[chat] = until
	}
	for c, until := range s.chatPauses {
		if !until.After(now) {
			delete(s.chatPauses, c)
		}
	}
}

// ChatPause returns how long sends to chat still wait after a 429 there
// (zero when they may go).
func (s *Session) ChatPause(chat ChatID) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(time.Until(s.chatPauses[chat]), 0)
}

// SendPause returns how long the account's sends still wait out a flood
// wait (a 429 answering one of the account's requests, or one of its
// sends: Paced); zero when they may go.
func (s *Session) SendPause() time.Duration {
	if p, ok := s.Client.(interface{ SendPausedUntil() time.Time }); ok {
		return max(time.Until(p.SendPausedUntil()), 0)
	}
	return 0
}

// failedDeleteTimeout bounds the deleteMessages that removes a failed
// local message; it runs after the caller's context may have ended.
const failedDeleteTimeout = 10 * time.Second

// deleteFailed deletes the failed local messages ks (and any a re-sent
// send of an earlier session left), one request per chat: TDLib keeps a
// refused send in the chat,
// failed, until it is deleted, and stashd never asks TDLib to resend one:
// a later attempt is a new send with its own outcome. A deletion that
// fails is left to TDLib's own cleanup (the message is local only).
func (s *Session) deleteFailed(ctx context.Context, ks ...sendKey) {
	s.mu.Lock()
	// A failure that beat its Send's registration was kept as an orphan
	// too: it is among ks.
	keys := slices.Clone(ks)
	for _, o := range s.orphans {
		if !slices.Contains(ks, o) {
			keys = append(keys, o)
		}
	}
	s.orphans = nil
	s.mu.Unlock()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failedDeleteTimeout)
	defer cancel()
	byChat := map[ChatID][]MessageID{}
	var chats []ChatID
	for _, k := range keys {
		if byChat[k.chat] == nil {
			chats = append(chats, k.chat)
		}
		byChat[k.chat] = append(byChat[k.chat], k.id)
	}
	for _, c := range chats {
		_ = s.Client.DeleteMessages(dctx, c, byChat[c], true)
	}
}

type sendTurnKey struct{}

type sendTurn struct{ started func() }

// SendTurn waits for the next send's turn in the account's budget (at once
// without one) and returns a context carrying it: a Send with that context
// uses the turn instead of waiting again. done ends the turn (call it
// after the Send, or instead of it); a caller that must record something
// before sending (the delivery intent) thereby writes it only when the
// send can go at once.
func (s *Session) SendTurn(ctx context.Context) (turnCtx context.Context, done func(), err error) {
	if s.Budget == nil {
		return ctx, func() {}, nil
	}
	started, done, err := s.Budget.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("wait for send budget: %w", err)
	}
	return context.WithValue(ctx, sendTurnKey{}, &sendTurn{started: started}), done, nil
}

// DefaultDownloadStall is how long a download may go without progress
// before Download gives up on it, when the caller names no other limit.
const DefaultDownloadStall = 2 * time.Minute

// cancelTimeout bounds the cancelDownloadFile sent when giving up; it runs
// after the caller's context may have ended.
const cancelTimeout = 10 * time.Second

// Download errors. Both are retryable (tg.Classify): a later attempt starts
// the download afresh.
var (
	// ErrDownloadStalled: the download made no progress for the stall limit
	// and was cancelled.
	ErrDownloadStalled = errors.New("download stalled")
	// ErrDownloadStopped: TDLib reported the download neither active nor
	// complete (failed or cancelled); no further update will come.
	ErrDownloadStopped = errors.New("download stopped before completing")
)

// Download starts an asynchronous download of f and waits for it to finish,
// following FileUpdated rather than a synchronous request (which go-tdlib
// would time out after 60 s). The request is always made: f may be a
// snapshot taken when the file was complete, and stashd deletes files once
// used, so only TDLib knows whether the local copy is still there (a file
// still complete returns at once, without updates).
//
// A download ends three ways: complete; stopped by TDLib (an update neither
// active nor complete: ErrDownloadStopped); or stalled, when no progress is
// reported for stall (zero means DefaultDownloadStall) of time the session
// was connected (an outage pauses TDLib's downloads, and the stall clock
// with them): then, as when ctx ends, the download is cancelled in TDLib
// unless another caller still waits for the same file.
func (s *Session) Download(ctx context.Context, f File, stall time.Duration) (File, error) {
	stall = cmp.Or(stall, DefaultDownloadStall)
	// The channel holds the latest state only: the pump replaces an unread
	// progress report rather than block, and a terminal state is the last
	// one it writes.
	ch := make(chan File, 1)
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return File{}, ErrClosed
	}
	s.downloads[f.ID] = append(s.downloads[f.ID], ch)
	s.mu.Unlock()
	unregister := func() (last bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		chs := s.downloads[f.ID]
		for i, c := range chs {
			if c == ch {
				s.downloads[f.ID] = slices.Delete(chs, i, i+1)
				break
			}
		}
		if len(s.downloads[f.ID]) == 0 {
			delete(s.downloads, f.ID)
			return true
		}
		return false
	}
	// giveUp cancels the download in TDLib, unless another caller still
	// waits for it. With settle, it also waits (bounded) for TDLib's report
	// of the stop, so that the report cannot end the next download of the
	// same file.
	giveUp := func(settle bool) {
		s.mu.Lock()
		alone := len(s.downloads[f.ID]) == 1
		s.mu.Unlock()
		if !alone {
			unregister()
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer cancel()
		err := s.Client.CancelDownloadFile(cctx, f.ID)
		for settle && err == nil {
			select {
			case got, ok := <-ch:
				if !ok || got.DownloadDone || !got.DownloadActive {
					unregister()
					return
				}
				continue
			case <-cctx.Done():
			}
			break
		}
		unregister()
	}

	start := func() (File, error) {
		cur, err := s.Client.DownloadFile(ctx, f.ID)
		if err != nil {
			giveUp(false)
			return File{}, fmt.Errorf("download file %d: %w", f.ID, err)
		}
		if cur.DownloadDone && cur.LocalPath != "" {
			unregister()
		}
		return cur, nil
	}
	cur, err := start()
	if err != nil || cur.DownloadDone && cur.LocalPath != "" {
		return cur, err
	}
	progress := cur.Downloaded
	// A stop reported before this download made any progress may be the
	// report of an earlier stop of the same file (a deleteFile or a
	// cancel whose update the pump had not yet handled when this call
	// registered): ask TDLib once more before believing it.
	progressed, rechecked := false, false
	timer := time.NewTimer(stall)
	defer timer.Stop()
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				return File{}, ErrClosed
			}
			if got.Downloaded != progress {
				// Progress, also when a stop brings it: the channel keeps
				// the latest state only, so a stop may replace the report
				// of the progress made before it.
				progress, progressed = got.Downloaded, true
				timer.Reset(stall)
			}
			switch {
			case got.DownloadDone && got.LocalPath != "":
				return got, nil
			case !got.DownloadActive && !progressed && !rechecked:
				rechecked = true
				s.mu.Lock()
				s.downloads[f.ID] = append(s.downloads[f.ID], ch) // the stop dropped every waiter
				s.mu.Unlock()
				cur, err := start()
				if err != nil || cur.DownloadDone && cur.LocalPath != "" {
					return cur, err
				}
			case !got.DownloadActive:
				return File{}, fmt.Errorf("download file %d: %w", f.ID, ErrDownloadStopped)
			}
		case <-timer.C:
			// TDLib downloads nothing while its connection is away: only
			// time connected counts toward a stall.
			switch st, held := s.ConnectionSince(); {
			case st != "" && st != ConnReady:
				timer.Reset(stall)
				continue
			case st == ConnReady && held < stall:
				timer.Reset(stall - held) // back lately
				continue
			}
			giveUp(true)
			return File{}, fmt.Errorf("download file %d: no progress for %s: %w", f.ID, stall, ErrDownloadStalled)
		case <-ctx.Done():
			giveUp(false)
			return File{}, ctx.Err()
		}
	}
}
