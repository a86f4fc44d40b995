package tg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Metrics counts Telegram requests for every account of the process.
type Metrics struct {
	requests  *prometheus.CounterVec
	floodWait *prometheus.CounterVec
}

// NewMetrics registers the request metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_telegram_requests_total",
			Help: "Telegram requests made, by account, TDLib method and result (ok, error, flood_wait; gated: refused before it was made because the account's lease is lost).",
		}, []string{"account", "method", "result"}),
		floodWait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_telegram_flood_wait_seconds_total",
			Help: "Seconds of FLOOD_WAIT Telegram imposed, by account.",
		}, []string{"account"}),
	}
	reg.MustRegister(m.requests, m.floodWait)
	return m
}

// PacedConfig configures one account's request pacing.
type PacedConfig struct {
	// Account labels metrics.
	Account string
	// Rate is the steady request rate per second; zero means 20.
	Rate float64
	// Burst is the token bucket size; zero means 10.
	Burst int
	// MaxFloodWaits is how many flood waits one call sits out before it
	// returns the FloodWaitError to its caller; zero means 3.
	MaxFloodWaits int
	// Gate, when set, is consulted right before every request; a non-nil
	// error is returned instead of making the request. The daemon gates an
	// account on its lease (ErrLeaseLost once the lease's local deadline has
	// passed), so a process resumed after a pause makes no request for an
	// account another instance may already run. Nil: no gate.
	Gate func() error
	// OnPause, when set, is told of every pause a 429 starts (send: only
	// the account's sends; d from now), before the request that met the
	// 429 goes on: the daemon records it, so that the account's next run
	// honours a wait that outlives this process (RestorePause).
	OnPause func(send bool, d time.Duration)
}

// Paced wraps a Client with one account's token-bucket limiter and flood-wait
// pause, and counts every request. A 429 answering a request pauses every
// request of this account, and only this account, until its retry-after
// has passed; a 429 answering a send request (SendMethod) pauses only the
// account's sends, so that its reading (catch-up, downloads) goes on
// while its deliveries wait (a send refused in updateMessageSendFailed
// pauses only the sends to its chat: Session).
type Paced struct {
	Client
	cfg     PacedConfig
	limiter *rate.Limiter
	m       *Metrics

	mu          sync.Mutex
	pausedUntil time.Time
	// sendPausedUntil is when the pause of the account's sends alone
	// (a 429 answering a send) ends.
	sendPausedUntil time.Time
}

// NewPaced wraps c. m may be nil (no metrics).
func NewPaced(c Client, cfg PacedConfig, m *Metrics) *Paced {
	if cfg.Rate <= 0 {
		cfg.Rate = 20
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 10
	}
	if cfg.MaxFloodWaits <= 0 {
		cfg.MaxFloodWaits = 3
	}
	if m != nil {
		m.floodWait.WithLabelValues(cfg.Account) // exported at 0 from the start
	}
	return &Paced{Client: c, cfg: cfg, limiter: rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst), m: m}
}

// PausedUntil returns when the current flood-wait pause of every request
// ends (zero if none).
func (p *Paced) PausedUntil() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pausedUntil
}

// SendPausedUntil returns when the account may send again: the later end
// of the pause of every request and of the pause of its sends.
func (p *Paced) SendPausedUntil() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.until(true)
}

// SendMethod reports whether method sends messages: a 429 answering it
// pauses only the account's sends.
func SendMethod(method string) bool {
	return method == MethodSendMessage || method == MethodSendMessageAlbum
}

// until is when the pause a request (a send or not) waits for ends; p.mu
// held.
func (p *Paced) until(send bool) time.Time {
	if send && p.sendPausedUntil.After(p.pausedUntil) {
		return p.sendPausedUntil
	}
	return p.pausedUntil
}

// wait holds a request of method while the account (or, for a send, its
// sends) is paused by a flood wait, then, unless it is local, takes a
// token. The pause is looked at again once the token comes: another
// request of the account may have met a 429 while this one waited for it.
func (p *Paced) wait(ctx context.Context, method string, local bool) error {
	send := SendMethod(method)
	taken := local
	for {
		p.mu.Lock()
		d := time.Until(p.until(send))
		p.mu.Unlock()
		if d <= 0 && taken {
			return nil
		}
		if d <= 0 {
			if err := p.limiter.Wait(ctx); err != nil {
				return err
			}
			taken = true
			continue
		}
		if !floodWaitsSatOut(ctx) {
			return &FloodWaitError{RetryAfter: d, Err: errors.New("the account is paused by a flood wait")}
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// WithoutFloodWaits returns ctx whose requests through Paced do not sit
// out a flood wait: one made while the account is paused by a flood wait,
// or answered with one, fails at once with the *FloodWaitError (the pause
// still holds the account's other requests). For requests made while
// holding what other accounts wait for, such as a lock: a 429 must pause
// only its own account.
func WithoutFloodWaits(ctx context.Context) context.Context {
	return context.WithValue(ctx, noFloodWaitsKey{}, true)
}

type noFloodWaitsKey struct{}

func floodWaitsSatOut(ctx context.Context) bool {
	no, _ := ctx.Value(noFloodWaitsKey{}).(bool)
	return !no
}

// LocalMethod reports whether TDLib answers method from its own state,
// without a server request: Telegram's request limit does not see it, so
// pacing must not spend the account's budget on it.
func LocalMethod(method string) bool {
	switch method {
	case MethodGetChat, MethodOpenChat, MethodDeleteFile, MethodCancelDownloadFile, MethodGetSupergroup:
		return true
	}
	return false
}

// do runs one request under the account's pacing. Local requests skip the
// token bucket (a flood-wait pause still holds them): spending it on them
// would leave the account below the rate Telegram allows for server
// requests.
func do[T any](ctx context.Context, p *Paced, method string, call func(context.Context) (T, error)) (T, error) {
	var zero T
	local := LocalMethod(method)
	gctx := ctx
	if p.cfg.Gate != nil && !local {
		// The client's method asks the gate again before each further
		// request it makes.
		gctx = WithGate(ctx, p.cfg.Gate)
	}
	for attempt := 1; ; attempt++ {
		if err := p.wait(ctx, method, local); err != nil {
			return zero, err
		}
		// After the wait, which may have been long: the gate must see the
		// moment of the request. Local requests pass: they reach no server,
		// and a stopping account still deletes its downloaded files.
		if p.cfg.Gate != nil && !local {
			if err := p.cfg.Gate(); err != nil {
				p.count(method, "gated")
				return zero, fmt.Errorf("%s: %w", method, err)
			}
		}
		v, err := call(gctx)
		if d, ok := FloodWait(err); ok {
			p.Pause(method, d)
			if attempt >= p.cfg.MaxFloodWaits || !floodWaitsSatOut(ctx) {
				return zero, err
			}
			continue
		}
		if errors.Is(err, ErrLeaseLost) {
			p.count(method, "gated") // a later request of the method was refused
		} else if err != nil && !errors.Is(err, context.Canceled) {
			p.count(method, "error")
		} else if err == nil {
			p.count(method, "ok")
		}
		return v, err
	}
}

// Pause holds every request of the account for d, as a 429 answering a
// request of method does (only its sends, for a SendMethod), counts the
// flood wait and tells PacedConfig.OnPause.
func (p *Paced) Pause(method string, d time.Duration) {
	p.count(method, "flood_wait")
	send := SendMethod(method)
	p.RestorePause(send, d)
	if p.m != nil {
		p.m.floodWait.WithLabelValues(p.cfg.Account).Add(d.Seconds())
	}
	if p.cfg.OnPause != nil {
		p.cfg.OnPause(send, d)
	}
}

// RestorePause holds every request of the account (only its sends, when
// send is set) for d, as Pause does, without counting a flood wait: the
// daemon restores a wait an earlier run recorded, before the account's
// first request.
func (p *Paced) RestorePause(send bool, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	paused := &p.pausedUntil
	if send {
		paused = &p.sendPausedUntil
	}
	if until := time.Now().Add(d); until.After(*paused) {
		*paused = until
	}
}

// CountFloodWait counts a flood wait of d on a request of method without
// pausing the account: Session calls it for a send refused by a chat's
// own limit, which pauses sends to that chat only.
func (p *Paced) CountFloodWait(method string, d time.Duration) {
	p.count(method, "flood_wait")
	if p.m != nil {
		p.m.floodWait.WithLabelValues(p.cfg.Account).Add(d.Seconds())
	}
}

func (p *Paced) count(method, result string) {
	if p.m != nil {
		p.m.requests.WithLabelValues(p.cfg.Account, method, result).Inc()
	}
}

type none struct{}

func do0(ctx context.Context, p *Paced, method string, call func(context.Context) error) error {
	_, err := do(ctx, p, method, func(ctx context.Context) (none, error) { return none{}, call(ctx) })
	return err
}

// LoadChats implements Client.
func (p *Paced) LoadChats(ctx context.Context) error {
	return do0(ctx, p, MethodLoadChats, func(ctx context.Context) error { return p.Client.LoadChats(ctx) })
}

// GetMe implements Client.
func (p *Paced) GetMe(ctx context.Context) (User, error) {
	return do(ctx, p, MethodGetMe, func(ctx context.Context) (User, error) { return p.Client.GetMe(ctx) })
}

// GetChat implements Client.
func (p *Paced) GetChat(ctx context.Context, chat ChatID) (Chat, error) {
	return do(ctx, p, MethodGetChat, func(ctx context.Context) (Chat, error) { return p.Client.GetChat(ctx, chat) })
}

// SearchPublicChat implements Client.
func (p *Paced) SearchPublicChat(ctx context.Context, username string) (Chat, error) {
	return do(ctx, p, MethodSearchPublicChat, func(ctx context.Context) (Chat, error) { return p.Client.SearchPublicChat(ctx, username) })
}

// OpenChat implements Client.
func (p *Paced) OpenChat(ctx context.Context, chat ChatID) error {
	return do0(ctx, p, MethodOpenChat, func(ctx context.Context) error { return p.Client.OpenChat(ctx, chat) })
}

// GetChatHistory implements Client.
func (p *Paced) GetChatHistory(ctx context.Context, chat ChatID, from MessageID, limit int) ([]Message, error) {
	return do(ctx, p, MethodGetChatHistory, func(ctx context.Context) ([]Message, error) { return p.Client.GetChatHistory(ctx, chat, from, limit) })
}

// SearchChatMessages implements Client.
func (p *Paced) SearchChatMessages(ctx context.Context, q Search) ([]Message, error) {
	return do(ctx, p, MethodSearchChatMessages, func(ctx context.Context) ([]Message, error) { return p.Client.SearchChatMessages(ctx, q) })
}

// GetMessage implements Client.
func (p *Paced) GetMessage(ctx context.Context, chat ChatID, id MessageID) (Message, error) {
	return do(ctx, p, MethodGetMessage, func(ctx context.Context) (Message, error) { return p.Client.GetMessage(ctx, chat, id) })
}

// GetChatMessageByDate implements Client.
func (p *Paced) GetChatMessageByDate(ctx context.Context, chat ChatID, date time.Time) (Message, error) {
	return do(ctx, p, MethodGetChatMessageByDate, func(ctx context.Context) (Message, error) { return p.Client.GetChatMessageByDate(ctx, chat, date) })
}

// GetForumTopic implements Client.
func (p *Paced) GetForumTopic(ctx context.Context, chat ChatID, threadID int64) (Topic, error) {
	return do(ctx, p, MethodGetForumTopic, func(ctx context.Context) (Topic, error) { return p.Client.GetForumTopic(ctx, chat, threadID) })
}

// DownloadFile implements Client.
func (p *Paced) DownloadFile(ctx context.Context, file int32) (File, error) {
	return do(ctx, p, MethodDownloadFile, func(ctx context.Context) (File, error) { return p.Client.DownloadFile(ctx, file) })
}

// CancelDownloadFile implements Client.
func (p *Paced) CancelDownloadFile(ctx context.Context, file int32) error {
	return do0(ctx, p, MethodCancelDownloadFile, func(ctx context.Context) error { return p.Client.CancelDownloadFile(ctx, file) })
}

// DeleteFile implements Client.
func (p *Paced) DeleteFile(ctx context.Context, file int32) error {
	return do0(ctx, p, MethodDeleteFile, func(ctx context.Context) error { return p.Client.DeleteFile(ctx, file) })
}

// SendDocument implements Client.
func (p *Paced) SendDocument(ctx context.Context, chat ChatID, remoteFileID, caption string) (Message, error) {
	return do(ctx, p, MethodSendMessage, func(ctx context.Context) (Message, error) {
		return p.Client.SendDocument(ctx, chat, remoteFileID, caption)
	})
}

// SendDocumentTo implements Client.
func (p *Paced) SendDocumentTo(ctx context.Context, chat ChatID, thread int64, remoteFileID, caption string, opts SendOptions) (Message, error) {
	return do(ctx, p, MethodSendMessage, func(ctx context.Context) (Message, error) {
		return p.Client.SendDocumentTo(ctx, chat, thread, remoteFileID, caption, opts)
	})
}

// SendDocumentAlbum implements Client: the album is one request.
func (p *Paced) SendDocumentAlbum(ctx context.Context, chat ChatID, thread int64, items []AlbumItem, opts SendOptions) ([]Message, error) {
	return do(ctx, p, MethodSendMessageAlbum, func(ctx context.Context) ([]Message, error) {
		return p.Client.SendDocumentAlbum(ctx, chat, thread, items, opts)
	})
}

// CreateForumTopic implements Client.
func (p *Paced) CreateForumTopic(ctx context.Context, chat ChatID, name string) (int64, error) {
	return do(ctx, p, MethodCreateForumTopic, func(ctx context.Context) (int64, error) { return p.Client.CreateForumTopic(ctx, chat, name) })
}

// SearchForumTopics implements Client.
func (p *Paced) SearchForumTopics(ctx context.Context, chat ChatID, query string, offset TopicOffset, limit int) (TopicPage, error) {
	return do(ctx, p, MethodGetForumTopics, func(ctx context.Context) (TopicPage, error) {
		return p.Client.SearchForumTopics(ctx, chat, query, offset, limit)
	})
}

// ToggleForumTopicIsClosed implements Client.
func (p *Paced) ToggleForumTopicIsClosed(ctx context.Context, chat ChatID, thread int64, closed bool) error {
	return do0(ctx, p, MethodToggleForumTopicIsClosed, func(ctx context.Context) error {
		return p.Client.ToggleForumTopicIsClosed(ctx, chat, thread, closed)
	})
}

// DeleteMessages implements Client.
func (p *Paced) DeleteMessages(ctx context.Context, chat ChatID, ids []MessageID, revoke bool) error {
	return do0(ctx, p, MethodDeleteMessages, func(ctx context.Context) error { return p.Client.DeleteMessages(ctx, chat, ids, revoke) })
}

// FloodWaitSeconds returns the flood-wait counter of account (for tests and
// status displays).
func (m *Metrics) FloodWaitSeconds(account string) prometheus.Counter {
	return m.floodWait.WithLabelValues(account)
}

// Requests returns the request counter of account, method and result (for
// tests).
func (m *Metrics) Requests(account, method, result string) prometheus.Counter {
	return m.requests.WithLabelValues(account, method, result)
}
