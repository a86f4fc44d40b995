package rescan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/internal/service"
	"stashd/store"
	"stashd/tg"
)

// Telegram is the part of the account's client the rescan calls.
type Telegram interface {
	GetChatMessageByDate(ctx context.Context, chat tg.ChatID, date time.Time) (tg.Message, error)
	SearchChatMessages(ctx context.Context, q tg.Search) ([]tg.Message, error)
}

// Store tells which messages are already handled.
type Store interface {
	// MessageDocument is dedup layer 1 with the unique id of the document
	// the message was handled with: a message whose document an edit
	// replaced since is not handled.
	MessageDocument(ctx context.Context, key tg.MessageKey) (store.Document, error)
}

// Ingest is the one ingest path.
type Ingest interface {
	Process(ctx context.Context, msg tg.Message) (store.Outcome, error)
}

// Config configures a Rescan.
type Config struct {
	// Account whose sources are rescanned.
	Account string
	// Sources are the account's watched chats.
	Sources []tg.ChatID
	// Interval between rescans; zero means 6 h.
	Interval time.Duration
	// Window is how far back a rescan walks; zero means 3 days.
	Window time.Duration
	// OutageThreshold: a connection outage longer than this triggers a
	// rescan when the connection is back; zero means 5 min.
	OutageThreshold time.Duration
	// PageSize is the searchChatMessages limit; zero means 100.
	PageSize int
	// Logger; nil discards.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Metrics are the rescan's Prometheus metrics.
type Metrics struct {
	lastRun prometheus.Gauge
	found   prometheus.Counter
}

// NewMetrics registers the rescan metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stashd_rescan_last_run_timestamp_seconds",
			Help: "Unix time when the last rescan finished.",
		}),
		found: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stashd_rescan_items_found_total",
			Help: "Messages the rescan found unhandled; anything above zero is something the live stream and catch-up missed.",
		}),
	}
	reg.MustRegister(m.lastRun, m.found)
	return m
}

// Rescan re-walks recent documents. See the package doc.
type Rescan struct {
	cfg     Config
	tg      Telegram
	store   Store
	ing     Ingest
	m       *Metrics
	log     *slog.Logger
	run     service.Runner
	trigger chan struct{}

	mu sync.Mutex
	// sources are cfg.Sources and the chats added since (AddSource);
	// replaced, never changed in place, under mu.
	sources []tg.ChatID
}

// AddSource rescans one more chat (a basic group's new supergroup) from
// the next rescan on; a chat already watched is left as it is.
func (r *Rescan) AddSource(chat tg.ChatID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.sources, chat) {
		return
	}
	r.sources = append(slices.Clip(r.sources), chat)
}

// New returns a rescan loop. m may be nil.
func New(cfg Config, t Telegram, st Store, ing Ingest, m *Metrics) *Rescan {
	cfg.Interval = cmp.Or(cfg.Interval, 6*time.Hour)
	cfg.Window = cmp.Or(cfg.Window, 3*24*time.Hour)
	cfg.OutageThreshold = cmp.Or(cfg.OutageThreshold, 5*time.Minute)
	cfg.PageSize = min(cmp.Or(cfg.PageSize, tg.MaxSearchLimit), tg.MaxSearchLimit)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Rescan{cfg: cfg, tg: t, store: st, ing: ing, m: m, trigger: make(chan struct{}, 1), sources: slices.Clip(cfg.Sources),
		log: log.With("component", "rescan", "account", cfg.Account)}
}

// Outage reports that the account was unwatched for d (a connection down,
// a restart, a logout); an outage of OutageThreshold or more triggers a
// rescan, and Outage reports whether it did. It never blocks.
func (r *Rescan) Outage(d time.Duration) bool {
	if d < r.cfg.OutageThreshold {
		return false
	}
	select {
	case r.trigger <- struct{}{}:
	default:
	}
	return true
}

// Start starts the loop. The first periodic rescan runs one Interval after
// start, not at start: start-up is covered by catch-up, and a restart loop
// must not turn into a rescan loop. Only an absence of OutageThreshold or
// more before the start (Outage) rescans at once: edits made meanwhile
// reach no update.
func (r *Rescan) Start(ctx context.Context) error {
	return r.run.StartFunc(ctx, func(ctx context.Context) {
		service.Ticks(ctx, r.cfg.Interval, r.trigger, func(ctx context.Context) {
			res, err := r.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				r.log.Warn("rescan", "err", err)
			}
			if res.Found > 0 {
				r.log.Warn("rescan found unhandled messages", "found", res.Found, "scanned", res.Scanned)
			}
		})
	})
}

// Stop stops the loop and waits for it.
func (r *Rescan) Stop() { r.run.Stop() }

// Result counts what one rescan did.
type Result struct {
	Sources int
	// Scanned documents seen in the window.
	Scanned int
	// Found documents that were not handled yet.
	Found int
}

// RunOnce rescans every source once. Sources fail independently.
func (r *Rescan) RunOnce(ctx context.Context) (Result, error) {
	var res Result
	var errs []error
	since := r.cfg.Now().Add(-r.cfg.Window)
	r.mu.Lock()
	sources := r.sources
	r.mu.Unlock()
	for _, chat := range sources {
		scanned, found, err := r.walk(ctx, chat, since)
		res.Scanned += scanned
		res.Found += found
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("source %d: %w", chat, err))
			continue
		}
		res.Sources++
	}
	if r.m != nil {
		r.m.found.Add(float64(res.Found))
		r.m.lastRun.Set(float64(r.cfg.Now().UnixNano()) / 1e9)
	}
	return res, errors.Join(errs...)
}

func (r *Rescan) walk(ctx context.Context, chat tg.ChatID, since time.Time) (scanned, found int, err error) {
	start, err := r.tg.GetChatMessageByDate(ctx, chat, since)
	switch {
	case errors.Is(err, tg.ErrMessageNotFound):
		start = tg.Message{} // nothing that old: the window is the whole chat
	case err != nil:
		return 0, 0, fmt.Errorf("find start of window: %w", err)
	}
	// The message at or before `since` is outside the window; start after it.
	// It may be the session's own message being sent or failed there (a
	// source that is also a destination): then after the server message it
	// followed.
	from := start.ID.ServerFloor()
	for {
		page, err := tg.DocumentsAfter(ctx, r.tg, chat, from, r.cfg.PageSize)
		if err != nil {
			return scanned, found, err
		}
		if len(page) == 0 {
			return scanned, found, nil
		}
		for _, m := range page {
			scanned++
			doc, err := r.store.MessageDocument(ctx, m.Key())
			if err != nil {
				return scanned, found, err
			}
			// A page the session answered from its database may show a
			// document an edit has replaced since the catalogue recorded
			// the new one: that view is older than the record (Stale).
			replaced := doc.OK && m.Document != nil && doc.UniqueID != "" && doc.UniqueID != m.Document.File.UniqueID &&
				!doc.Stale(m)
			if doc.OK && !replaced {
				continue
			}
			found++
			if replaced {
				r.log.Info("rescan found a source document replaced by an edit", "source", chat, "message", m.ID.ServerID())
			} else {
				r.log.Info("rescan found an unhandled message", "source", chat, "message", m.ID.ServerID())
			}
			if _, err := r.ing.Process(ctx, m); err != nil {
				return scanned, found, err
			}
		}
		from = page[len(page)-1].ID.ServerID()
	}
}

// Found returns the items-found counter (for tests).
func (m *Metrics) Found() prometheus.Counter { return m.found }

// LastRun returns the last-run gauge (for tests).
func (m *Metrics) LastRun() prometheus.Gauge { return m.lastRun }
