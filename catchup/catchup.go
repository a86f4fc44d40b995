package catchup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/internal/service"
	"stashd/listener"
	"stashd/store"
	"stashd/tg"
)

// Store is what catch-up reads and writes.
type Store interface {
	ClaimSources(ctx context.Context, account, owner string, chats []tg.ChatID, ttl time.Duration) ([]store.Source, error)
	ReopenInaccessible(ctx context.Context, account string, chats []tg.ChatID) (int, error)
	FinishScan(ctx context.Context, chat tg.ChatID, owner string, o store.ScanOutcome, p store.ScanPolicy) (store.Source, error)
	AdvanceWatermark(ctx context.Context, chat tg.ChatID, w int64) error
	Sources(ctx context.Context, account string) ([]store.Source, error)
}

// Listener is the live side of each source: its dirty flag and the hand-off.
type Listener interface {
	IsDirty(chat tg.ChatID) bool
	AccessInDoubt(chat tg.ChatID) bool
	AccessMark(chat tg.ChatID) uint64
	AccessRead(chat tg.ChatID, mark uint64)
	TakeRejoined() []tg.ChatID
	MemberSinceLoss(chat tg.ChatID) bool
	CaughtUp(chat tg.ChatID, era store.Era, w int64) bool
	MarkDirty(chat tg.ChatID, reason string)
	Watermark(chat tg.ChatID) (low, lastSeen int64, ok bool)
	Low(chat tg.ChatID, era store.Era) (int64, bool)
	LiveSeen(chat tg.ChatID) int64
	DropHint(chat tg.ChatID, upTo int64)
	Wake() <-chan struct{}
}

// Telegram is the part of the account's client catch-up calls.
type Telegram interface {
	GetChat(ctx context.Context, chat tg.ChatID) (tg.Chat, error)
	GetMessage(ctx context.Context, chat tg.ChatID, id tg.MessageID) (tg.Message, error)
	SearchChatMessages(ctx context.Context, q tg.Search) ([]tg.Message, error)
}

// Ingest is the one ingest path.
type Ingest interface {
	Process(ctx context.Context, msg tg.Message) (store.Outcome, error)
}

// Decisions, as stashd_catchup_decisions_total labels them.
const (
	DecisionSynced  = "skip_synced"
	DecisionNotDue  = "skip_not_due"
	DecisionCurrent = "up_to_date"
	DecisionPaged   = "paged"
	DecisionCircuit = "circuit_open"
	DecisionError   = "error"
)

// Config configures a Catchup loop.
type Config struct {
	// Account whose sources are caught up.
	Account string
	// Owner names this daemon instance in source claims.
	Owner string
	// Sources are the account's watched chats.
	Sources []tg.ChatID
	// Interval is how often the loop looks for dirty sources (it also wakes
	// when the listener marks one dirty); zero means 2 s.
	Interval time.Duration
	// PageSize is the searchChatMessages limit; zero means 100 (the most
	// TDLib allows).
	PageSize int
	// Parallel is how many messages of a page are ingested at once; zero
	// means 4.
	Parallel int
	// ClaimTTL is how long a claim holds before another instance may take
	// the source; zero means 10 min.
	ClaimTTL time.Duration
	// Policy schedules the next scan; zero fields mean: ColdAfter 5 empty
	// scans, ColdDelay 1 min, RetryDelay 10 s, CircuitBase 1 min,
	// MaxDelay 6 h.
	Policy store.ScanPolicy
	// Open, when set, opens a source's chat before its scan reads it
	// (tg.Views.Open, which asks once per session). A channel's updates,
	// and getChat's last message with them, reach only a session that
	// opened it: a source the account's start could not open would
	// otherwise be told of nothing new and its stale last message taken
	// as current. A source still not open fails its scan and stays dirty.
	Open func(ctx context.Context, chat tg.ChatID) error
	// Logger; nil discards.
	Logger *slog.Logger
}

// Metrics are catch-up's Prometheus metrics, shared by every account.
type Metrics struct {
	decisions *prometheus.CounterVec
	circuit   *prometheus.GaugeVec
	// inaccessible is 1 while the account has lost access to a source.
	inaccessible *prometheus.GaugeVec
}

// NewMetrics registers the catch-up metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stashd_catchup_decisions_total",
			Help: "Catch-up decisions per source and cycle (skip_synced, skip_not_due, up_to_date, paged, circuit_open, error).",
		}, []string{"decision"}),
		circuit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_source_circuit_open",
			Help: "1 while a source's circuit is open after permanent failures (it is skipped until the circuit closes).",
		}, []string{"source"}),
		inaccessible: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stashd_source_inaccessible",
			Help: "1 while the account has lost access to a source (server calls answer \"Can't access the chat\" while getChat still succeeds).",
		}, []string{"source"}),
	}
	for _, d := range []string{DecisionSynced, DecisionNotDue, DecisionCurrent, DecisionPaged, DecisionCircuit, DecisionError} {
		m.decisions.WithLabelValues(d)
	}
	reg.MustRegister(m.decisions, m.circuit, m.inaccessible)
	return m
}

// Catchup brings dirty sources of one account back to synced: one local
// getChat when nothing was missed, otherwise paging forward from the
// watermark through the ingest path. See docs/ARCHITECTURE.md.
type Catchup struct {
	cfg   Config
	store Store
	tg    Telegram
	lst   Listener
	ing   Ingest
	m     *Metrics
	log   *slog.Logger
	run   service.Runner

	cycles atomic.Uint64

	mu      sync.Mutex
	cycleCh chan struct{} // closed when the cycle under way completes
	// hints holds, by source, what the server said of the ids below a
	// stored last-seen id (settleHint).
	hints map[tg.ChatID]hint
	// sources are the watched chats: cfg.Sources and those added since
	// (AddSource); replaced, never changed in place, under mu.
	sources []tg.ChatID
	// back holds the sources TDLib reported the account a member of
	// (Listener.TakeRejoined) whose reopening failed, for the next
	// cycle: the listener offers each report once. Under mu.
	back []tg.ChatID
}

// AddSource starts catching up one more chat (a basic group's new
// supergroup) from the next cycle; a chat already watched is left as it is.
func (c *Catchup) AddSource(chat tg.ChatID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.sources, chat) {
		return
	}
	c.sources = append(slices.Clip(c.sources), chat)
}

// observe sets src's circuit and access gauges from its record.
func (c *Catchup) observe(src store.Source) {
	if c.m == nil {
		return
	}
	label := strconv.FormatInt(int64(src.ChatID), 10)
	c.m.circuit.WithLabelValues(label).Set(gauge(!src.CircuitUntil.IsZero()))
	c.m.inaccessible.WithLabelValues(label).Set(gauge(src.Access == store.AccessLost))
}

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Cycles returns how many cycles have completed.
func (c *Catchup) Cycles() uint64 { return c.cycles.Load() }

// NextCycle returns a channel that is closed when the next cycle to
// complete has completed (the one under way, or the next to start).
func (c *Catchup) NextCycle() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cycleCh == nil {
		c.cycleCh = make(chan struct{})
	}
	return c.cycleCh
}

func (c *Catchup) cycleCompleted() {
	c.cycles.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cycleCh != nil {
		close(c.cycleCh)
		c.cycleCh = nil
	}
}

// New returns a catch-up loop. m may be nil.
func New(cfg Config, st Store, t Telegram, l Listener, ing Ingest, m *Metrics) *Catchup {
	cfg.Interval = cmp.Or(cfg.Interval, 2*time.Second)
	cfg.PageSize = min(cmp.Or(cfg.PageSize, tg.MaxSearchLimit), tg.MaxSearchLimit)
	cfg.Parallel = cmp.Or(cfg.Parallel, 4)
	cfg.ClaimTTL = cmp.Or(cfg.ClaimTTL, 10*time.Minute)
	cfg.Policy.ColdAfter = cmp.Or(cfg.Policy.ColdAfter, 5)
	cfg.Policy.ColdDelay = cmp.Or(cfg.Policy.ColdDelay, time.Minute)
	cfg.Policy.RetryDelay = cmp.Or(cfg.Policy.RetryDelay, 10*time.Second)
	cfg.Policy.CircuitBase = cmp.Or(cfg.Policy.CircuitBase, time.Minute)
	cfg.Policy.MaxDelay = cmp.Or(cfg.Policy.MaxDelay, 6*time.Hour)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Catchup{cfg: cfg, store: st, tg: t, lst: l, ing: ing, m: m, sources: slices.Clip(cfg.Sources),
		log: log.With("component", "catchup", "account", cfg.Account)}
}

// Start starts the loop: a cycle at once, then every Interval and whenever
// the listener signals a newly dirty source.
func (c *Catchup) Start(ctx context.Context) error {
	return c.run.StartFunc(ctx, func(ctx context.Context) {
		service.Every(ctx, c.cfg.Interval, c.lst.Wake(), func(ctx context.Context) {
			res, err := c.RunOnce(ctx)
			c.cycleCompleted()
			if err != nil && ctx.Err() == nil {
				c.log.Warn("catch-up cycle", "err", err)
			}
			if res.Paged > 0 {
				c.log.Info("caught up", "sources", res.Paged, "messages", res.Messages)
			}
		})
	})
}

// Stop stops the loop and waits for it.
func (c *Catchup) Stop() { c.run.Stop() }

// Result counts what one cycle did.
type Result struct {
	Synced, NotDue, Current, Paged, Circuit, Errors int
	// Messages handed to ingest.
	Messages int
}

func (c *Catchup) decide(d string) {
	if c.m != nil {
		c.m.decisions.WithLabelValues(d).Inc()
	}
}

// RunOnce runs one catch-up cycle over the account's sources. A synced
// source costs nothing; a dirty one costs one getChat unless it has
// messages to page. Sources fail independently.
func (c *Catchup) RunOnce(ctx context.Context) (Result, error) {
	var res Result
	var dirty []tg.ChatID
	c.mu.Lock()
	sources := c.sources
	c.mu.Unlock()
	for _, chat := range sources {
		if c.lst.IsDirty(chat) {
			dirty = append(dirty, chat)
		} else {
			res.Synced++
			c.decide(DecisionSynced)
		}
	}
	if len(dirty) == 0 {
		return res, nil
	}
	c.mu.Lock()
	back := slices.Concat(c.back, c.lst.TakeRejoined())
	c.back = nil
	c.mu.Unlock()
	if len(back) > 0 {
		// TDLib says the account is a member again: a source recorded
		// inaccessible is read now, not when its circuit closes.
		n, err := c.store.ReopenInaccessible(ctx, c.cfg.Account, back)
		if err != nil {
			// Taken from the listener, the reports are the next cycle's.
			slices.Sort(back)
			c.mu.Lock()
			c.back = slices.Compact(append(c.back, back...))
			c.mu.Unlock()
			return res, err
		}
		if n > 0 {
			c.log.Info("account back in sources recorded inaccessible; reading them", "sources", n)
		}
	}
	claimed, err := c.store.ClaimSources(ctx, c.cfg.Account, c.cfg.Owner, dirty, c.cfg.ClaimTTL)
	if err != nil {
		return res, err
	}
	if len(claimed) < len(dirty) {
		if err := c.countUnclaimed(ctx, dirty, claimed, &res); err != nil {
			return res, err
		}
	}
	var errs []error
	for _, src := range claimed {
		// TDLib reports a public chat the account never joined with the
		// status "left", like one it lost: a scan that then reads it
		// from the server tells the two apart, unless TDLib has since
		// reported the account a member again.
		c.observe(src) // as recorded, until the scan says more
		member := c.lst.MemberSinceLoss(src.ChatID)
		doubt := c.lst.AccessInDoubt(src.ChatID) && !member
		sc := c.scan(ctx, src)
		found, decision, scanErr := sc.found, sc.decision, sc.err
		if scanErr != nil && !c.lst.IsDirty(src.ChatID) {
			// The pages checkpointed before the failure made the source
			// look caught up: what lies above the watermark is read
			// again, once the source is due. A source still dirty is
			// left as it is: marking it would wake the loop at once, and
			// a failure that recurs (a 406, which backs nothing off)
			// would spin it.
			c.lst.MarkDirty(src.ChatID, listener.ReasonScanFailed)
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if tg.Classify(scanErr) == tg.ClassIgnored {
			// TDLib asks for 406 to be dropped silently: the source stays
			// dirty and the next cycle tries again, with no failure counted.
			scanErr = nil
		}
		if errors.Is(scanErr, store.ErrRewound) {
			// The catalogue rewound under the scan, not the source
			// failing: it stays dirty and is read again at once from the
			// catalogue's state as restored, with no failure counted.
			scanErr = nil
		}
		out := store.ScanOutcome{Found: found, Err: scanErr, Permanent: tg.Classify(scanErr) == tg.ClassPermanent,
			NoAccess: errors.Is(scanErr, tg.ErrNoAccess), Protected: sc.chat.Protected, ChatRead: sc.chatRead,
			Read: scanErr == nil && sc.decision == DecisionPaged, NotMember: doubt && scanErr == nil && sc.decision == DecisionPaged, Member: member,
			Account: c.cfg.Account}
		// Recording the outcome must survive the scan's own failure.
		after, err := c.store.FinishScan(ctx, src.ChatID, c.cfg.Owner, out, c.cfg.Policy)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Another account took the source over while it was scanned
			// (or another instance claimed it): its catch-up scans it.
			c.log.Info("source moved on while it was scanned; its outcome is not recorded", "source", src.ChatID, "err", err)
		case err != nil:
			errs = append(errs, err)
		default:
			c.observe(after)
		}
		c.decide(decision)
		res.Messages += found
		switch decision {
		case DecisionCurrent:
			res.Current++
		case DecisionPaged:
			res.Paged++
		case DecisionError:
			res.Errors++
			switch {
			case scanErr == nil:
				// Ignored (406), or refused by a rewind: retried next
				// cycle.
			case out.NoAccess:
				c.log.Warn("source inaccessible: the account lost access; circuit open", "source", src.ChatID, "err", scanErr)
			case out.Permanent:
				c.log.Warn("source failing permanently; circuit open", "source", src.ChatID, "err", scanErr)
			default:
				errs = append(errs, fmt.Errorf("source %d: %w", src.ChatID, scanErr))
			}
		}
	}
	return res, errors.Join(errs...)
}

// countUnclaimed records why dirty sources were not claimed, and
// exports their recorded circuit and access.
func (c *Catchup) countUnclaimed(ctx context.Context, dirty []tg.ChatID, claimed []store.Source, res *Result) error {
	all, err := c.store.Sources(ctx, c.cfg.Account)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, src := range all {
		if !slices.Contains(dirty, src.ChatID) || slices.ContainsFunc(claimed, func(s store.Source) bool { return s.ChatID == src.ChatID }) {
			continue
		}
		c.observe(src) // a restarted daemon shows an open circuit at once
		if src.CircuitUntil.After(now) {
			res.Circuit++
			c.decide(DecisionCircuit)
		} else {
			res.NotDue++
			c.decide(DecisionNotDue)
		}
	}
	return nil
}

// scanResult is what scanning one source did: how many messages it handed
// to ingest, its decision and error, and the chat when it was read.
type scanResult struct {
	found    int
	decision string
	err      error
	chat     tg.Chat
	chatRead bool
}

// scan catches one source up.
func (c *Catchup) scan(ctx context.Context, src store.Source) scanResult {
	// What the scan learns is of the catalogue it read src from: once
	// that rewinds, its watermarks are refused (store.ErrRewound) and the
	// source is read again from the rewound catalogue's.
	ctx = store.WithEra(ctx, src.Era)
	// What this session saw live before it reads the chat: its TDLib
	// applied those updates to the database getChat answers from. Read
	// after getChat, it could name a message posted meanwhile, which the
	// chat as read does not show.
	seen := c.lst.LiveSeen(src.ChatID)
	if c.cfg.Open != nil {
		if err := c.cfg.Open(ctx, src.ChatID); err != nil {
			return scanResult{decision: DecisionError, err: fmt.Errorf("open chat: %w", err)}
		}
	}
	chat, err := c.tg.GetChat(ctx, src.ChatID)
	if err != nil {
		return scanResult{decision: DecisionError, err: fmt.Errorf("get chat: %w", err)}
	}
	found, decision, err := c.scanChat(ctx, src, chat, seen)
	return scanResult{found: found, decision: decision, err: err, chat: chat, chatRead: true}
}

// scanChat pages src forward from its watermark unless chat's last message
// shows nothing was missed. seen is the newest id this session saw live
// before it read chat. It returns how many messages it handed to ingest
// and its decision.
//
// The chat's last message is what the session's TDLib database holds,
// which may lag the server: a session that was not running when messages
// were posted (another instance's, or this one's before a restart) learns
// of them only from its updates. Only ids the session itself saw are
// taken as deleted when the chat's last message is below them; the newest
// id an earlier listener stored (Watermark's lastSeen) keeps the source
// dirty until catch-up or the live stream covers it.
func (c *Catchup) scanChat(ctx context.Context, src store.Source, chat tg.Chat, seen int64) (int, string, error) {
	w := src.Watermark
	if low, ok := c.lst.Low(src.ChatID, src.Era); ok {
		w = max(w, low)
	}
	last := chat.LastMessageID.ServerID()
	// A null (or local) last message is "unknown", not "nothing new": TDLib
	// may add messages to such a chat without updateNewMessage, so the
	// source must page to find out, a new one (w == 0) too.
	known := last > 0
	// After a lost access getChat still answers from local state: only a
	// server call tells whether the source can be read, and it disproves
	// only the losses reported before it (mark): one reported while the
	// scan runs stays in doubt. A source recorded inaccessible is read
	// from the server too, whatever this session heard (a restart, a fetch
	// refused for it): only a scan that paged records it readable again,
	// which makes its letters lost for want of access due
	// (store.FinishScan).
	mark := c.lst.AccessMark(src.ChatID)
	verify := c.lst.AccessInDoubt(src.ChatID) || src.Access == store.AccessLost
	if known && last <= w && !verify {
		if err := c.settleHint(ctx, src.ChatID, max(w, seen), false); err != nil {
			return 0, DecisionError, err
		}
		c.lst.CaughtUp(src.ChatID, src.Era, max(w, seen))
		return 0, DecisionCurrent, nil
	}
	found := 0
	toEnd := false // paged until the server had no document left
	fl := c.newFlow(ctx, src.ChatID, src.Era)
	for {
		page, err := c.page(ctx, src.ChatID, w)
		if err != nil {
			return found, DecisionError, errors.Join(err, fl.wait())
		}
		c.lst.AccessRead(src.ChatID, mark)
		if len(page) == 0 {
			toEnd = true
			break
		}
		if err := fl.add(page); err != nil {
			return found, DecisionError, err
		}
		found += len(page)
		w = page[len(page)-1].ID.ServerID()
		if known && w >= last {
			break
		}
	}
	if err := fl.wait(); err != nil {
		return found, DecisionError, err
	}
	// Every document up to last has been handled, and other messages need
	// nothing: the watermark can jump to last.
	if last > w {
		if err := c.store.AdvanceWatermark(ctx, src.ChatID, last); err != nil {
			return found, DecisionError, err
		}
		w = last
	}
	// Ids this session saw before the read but above the chat's last
	// message were deleted: nothing is left there to wait for.
	if err := c.settleHint(ctx, src.ChatID, max(w, seen), toEnd); err != nil {
		return found, DecisionError, err
	}
	c.lst.CaughtUp(src.ChatID, src.Era, max(w, seen))
	return found, DecisionPaged, nil
}

// settleHint deals with the newest id an earlier listener stored as seen
// (another instance's session, or this one's before a restart) when it
// lies above upTo, everything this session's view of chat accounts for.
// The source stays dirty while any id between them may hold a message
// nothing handled: this session's TDLib may not know of it yet.
//
// Once per session and stored id, the server is asked about those ids,
// newest first (getMessage, which TDLib answers from the server for a
// message its database lacks), at most settleWalk of them. The first that
// exists stops the walk: the session has now learned of it, and the
// cycles after page up to it once its view shows it. Every id above it
// was found gone, so once catch-up has covered up to it (or every id was
// gone) the stored id no longer holds the source dirty. So too once a
// later cycle has paged to the end (toEnd): the walk made the session
// learn of the message it found, so that page came from the server's
// history and left no document unhandled up to its newest. The watermark
// never moves for it. A walk cut short leaves the source dirty, as a
// stored id never asked about does.
func (c *Catchup) settleHint(ctx context.Context, chat tg.ChatID, upTo int64, toEnd bool) error {
	_, stored, ok := c.lst.Watermark(chat)
	if !ok || stored <= upTo {
		return nil
	}
	c.mu.Lock()
	h, asked := c.hints[chat]
	c.mu.Unlock()
	if asked && h.stored == stored && h.found && toEnd {
		c.lst.DropHint(chat, upTo)
		return nil
	}
	if !asked || h.stored != stored {
		h = hint{stored: stored, goneAbove: stored}
	}
	if !h.done {
		// A walk a failed request cut short goes on where it stopped.
		var err error
		for id := h.goneAbove; id > upTo && stored-id < settleWalk; id-- {
			_, err = c.tg.GetMessage(ctx, chat, tg.MessageIDFromServer(id))
			if errors.Is(err, tg.ErrMessageNotFound) {
				h.goneAbove, err = id-1, nil
				continue
			}
			h.found = err == nil
			break
		}
		h.done = err == nil
		c.mu.Lock()
		if c.hints == nil {
			c.hints = make(map[tg.ChatID]hint)
		}
		c.hints[chat] = h
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("get message %d, below the last seen %d: %w", h.goneAbove, stored, err)
		}
		if !h.found && upTo < h.goneAbove {
			c.log.Warn("ids an earlier listener saw could not be settled; the source stays dirty until its next message",
				"source", chat, "last_seen", stored, "asked_down_to", h.goneAbove+1)
		}
	}
	if upTo >= h.goneAbove {
		c.lst.DropHint(chat, upTo)
	}
	return nil
}

// settleWalk bounds the ids below a stored last-seen id settleHint asks
// about: the unhandled tail a stopped instance left is short.
const settleWalk = 64

// hint is what settleHint learned of a stored last-seen id: every id in
// (goneAbove, stored] is gone from the server.
type hint struct {
	stored, goneAbove int64
	// found: the message at goneAbove exists; done: the walk ended (a
	// message found, upTo reached, or settleWalk ids asked).
	found, done bool
}

// page returns the documents of chat newer than server id w, oldest first.
func (c *Catchup) page(ctx context.Context, chat tg.ChatID, w int64) ([]tg.Message, error) {
	return tg.DocumentsAfter(ctx, c.tg, chat, w, c.cfg.PageSize)
}

// Prelocker is an Ingest that can lock messages ahead of processing them,
// several in one round trip (ingest.Pipeline.Prelock).
type Prelocker interface {
	Prelock(ctx context.Context, msgs []tg.Message) (release func())
}

// Inaccessible returns the lost-access gauge of a source (for tests).
func (m *Metrics) Inaccessible(source string) prometheus.Gauge {
	return m.inaccessible.WithLabelValues(source)
}

// CircuitOpen returns the circuit gauge of a source (for tests and status).
func (m *Metrics) CircuitOpen(source string) prometheus.Gauge {
	return m.circuit.WithLabelValues(source)
}
