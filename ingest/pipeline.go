package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/sync/semaphore"

	"stashd/archive"
	"stashd/internal/caption"
	"stashd/internal/service"
	"stashd/route"
	"stashd/store"
	"stashd/tg"
)

// Store is the part of the catalogue ingest uses.
type Store interface {
	Look(ctx context.Context, reads ...store.Statement) error
	ReplaceDocument(ctx context.Context, key tg.MessageKey, oldID, newID string) error
	RecordMessages(ctx context.Context, msgs ...store.SourceMessage) error
	RecordMessage(ctx context.Context, m store.SourceMessage) (bool, error)
	RecordHandled(ctx context.Context, msgs ...store.SourceMessage) error
	PackageByUniqueIDs(ctx context.Context, uniqueIDs []string) (int64, bool, error)
	PackageOfPart(ctx context.Context, uniqueID string) (int64, bool, error)
	AddRemoteFiles(ctx context.Context, pkg int64, uniqueIDs []string) error
	CataloguePackage(ctx context.Context, n store.NewPackage) (store.Catalogued, error)
	GetPackage(ctx context.Context, id int64) (store.Package, error)
	Lock(ctx context.Context, name string, reads ...store.Statement) (*store.Lock, error)
	LockThen(ctx context.Context, name string, reads ...store.Statement) (*store.Lock, error)
	TryLocksThen(ctx context.Context, reqs []store.LockRequest) ([]*store.Lock, error)
	EnsureIntents(ctx context.Context, pkg int64, dest tg.ChatID, parts []int, account string) ([]store.Intent, error)
	MarkSent(ctx context.Context, d store.Delivery, destMsg tg.MessageID) (tg.MessageID, error)
	MarkSentAll(ctx context.Context, ds []store.Delivery, destMsgs []tg.MessageID) ([]tg.MessageID, error)
	MarkSentByToken(ctx context.Context, token string, dest tg.ChatID, destMsg tg.MessageID, account string) (bool, error)
	DeliveryByToken(ctx context.Context, token string, dest tg.ChatID) (store.Delivery, bool, error)
	KeptCopy(ctx context.Context, dest tg.ChatID, uniqueID, token string) (tg.MessageID, bool, error)
	RecordCopy(ctx context.Context, c store.CopyFound) (store.CopyRecord, error)
	NoteStraySends(ctx context.Context, strays ...store.StraySend) error
	StraySends(ctx context.Context, account string) ([]store.StraySend, error)
	ForgetStraySend(ctx context.Context, st store.StraySend) error
	DeliveryPromised(ctx context.Context, pkg int64, dests []tg.ChatID) (bool, error)
	QueueDeliveries(ctx context.Context, pkg int64, ws []store.Waiting) ([]tg.ChatID, error)
	WaitDelivery(ctx context.Context, w store.Waiting) error
	RecordDeadLetter(ctx context.Context, d store.DeadLetter, msg store.SourceMessage) error
	RecordRejected(ctx context.Context, key tg.MessageKey, pkg int64, fileName, reason string) error
	DeadLetterAttempts(ctx context.Context, key tg.MessageKey) (int, error)
	IsRepack(ctx context.Context, pkg int64) (bool, error)
	PendingSets(ctx context.Context, account string) ([]store.PendingSet, error)
	ReviveSet(ctx context.Context, chat tg.ChatID, topic int64, setKey string) (int, error)
	SetParts(ctx context.Context, chat tg.ChatID, topic int64, setKey string) ([]store.SourceMessage, error)
	UpsertTopic(ctx context.Context, t tg.Topic) error
	TopicName(ctx context.Context, chat tg.ChatID, thread int64) (string, bool, error)
	DestinationTopic(ctx context.Context, dest tg.ChatID, name string) (int64, bool, error)
	BeginDestinationTopic(ctx context.Context, dest tg.ChatID, name, account string) error
	ReconcileAsked(ctx context.Context, dest tg.ChatID) (bool, error)
	SetDestinationTopic(ctx context.Context, dest tg.ChatID, name string, thread int64, account string) (int64, error)
	ForgetDestinationTopic(ctx context.Context, dest tg.ChatID, name string, thread int64) error
}

// Telegram is the part of an account's session ingest uses. *tg.Session
// implements it.
type Telegram interface {
	Download(ctx context.Context, f tg.File, stall time.Duration) (tg.File, error)
	DeleteFile(ctx context.Context, file int32) error
	SendTo(ctx context.Context, chat tg.ChatID, thread int64, remoteFileID, caption string) (tg.Message, error)
	CreateForumTopic(ctx context.Context, chat tg.ChatID, name string) (int64, error)
	SearchForumTopics(ctx context.Context, chat tg.ChatID, query string, offset tg.TopicOffset, limit int) (tg.TopicPage, error)
	GetMessage(ctx context.Context, chat tg.ChatID, id tg.MessageID) (tg.Message, error)
	KnownLast(ctx context.Context, chat tg.ChatID) (tg.MessageID, error)
	SearchChatMessages(ctx context.Context, q tg.Search) ([]tg.Message, error)
	GetChatHistory(ctx context.Context, chat tg.ChatID, from tg.MessageID, limit int) ([]tg.Message, error)
	GetForumTopic(ctx context.Context, chat tg.ChatID, threadID int64) (tg.Topic, error)
	DeleteMessages(ctx context.Context, chat tg.ChatID, ids []tg.MessageID, revoke bool) error
	ToggleForumTopicIsClosed(ctx context.Context, chat tg.ChatID, thread int64, closed bool) error
	OpenChat(ctx context.Context, chat tg.ChatID) error
}

// Config configures a Pipeline.
type Config struct {
	// Account is the account whose session the pipeline uses.
	Account string
	// Destinations receive every package when Routes is nil. Empty:
	// packages are catalogued but not delivered.
	Destinations []tg.ChatID
	// Routes, when set and routed, decide each package's destinations from
	// the source that posted it (see package route); Destinations is then
	// ignored.
	Routes *route.Table
	// HandOver, when set, is asked for another account to deliver a
	// package posted in source to dest, one that knows both chats, when
	// this account cannot: refused, it has no write access to dest
	// (TDLib's 400 "Have no write access to the chat"), which HandOver
	// records; otherwise it cannot read source. The delivery waits for
	// that account's window loop. It reports false when no account is
	// left, as nil does: the delivery then waits (tg.ErrNoWriteAccess).
	HandOver func(source, dest tg.ChatID, refused bool) (account string, ok bool)
	// Wrote, when set, is told that this account's send to dest landed: a
	// refusal of write access there recorded for it no longer holds.
	Wrote func(dest tg.ChatID)
	// Spread, when set, picks the account of the daemon that sends each
	// package to each destination, so that one route's sends spread over
	// the accounts' send budgets (see Spread). Nil: this account sends
	// everything it ingests.
	Spread Spread
	// DestPause, when set, says how long before any account of the daemon
	// that could send to dest may do so: the shortest flood wait Telegram
	// gave them there (zero when one may send now). A queued delivery to
	// a paused destination is put off by it before its parts are loaded.
	// Nil: this account's own pause (tg.Session's ChatPause).
	DestPause func(dest tg.ChatID) time.Duration
	// Limits bound archive listings; zero fields take archive's defaults.
	Limits archive.Limits
	// DeadLetterBroken dead-letters a package whose archive fails
	// verification (damaged, cut short) with the reason instead of
	// delivering it with its listing error (serve sets it unless
	// deliver_broken); false mirrors it.
	DeadLetterBroken bool
	// Repacks says what happens to a repack of a catalogued package
	// (config.RepacksSkip, RepacksDeliver, RepacksLink); "" means skip.
	Repacks string
	// SetSettle is how long a multipart set or album must be quiet (no new
	// part) before it is treated as complete; zero means 30 s.
	SetSettle time.Duration
	// Accept, when set, says whether a message is to be mirrored at all
	// (the per-source topic filter); a refused message is recorded as not
	// an archive. Nil accepts everything.
	Accept func(tg.Message) bool
	// SourceSynced, when set, reports whether chat is synced with every
	// message up to server id upTo handled. A set is only complete once its
	// source is: a part lost by the live stream must not be taken for the
	// end of the set. Nil means always.
	SourceSynced func(chat tg.ChatID, upTo int64) bool
	// InFlight, when set, reports whether a message of chat with a server
	// id in [from, to] is queued or being ingested. A set waits while one
	// of the ids around its parts is, even past SetMaxWait: it may be one
	// more part, and a set taken without it is catalogued under the wrong
	// content and delivered again once the rest arrives. Nil means never.
	InFlight func(chat tg.ChatID, from, to int64) bool
	// AccessLost, when set, is told of a source the account turned out
	// to have lost access to while fetching a package (a download stopped
	// and the message could not be read): catch-up then checks the source
	// and records the loss, as it does when an update says so.
	AccessLost func(chat tg.ChatID)
	// SendScope, when set, is what ends a send once its turn is taken:
	// the account's own context, which a crash-like stop, a lost lease or
	// the drain deadline cancels. The send, its wait for Telegram's answer
	// and its record then outlive the loop that made it, so a graceful
	// stop never leaves a message sent but unrecorded; a lost delivery
	// lock still ends them. Nil: the caller's context ends it.
	SendScope context.Context
	// LateSends, when set, names the tokens of the intents this account
	// took over from an account away: a message carrying one that the
	// session reports is recorded (RecordSend) as that account's send.
	LateSends *LateSends
	// SetMaxWait is how long parts wait for their set to complete before the
	// set becomes a dead letter; zero means 1 h.
	SetMaxWait time.Duration
	// Attempts is how many times one message is tried in a row before it
	// becomes a dead letter; zero means 4.
	Attempts int
	// RetryBase is the first in-process retry delay; zero means 200 ms.
	RetryBase time.Duration
	// DeadLetterDelay is the first delay before the retry loop takes a dead
	// letter again (doubling per attempt); zero means 1 min.
	DeadLetterDelay time.Duration
	// DeadLetterAttempts caps the dead-letter retries before a letter is
	// exhausted; zero means 8.
	DeadLetterAttempts int
	// DownloadStall is how long a download may make no progress before it
	// is cancelled and the attempt fails (retryable); zero means
	// tg.DefaultDownloadStall (2 min).
	DownloadStall time.Duration
	// Downloads bounds the packages of a backlog (Backlog: catch-up's
	// pages) this account downloads, hashes and lists at once; zero
	// means 4. A page keeps more messages in flight: those waiting for a
	// lock or for their catalogue's commit hold no download slot.
	Downloads int
	// DownloadBudget bounds the bytes of downloaded archives this account
	// holds on disk at once (downloading, hashing, listing); a package
	// waits until its bytes fit. A package larger than the budget proceeds
	// alone. Zero means DefaultDownloadBudget.
	DownloadBudget int64
	// Views, when set, is the session's views of chats (tg.Views), shared
	// with the account's other readers of its destinations. Nil: the
	// pipeline keeps its own over its client, settling for
	// tg.DefaultViewSettle.
	Views *tg.Views
	// Caption is the template of the captions of sent documents; the zero
	// Template is caption.Default (name and "(part i/n)"). The delivery
	// token is always the caption's last line.
	Caption caption.Template
	// SourceUsernames are the public @usernames (without the @) of the
	// sources configured by name: a caption names such a source by it and
	// links its message publicly. A source not listed is named by its
	// title and linked by its internal id (t.me/c/...).
	SourceUsernames map[tg.ChatID]string
	// Logger; nil discards.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Pipeline is one account's ingest path. It is safe for concurrent use by
// the account's workers, catch-up, rescan and retry loops.
type Pipeline struct {
	cfg   Config
	store Store
	tg    Telegram
	m     *Metrics
	log   *slog.Logger

	// seen remembers messages of pending set parts from this session, so
	// completing a set rarely needs getMessage (file ids are per session),
	// up to maxRemembered of them (keepSeen).
	mu     sync.Mutex
	seen   map[tg.MessageKey]tg.Message
	topics map[topicKey]bool
	// destTopics caches destination topics found or created (topic
	// "same"); the store holds them for good.
	destTopics map[destTopicKey]int64

	// disk is the download budget in bytes (Config.DownloadBudget);
	// slots are a backlog's downloads at once (Config.Downloads).
	disk, slots *semaphore.Weighted
	// setFailures holds the last retryable failure of each pending set,
	// so that a set failing at every sweep is logged once, up to
	// maxRemembered of them (setFailed).
	setFailures map[setID]string
	// notInAlbum holds ids around a set's parts found to be no part of it
	// (deleted, or another message), so each costs one getMessage per set
	// and session, up to maxRemembered of them (notMember).
	notInAlbum map[setProbe]bool
	// queuedParts keeps the messages of parts whose deliveries are queued
	// (bounded by maxKeptParts); wake tells the delivery stage that
	// deliveries were queued.
	queuedParts map[keptKey]keptPart
	wake        chan struct{}

	// prelocked holds layer 3's locks taken ahead for messages about to
	// be handled (Prelock), until Handle claims them; preMu guards it.
	preMu     sync.Mutex
	prelocked map[tg.MessageKey]*uniqueLock
}

// DefaultDownloadBudget is the download budget of an account when the
// configuration names none: 4 GiB.
const DefaultDownloadBudget = 4 << 30

type topicKey struct {
	chat   tg.ChatID
	thread int64
}

// NewPipeline returns a pipeline for one account. m may be nil.
func NewPipeline(cfg Config, st Store, t Telegram, m *Metrics) *Pipeline {
	cfg.SetSettle = cmp.Or(cfg.SetSettle, 30*time.Second)
	cfg.SetMaxWait = cmp.Or(cfg.SetMaxWait, time.Hour)
	cfg.Attempts = cmp.Or(cfg.Attempts, 4)
	cfg.RetryBase = cmp.Or(cfg.RetryBase, 200*time.Millisecond)
	cfg.DeadLetterDelay = cmp.Or(cfg.DeadLetterDelay, time.Minute)
	cfg.DeadLetterAttempts = cmp.Or(cfg.DeadLetterAttempts, 8)
	cfg.DownloadStall = cmp.Or(cfg.DownloadStall, tg.DefaultDownloadStall)
	cfg.DownloadBudget = cmp.Or(cfg.DownloadBudget, DefaultDownloadBudget)
	cfg.Downloads = cmp.Or(max(cfg.Downloads, 0), 4)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Views == nil {
		cfg.Views = tg.NewViews(t.OpenChat, 0)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m != nil {
		m.budget.WithLabelValues(cfg.Account).Set(float64(cfg.DownloadBudget))
		m.onDisk.WithLabelValues(cfg.Account) // exported at 0 from the start
		if cfg.Spread != nil {
			m.spreadSent.WithLabelValues(cfg.Account)
		}
		for _, r := range []string{DownloadStalled, DownloadStopped, DownloadError} {
			m.failed.WithLabelValues(cfg.Account, r)
		}
		m.copiesDeleted.WithLabelValues(cfg.Account) // exported at 0 from the start
		dests := cfg.Destinations
		if cfg.Routes.Routed() {
			dests = cfg.Routes.AllDestinations()
		}
		for _, d := range dests {
			for _, o := range []string{DeliverySent, DeliveryReconciled, DeliveryWaiting, DeliveryHandedOver} {
				m.delivered(d, o, 0)
			}
		}
	}
	return &Pipeline{
		cfg: cfg, store: st, tg: t, m: m,
		log:        log.With("component", "ingest", "account", cfg.Account),
		seen:       map[tg.MessageKey]tg.Message{},
		topics:     map[topicKey]bool{},
		destTopics: map[destTopicKey]int64{},
		disk:       semaphore.NewWeighted(cfg.DownloadBudget),
		slots:      semaphore.NewWeighted(int64(cfg.Downloads)),

		setFailures: map[setID]string{},
		notInAlbum:  map[setProbe]bool{},
		queuedParts: map[keptKey]keptPart{},
		wake:        make(chan struct{}, 1),
	}
}

// Config returns the pipeline's configuration with defaults filled in.
func (p *Pipeline) Config() Config { return p.cfg }

// GetMessage fetches a message through the pipeline's session (a refetch
// after its content changed), as readMessage.
func (p *Pipeline) GetMessage(ctx context.Context, chat tg.ChatID, id tg.MessageID) (tg.Message, error) {
	return p.readMessage(ctx, chat, id)
}

// readMessage reads a source message by id through the session, taking a
// 404 for the message's deletion only once the session's view of chat is
// current (tg.Views): TDLib answers 404 for a channel message newer than
// the last one the session learned through updates (a session that did
// not follow the chat while another instance handled it) and fetches the
// chat's difference instead (MessagesManager::add_message_to_dialog, "too
// new message not from update"). A 404 from a view current already costs
// nothing more; otherwise the message is read again once it is current.
// A view that cannot be brought up to date (openChat failed) fails the
// read with that error: the 404 proves no deletion then. Time is no proof
// either (a difference may take longer than the view's settle): a 404 for
// a message newer than what the session knows of the chat is a
// notSeenError, which no caller takes for a deletion before its retries
// are spent.
func (p *Pipeline) readMessage(ctx context.Context, chat tg.ChatID, id tg.MessageID) (tg.Message, error) {
	asked := time.Now()
	m, err := p.tg.GetMessage(ctx, chat, id)
	if !errors.Is(err, tg.ErrMessageNotFound) {
		return m, err
	}
	stale, verr := p.cfg.Views.StaleAt(ctx, chat, asked)
	switch {
	case !stale:
	case verr != nil:
		return tg.Message{}, fmt.Errorf("read message %d of %d again once the chat is open: %w", id.ServerID(), chat, verr)
	default:
		m, err = p.tg.GetMessage(ctx, chat, id)
	}
	if errors.Is(err, tg.ErrMessageNotFound) && !p.knownPosted(ctx, chat, id) {
		err = &notSeenError{err: err}
	}
	return m, err
}

// Process handles msg with in-process retries by error class and, when they
// are used up or the error is permanent, records a dead letter. It returns
// the outcome; an error means the work was abandoned (ctx ended or the
// dead letter could not be written) and the message is not handled. A
// document an edit replaced before it was fetched gives way to the new
// one, handled in its place; a message recorded by another handling while
// this one ran is handled again at once.
func (p *Pipeline) Process(ctx context.Context, msg tg.Message) (store.Outcome, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.cfg.RetryBase
	b.MaxElapsedTime = 0
	var err error
	for attempt := 1; ; attempt++ {
		var out store.Outcome
		out, err = p.Handle(ctx, msg)
		if err == nil {
			p.count(out)
			return out, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if cur, ok := replacement(err); ok && attempt < p.cfg.Attempts {
			// An edit replaced the document while it was on its way: the
			// new one is the message's now. Its own update may come
			// later, or never (a gap), and meanwhile nothing may record
			// the message for the old one.
			p.log.Info("source document replaced by an edit before it was fetched; mirroring the new one",
				"source", cur.ChatID, "message", cur.ID.ServerID(), "file", cur.Document.FileName)
			msg = cur
			continue
		}
		if errors.Is(err, errRecordedMeanwhile) && attempt < p.cfg.Attempts {
			continue
		}
		class := tg.Classify(err)
		if class == tg.ClassPermanent || attempt >= p.cfg.Attempts {
			break
		}
		wait := b.NextBackOff()
		if d, ok := tg.FloodWait(err); ok {
			wait = d
		}
		p.log.Debug("retrying message", "source", msg.ChatID, "message", msg.ID.ServerID(), "attempt", attempt, "err", err)
		if !service.Sleep(ctx, wait) {
			return "", ctx.Err()
		}
	}
	if dlErr := p.DeadLetter(ctx, msg, err); dlErr != nil {
		return "", errors.Join(err, dlErr)
	}
	p.count(store.OutcomeDeadLetter)
	return store.OutcomeDeadLetter, nil
}

func (p *Pipeline) count(out store.Outcome) {
	if p.m != nil {
		p.m.messages.WithLabelValues(p.cfg.Account, string(out)).Inc()
	}
}

// DeadLetter records msg as a dead letter for err. The next attempt time
// doubles with every failure; a permanent error, or the attempt cap,
// exhausts the letter (only an operator's retry brings it back).
func (p *Pipeline) DeadLetter(ctx context.Context, msg tg.Message, err error) error {
	return p.deadLetter(ctx, msg, err, true)
}

func (p *Pipeline) deadLetter(ctx context.Context, msg tg.Message, err error, logIt bool) error {
	class := tg.Classify(err)
	var ie *IncompleteSetError
	var se *SetFailedError
	waiting := false
	switch {
	case errors.As(err, &ie):
		// It waits for the missing part, not for a timer: the part, when it
		// comes (late, re-posted, or found by catch-up), brings the set back.
		class, waiting = "incomplete_set", true
	case errors.As(err, &se):
		// The set's other parts wait for a late or re-posted part, with
		// backoff and the attempt cap.
		class = "set_failed"
	case cannotRead(err):
		// This account's loss, not the message's: exhausted here, due
		// again for an account that takes the source over.
		class = store.ClassNoAccess
	}
	previous, aerr := p.store.DeadLetterAttempts(ctx, msg.Key())
	if aerr != nil {
		return aerr
	}
	last := previous+1 >= p.cfg.DeadLetterAttempts
	gone := !waiting && deletedAtSource(err)
	var unseen *notSeenError
	if gone && !last && errors.As(err, &unseen) {
		// Perhaps not in this session's view yet: retried, and taken
		// for the deletion only at the last attempt.
		gone, class = false, classUnconfirmed
	}
	d := store.DeadLetter{Key: msg.Key(), Account: p.cfg.Account, ErrorClass: string(class), Reason: err.Error(), Waiting: waiting}
	if !waiting && class != tg.ClassPermanent && class != store.ClassNoAccess && !last {
		d.NextAttemptAt = p.cfg.Now().Add(p.cfg.DeadLetterDelay << min(previous, 16))
	}
	if gone {
		// Terminal: the message is gone, no retry or operator can fetch it.
		d.ErrorClass, d.Deleted, d.NextAttemptAt = classDeleted, true, time.Time{}
		if logIt {
			p.log.Info("source message deleted before its package was fetched; recorded, not retried",
				"source", msg.ChatID, "message", msg.ID.ServerID(), "reason", err)
		}
		return p.store.RecordDeadLetter(ctx, d, sourceMessage(msg, store.OutcomeDeadLetter, 0))
	}
	if logIt {
		p.log.Warn("dead letter", "source", msg.ChatID, "message", msg.ID.ServerID(), "class", class, "attempt", previous+1, "reason", err)
	}
	if err := p.store.RecordDeadLetter(ctx, d, sourceMessage(msg, store.OutcomeDeadLetter, 0)); err != nil {
		return err
	}
	if class == store.ClassNoAccess && p.cfg.AccessLost != nil {
		// The letter recorded the source inaccessible: catch-up reads it
		// again, and finds the loss, or that the account is back, which
		// makes the letter due. Told before the record, a scan in between
		// could have found the account back and passed the letter by.
		p.cfg.AccessLost(msg.ChatID)
	}
	return nil
}

func sourceMessage(msg tg.Message, out store.Outcome, pkg int64) store.SourceMessage {
	sm := store.SourceMessage{
		Key: msg.Key(), TopicID: msg.TopicID(), AlbumID: msg.AlbumID, Date: msg.Date, EditDate: msg.EditDate,
		Outcome: out, PackageID: pkg,
	}
	if d := msg.Document; d != nil {
		sm.FileName, sm.FileSize, sm.UniqueID = d.FileName, d.File.Size, d.File.UniqueID
		if c := classify(msg); c.setKey != "" {
			sm.SetKey, sm.PartIndex = c.setKey, c.part
		}
	}
	return sm
}

// destinations returns where a package as one source posted it goes.
func (p *Pipeline) destinations(in route.Package) []tg.ChatID {
	if !p.cfg.Routes.Routed() {
		return p.cfg.Destinations
	}
	return p.cfg.Routes.Destinations(in)
}

// routeInput is what routing sees of the package parts make up: their
// source and topic, the first part's name and the parts' total size as
// their messages give it.
func routeInput(parts []tg.Message) route.Package {
	in := route.Package{Chat: parts[0].ChatID, Topic: parts[0].TopicID()}
	if d := parts[0].Document; d != nil {
		in.Name = d.FileName
	}
	for _, m := range parts {
		if m.Document != nil {
			in.Size += m.Document.File.Size
		}
	}
	return in
}

// partDelivered reports whether pkg, of which msg carries one part, has
// been delivered, or has its delivery queued, everywhere it must go as
// msg's source posted it. With
// routes that needs the package's name and size: msg alone is one part of
// it (a forwarded part keeps the name and bytes, so the catalogue's stand
// for it).
func (p *Pipeline) partDelivered(ctx context.Context, pkg int64, msg tg.Message) (bool, error) {
	if !p.cfg.Routes.Routed() {
		return p.store.DeliveryPromised(ctx, pkg, p.cfg.Destinations)
	}
	got, err := p.store.GetPackage(ctx, pkg)
	if err != nil {
		return false, err
	}
	in := route.Package{Chat: msg.ChatID, Topic: msg.TopicID(), Name: got.Name, Size: got.TotalSize}
	return p.store.DeliveryPromised(ctx, pkg, p.cfg.Routes.Destinations(in))
}
