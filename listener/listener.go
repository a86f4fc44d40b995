package listener

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"stashd/internal/service"
	"stashd/store"
	"stashd/tg"
)

// Store is what the listener writes: dirty marks, watermarks and topic names.
type Store interface {
	SaveSourceState(ctx context.Context, chat tg.ChatID, dirty bool, reason string, watermark, lastSeen int64) error
	UpsertTopic(ctx context.Context, t tg.Topic) error
	UpdateAccountStatus(ctx context.Context, account string, connected bool, depth, capacity int) error
	ResumeDeliveries(ctx context.Context, dest tg.ChatID, cause string, now time.Time) (int, error)
	NoteEdits(ctx context.Context, account string, edits []store.PendingEdit) error
	ForgetEdits(ctx context.Context, edits []store.PendingEdit) error
	PendingEdits(ctx context.Context, chats []tg.ChatID, limit int) ([]store.PendingEdit, error)
}

// Config configures a Listener.
type Config struct {
	// Account names the account whose updates this listener receives.
	Account string
	// QueueCapacity bounds the ingest queue; zero means 1024.
	QueueCapacity int
	// FlushInterval is how often pending state is written even without a
	// wake-up (a failed write is retried then); zero means 1 s.
	FlushInterval time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// OnReconnect, when set, is called with the length of the outage each
	// time the connection is ready again. It must not block.
	OnReconnect func(down time.Duration)
}

// Item is one unit of ingest work.
type Item struct {
	Message tg.Message
	// Refetch says the message's content changed and must be fetched by id
	// before it is handled.
	Refetch bool
	// Edit is the order of the note of a refetch's edit (edits.go); zero
	// when it was not noted.
	Edit int64
	// Queued is when the item entered the queue.
	Queued time.Time
}

// Dirty reasons.
const (
	ReasonAccessLost  = "access_lost"
	ReasonStart       = "start"
	ReasonGap         = "gap"
	ReasonOverflow    = "overflow"
	ReasonConnection  = "connection"
	ReasonLastMessage = "last_message"
	ReasonScanFailed  = "scan_failed" // a scan failed after storing part of what it read
)

type source struct {
	chat  tg.ChatID
	label string
	// era is the store's era when the source's state was read (Watch):
	// its writes are refused once that era ended, until Watch reads the
	// state again (Behind).
	era    store.Era
	dirty  bool
	reason string
	// lastSeen is the highest server id seen live or covered by catch-up,
	// or stored by an earlier listener of the source (Watch).
	lastSeen int64
	// liveSeen is the highest server id this listener saw live: this
	// session's own updates, which its TDLib applied to its database
	// before reporting them (LiveSeen).
	liveSeen int64
	// low is the low watermark: every id <= low is handled. It moves with
	// live work only while the source is synced.
	low int64
	// done holds handled ids above low.
	done map[int64]struct{}
	// firstLive is the first live id accepted since the source last became
	// dirty; catch-up hands over to the live stream once it reaches it.
	firstLive int64
	// noContinuity: the source's ids are not a per-chat sequence (a basic
	// group takes ids from the account's message box), so a jump is no gap
	// and the watermark moves over handled ids below everything in flight.
	noContinuity bool
	// lostMarks counts reports that the account lost the chat, readMark the
	// last one a later server call disproved (AccessRead); while one is not,
	// catch-up's progress leaves the source dirty (left.go).
	lostMarks, readMark uint64
	// member: TDLib's last report of the account's status was a member's
	// (tg.ChatAccessHeld, not tg.ChatAccessLost). rejoined: such a report
	// came and catch-up has not taken it yet (TakeRejoined).
	member, rejoined bool
}

// Listener is one account's realtime intake. See the package doc.
type Listener struct {
	cfg   Config
	store Store
	m     *Metrics
	log   *slog.Logger
	run   service.Runner

	queue     chan Item
	wake      chan struct{} // the writer goroutine
	dirtyWake chan struct{} // catch-up

	mu       sync.Mutex
	sources  map[tg.ChatID]*source
	left     map[tg.ChatID]bool // see noteLeftLocked
	joined   map[tg.ChatID]bool // see noteHeldLocked
	inflight map[tg.MessageKey]struct{}
	pending  map[tg.ChatID]struct{} // sources whose state must be written
	topics   []tg.Topic
	reopened []tg.ChatID // see topicOpenLocked
	closed   bool
	conn     tg.ConnectionState
	wasReady bool
	lostAt   time.Time
	// awaySince is when the connection last left ready (or the listener
	// began, before the first ready); awayWarned that a long absence was
	// logged.
	awaySince  time.Time
	awayWarned bool
	lastEvent  time.Time
	killed     bool
	// queueFull: the ingest queue overflowed and has not drained below
	// half since; the overflow is logged once per such episode.
	queueFull bool

	// edits are the changed messages whose re-fetch is not handled yet
	// (edits.go); editSeq is the last note's order, editsOnDisk that
	// notes an earlier process left may be waiting in the store.
	edits       map[tg.MessageKey]*edit
	editSeq     int64
	editsOnDisk bool

	// Owned by the writer goroutine: the account status last written.
	statusAt        time.Time
	statusConnected bool
}

// New returns a listener; it watches no source until Watch.
func New(cfg Config, st Store, m *Metrics) *Listener {
	cfg.QueueCapacity = cmp.Or(cfg.QueueCapacity, 1024)
	cfg.FlushInterval = cmp.Or(cfg.FlushInterval, time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Listener{
		cfg: cfg, store: st, m: m,
		log:       log.With("component", "listener", "account", cfg.Account),
		queue:     make(chan Item, cfg.QueueCapacity),
		wake:      make(chan struct{}, 1),
		dirtyWake: make(chan struct{}, 1),
		sources:   map[tg.ChatID]*source{},
		left:      map[tg.ChatID]bool{},
		joined:    map[tg.ChatID]bool{},
		inflight:  map[tg.MessageKey]struct{}{},
		pending:   map[tg.ChatID]struct{}{},
		awaySince: cfg.Now(),

		edits: map[tg.MessageKey]*edit{}, editsOnDisk: true,
	}
	if m != nil {
		m.capacity.WithLabelValues(cfg.Account).Set(float64(cfg.QueueCapacity))
		m.depth.WithLabelValues(cfg.Account).Set(0)
		m.connected.WithLabelValues(cfg.Account).Set(0)
		m.overflows.WithLabelValues(cfg.Account)
		m.reconnects.WithLabelValues(cfg.Account)
	}
	return l
}

// Watch starts tracking a source from its durable state. Every source starts
// dirty: nothing is trusted until a catch-up has looked. Watching it again
// keeps what TDLib told of its access (watchReasonLocked).
func (l *Listener) Watch(src store.Source) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &source{
		chat: src.ChatID, label: strconv.FormatInt(int64(src.ChatID), 10),
		lastSeen: max(src.LastSeen, src.Watermark), low: src.Watermark, done: map[int64]struct{}{}, era: src.Era,
		noContinuity: src.Kind == tg.KindBasicGroup,
	}
	reason := l.watchReasonLocked(st)
	l.sources[src.ChatID] = st
	l.lagLocked(st)
	if l.joined[src.ChatID] {
		delete(l.joined, src.ChatID)
		st.member, st.rejoined = true, true
	}
	l.markDirtyLocked(st, reason)
}

// Queue is the channel ingest workers drain. It is closed by CloseQueue.
func (l *Listener) Queue() <-chan Item { return l.queue }

// Capacity is the queue's capacity.
func (l *Listener) Capacity() int { return cap(l.queue) }

// Start starts the goroutine that writes dirty marks and watermarks.
func (l *Listener) Start(ctx context.Context) error {
	return l.run.StartFunc(ctx, func(ctx context.Context) {
		service.Every(ctx, l.cfg.FlushInterval, l.wake, l.flush)
		l.mu.Lock()
		killed := l.killed
		l.mu.Unlock()
		if killed {
			return
		}
		// Final write with a fresh context: Stop cancelled ctx, but the
		// watermarks of work that finished during the drain must be kept.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		l.flush(fctx)
	})
}

// CloseQueue stops accepting updates and closes the queue, so workers drain
// what is left and exit. Later updates are ignored: start-up marks every
// source dirty, so nothing is lost by ignoring them.
func (l *Listener) CloseQueue() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
}

// Stop closes the queue if needed, writes pending state and stops the
// writer goroutine. Call it after the workers have drained.
func (l *Listener) Stop() {
	l.CloseQueue()
	l.run.Stop()
}

// Kill stops the listener like a crash would: no final write. Used to test
// that nothing depends on a clean shutdown.
func (l *Listener) Kill() {
	l.mu.Lock()
	l.killed = true
	l.mu.Unlock()
	l.Stop()
}

// HandleUpdate takes one update from the session pump. It never blocks.
func (l *Listener) HandleUpdate(u tg.Update) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Now()
	l.lastEvent = now
	if l.m != nil {
		l.m.lastEvent.WithLabelValues(l.cfg.Account).Set(float64(now.UnixNano()) / 1e9)
	}
	switch u := u.(type) {
	case tg.NewMessage:
		l.newMessageLocked(u.Message, now)
	case tg.ChatLastMessage:
		if st := l.sources[u.Chat]; st != nil {
			st.liveSeen = max(st.liveSeen, u.LastMessageID.ServerID())
			if u.LastMessageID.ServerID() > st.lastSeen {
				l.markDirtyLocked(st, ReasonLastMessage)
				// The message exists even though its event never came: the
				// hand-off must wait until catch-up has covered it.
				st.lastSeen = u.LastMessageID.ServerID()
			}
		}
	case tg.ChatAccessLost:
		// Catch-up's next server call finds out and records it.
		if st := l.sources[u.Chat]; st != nil {
			st.member, st.rejoined = false, false
			l.markDirtyLocked(st, ReasonAccessLost)
		} else {
			l.noteLeftLocked(u.Chat)
		}
	case tg.ChatAccessHeld:
		if st := l.sources[u.Chat]; st != nil {
			l.heldLocked(st)
		} else {
			l.noteHeldLocked(u.Chat)
		}
	case tg.ConnectionStateChanged:
		l.connectionLocked(u.State)
	case tg.MessageContentChanged:
		if l.sources[u.Chat] != nil && !l.closed {
			l.contentChangedLocked(tg.MessageKey{Chat: u.Chat, Message: u.Message}, now)
		}
	case tg.ForumTopicInfo:
		if l.sources[u.Topic.ChatID] != nil && len(l.topics) < 1024 {
			l.topics = append(l.topics, u.Topic)
			l.wakeLocked()
		}
		l.topicOpenLocked(u.Topic)
	}
}

func (l *Listener) newMessageLocked(msg tg.Message, now time.Time) {
	st := l.sources[msg.ChatID]
	s := msg.ID.ServerID()
	if st == nil || s == 0 || l.closed {
		return
	}
	st.liveSeen = max(st.liveSeen, s)
	if s <= st.low {
		return // already covered by the watermark
	}
	if st.lastSeen != 0 && s > st.lastSeen+1 && !st.noContinuity {
		l.markDirtyLocked(st, ReasonGap)
	}
	if s > st.lastSeen {
		st.lastSeen = s
		l.pending[st.chat] = struct{}{} // written with the next flush
	}

	if msg.Document == nil {
		// Nothing to ingest: handled as soon as seen.
		l.acceptLiveLocked(st, s)
		l.doneLocked(st, s)
		return
	}
	if _, ok := l.inflight[msg.Key()]; ok {
		return
	}
	if !l.enqueueLocked(Item{Message: msg, Queued: now}) {
		if l.m != nil {
			l.m.overflows.WithLabelValues(l.cfg.Account).Inc()
		}
		l.markDirtyLocked(st, ReasonOverflow)
		l.overflowLocked(st.chat, "source marked dirty; its catch-up fetches what was dropped")
		return
	}
	l.inflight[msg.Key()] = struct{}{}
	l.acceptLiveLocked(st, s)
}

// overflowLocked logs a full ingest queue once per episode: again only
// after the queue drained below half (stashd_listener_overflows_total
// counts every dropped update).
func (l *Listener) overflowLocked(chat tg.ChatID, what string) {
	if l.queueFull {
		return
	}
	l.queueFull = true
	l.log.Warn("ingest queue full: "+what+"; not logged again until the queue drains below half",
		"source", chat, "capacity", cap(l.queue))
}

func (l *Listener) enqueueLocked(item Item) bool {
	if l.queueFull && len(l.queue) < cap(l.queue)/2 {
		l.queueFull = false
		l.log.Info("ingest queue drained below half after being full", "depth", len(l.queue), "capacity", cap(l.queue))
	}
	select {
	case l.queue <- item:
		if l.m != nil {
			l.m.depth.WithLabelValues(l.cfg.Account).Set(float64(len(l.queue)))
		}
		return true
	default:
		return false
	}
}

func (l *Listener) acceptLiveLocked(st *source, s int64) {
	if st.dirty && st.firstLive == 0 {
		st.firstLive = s
	}
}

func (l *Listener) connectionLocked(state tg.ConnectionState) {
	prev := l.conn
	l.conn = state
	ready := state == tg.ConnReady
	if l.m != nil {
		connected := 0.0
		if ready {
			connected = 1
		}
		l.m.connected.WithLabelValues(l.cfg.Account).Set(connected)
		for _, st := range connStates {
			v := 0.0
			if st == state {
				v = 1
			}
			l.m.connState.WithLabelValues(l.cfg.Account, connStateLabel(st)).Set(v)
		}
	}
	switch {
	case ready:
		if l.awayWarned {
			l.log.Info("Telegram reachable again", "away", l.cfg.Now().Sub(l.awaySince).Round(time.Second).String())
		}
		l.awayWarned = false
	case prev == tg.ConnReady:
		l.awaySince = l.cfg.Now()
	}
	switch {
	case ready && prev != tg.ConnReady:
		if l.wasReady && l.m != nil {
			l.m.reconnects.WithLabelValues(l.cfg.Account).Inc()
		}
		if l.wasReady {
			down := l.cfg.Now().Sub(l.lostAt)
			l.log.Info("connection ready again", "down", down)
			if l.cfg.OnReconnect != nil {
				l.cfg.OnReconnect(down)
			}
		}
		l.wasReady = true
	case !ready && prev == tg.ConnReady:
		l.lostAt = l.cfg.Now()
		l.log.Info("connection lost: sources marked dirty", "state", state)
		for _, st := range l.sources {
			l.markDirtyLocked(st, ReasonConnection)
		}
	}
}

func (l *Listener) markDirtyLocked(st *source, reason string) {
	if !st.dirty {
		l.log.Debug("source dirty", "source", st.chat, "reason", reason)
	}
	st.dirty = true
	st.reason = reason
	if reason == ReasonAccessLost {
		st.lostMarks++
	}
	// Any new doubt moves the hand-off point: only live events accepted
	// after it are known to be contiguous.
	st.firstLive = 0
	if l.m != nil {
		l.m.dirty.WithLabelValues(st.label).Set(1)
	}
	l.pending[st.chat] = struct{}{}
	l.wakeLocked()
	select {
	case l.dirtyWake <- struct{}{}:
	default:
	}
}

// Wake signals (coalesced) that a source became dirty.
func (l *Listener) Wake() <-chan struct{} { return l.dirtyWake }

func (l *Listener) wakeLocked() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Done reports that a worker has finished an item: ingested, recognised as
// a duplicate, not an archive, or recorded as a dead letter. It must not be
// called for work that was abandoned (cancelled): that work is found again
// by catch-up. A re-fetch (Refetch) is done once it is handled, its
// message found deleted or unreadable, or recorded as a dead letter.
func (l *Listener) Done(item Item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m != nil {
		l.m.depth.WithLabelValues(l.cfg.Account).Set(float64(len(l.queue)))
	}
	if item.Refetch {
		l.editDoneLocked(item, true)
		return // content changes do not move the watermark
	}
	delete(l.inflight, item.Message.Key())
	if st := l.sources[item.Message.ChatID]; st != nil {
		l.doneLocked(st, item.Message.ID.ServerID())
	}
}

// Release forgets an abandoned item without marking it handled, so a later
// live event for the same message is accepted again. An abandoned re-fetch
// keeps its note, fetched again at the next start.
func (l *Listener) Release(item Item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if item.Refetch {
		l.editDoneLocked(item, false)
	} else {
		delete(l.inflight, item.Message.Key())
		// Without id continuity nothing else would hold the watermark
		// below the abandoned message: leave it to catch-up.
		if st := l.sources[item.Message.ChatID]; st != nil && st.noContinuity {
			l.markDirtyLocked(st, ReasonGap)
		}
	}
}

func (l *Listener) doneLocked(st *source, s int64) {
	if s <= st.low {
		return
	}
	st.done[s] = struct{}{}
	l.advanceLocked(st)
}

// advanceSparseLocked moves the low watermark of a source without id
// continuity to its highest handled id below every id of it still in
// flight.
func (l *Listener) advanceSparseLocked(st *source) bool {
	ceiling := int64(math.MaxInt64)
	for k := range l.inflight {
		if k.Chat == st.chat {
			ceiling = min(ceiling, k.Message.ServerID()-1)
		}
	}
	moved := false
	for s := range st.done {
		if s > ceiling {
			continue
		}
		delete(st.done, s)
		if s > st.low {
			st.low, moved = s, true
		}
	}
	return moved
}

// advanceLocked moves a synced source's low watermark over contiguous
// handled ids. A dirty source keeps its done set for the hand-off.
func (l *Listener) advanceLocked(st *source) {
	if st.dirty {
		return
	}
	moved := false
	if st.noContinuity {
		moved = l.advanceSparseLocked(st)
	}
	for {
		if _, ok := st.done[st.low+1]; !ok {
			break
		}
		delete(st.done, st.low+1)
		st.low++
		moved = true
	}
	if moved {
		// Written with the next periodic flush, not at once: this runs
		// for every handled message, and a watermark that lags on disk
		// only costs a re-check after a crash.
		l.pending[st.chat] = struct{}{}
	}
	l.lagLocked(st)
}

func (l *Listener) lagLocked(st *source) {
	if l.m != nil {
		l.m.lag.WithLabelValues(st.label).Set(float64(max(st.lastSeen-st.low, 0)))
	}
}

// IsDirty reports whether chat needs a catch-up (true for unknown chats).
func (l *Listener) IsDirty(chat tg.ChatID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.sources[chat]
	return st == nil || st.dirty
}

// MarkDirty marks chat dirty from outside the update stream (e.g. a failed
// openChat).
func (l *Listener) MarkDirty(chat tg.ChatID, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.sources[chat]; st != nil {
		l.markDirtyLocked(st, reason)
	}
}

// InFlight reports whether a message of chat with a server id in [from, to]
// is queued or being ingested: seen by the live stream but not handled yet.
// Such a message may be one more part of a set whose parts are near that
// range (an album's documents have consecutive ids and arrive as separate
// updates), so the set must not be taken as complete while it is.
func (l *Listener) InFlight(chat tg.ChatID, from, to int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.inflight {
		if s := k.Message.ServerID(); k.Chat == chat && s >= from && s <= to {
			return true
		}
	}
	return false
}

// flush writes the state of every source whose state changed.
func (l *Listener) flush(ctx context.Context) {
	type write struct {
		chat     tg.ChatID
		era      store.Era
		dirty    bool
		reason   string
		low      int64
		lastSeen int64
	}
	l.mu.Lock()
	writes := make([]write, 0, len(l.pending))
	for chat := range l.pending {
		st := l.sources[chat]
		writes = append(writes, write{chat: chat, era: st.era, dirty: st.dirty, reason: st.reason, low: st.low, lastSeen: st.lastSeen})
		delete(l.pending, chat)
	}
	topics := l.topics
	l.topics = nil
	reopened := l.reopened
	l.reopened = nil
	connected, depth := l.conn == tg.ConnReady, len(l.queue)
	if away := l.cfg.Now().Sub(l.awaySince); !connected && !l.awayWarned && away >= unreachableAfter {
		l.awayWarned = true
		l.log.Warn("Telegram unreachable: check the host's network, or set a proxy (the proxy setting)",
			"state", cmp.Or(string(l.conn), "not connected yet"), "for", away.Round(time.Second).String())
	}
	l.mu.Unlock()

	// The status is for people (stashd status): written when the
	// connection changes, otherwise once per flush interval.
	if now := l.cfg.Now(); connected != l.statusConnected || now.Sub(l.statusAt) >= l.cfg.FlushInterval {
		if err := l.store.UpdateAccountStatus(ctx, l.cfg.Account, connected, depth, cap(l.queue)); err != nil {
			if ctx.Err() == nil {
				l.log.Warn("write account status", "err", err)
			}
		} else {
			l.statusAt, l.statusConnected = now, connected
		}
	}

	var failed []tg.ChatID
	for _, w := range writes {
		err := l.store.SaveSourceState(store.WithEra(ctx, w.era), w.chat, w.dirty, w.reason, w.low, w.lastSeen)
		if err != nil {
			// Learnt before the catalogue rewound: kept pending for the
			// state Watch reads again (Behind).
			failed = append(failed, w.chat)
			if ctx.Err() == nil && !errors.Is(err, store.ErrRewound) {
				l.log.Warn("write source state", "source", w.chat, "err", err)
			}
		}
	}
	for _, t := range topics {
		if err := l.store.UpsertTopic(ctx, t); err != nil && ctx.Err() == nil {
			l.log.Warn("write topic", "source", t.ChatID, "topic", t.ThreadID, "err", err)
		}
	}
	l.resumeDeliveries(ctx, reopened)
	l.flushEdits(ctx)
	if len(failed) > 0 {
		l.mu.Lock()
		for _, c := range failed {
			l.pending[c] = struct{}{}
		}
		l.mu.Unlock()
	}
}

// unreachableAfter is how long an account may be away from Telegram before
// the listener says so: TDLib's own reconnects take a few seconds.
const unreachableAfter = 10 * time.Second

// connStates are TDLib's connection states, as the state metric labels
// them.
var connStates = []tg.ConnectionState{tg.ConnWaitingForNetwork, tg.ConnConnectingToProxy, tg.ConnConnecting, tg.ConnUpdating, tg.ConnReady}

func connStateLabel(s tg.ConnectionState) string {
	switch s {
	case tg.ConnWaitingForNetwork:
		return "waiting_for_network"
	case tg.ConnConnectingToProxy:
		return "connecting_to_proxy"
	case tg.ConnConnecting:
		return "connecting"
	case tg.ConnUpdating:
		return "updating"
	case tg.ConnReady:
		return "ready"
	}
	return "unknown"
}
