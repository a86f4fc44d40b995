package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AccountAway returns how long ago the account's status was last written
// (by whichever instance ran it), by the database's clock; ok is false when
// it never was. Read before the account starts, it is how long nothing
// watched the account's sources.
func (s *Store) AccountAway(ctx context.Context, account string) (away time.Duration, ok bool, err error) {
	var secs *float64
	err = s.pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - status_at)::float8 FROM accounts WHERE name = $1`,
		account).Scan(&secs)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && secs == nil {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read account %s's last status: %w", account, err)
	}
	return time.Duration(*secs * float64(time.Second)), true, nil
}

// UpdateAccountStatus records what the running daemon sees of an account.
func (s *Store) UpdateAccountStatus(ctx context.Context, account string, connected bool, depth, capacity int) error {
	_, err := s.pool.Exec(ctx, `UPDATE accounts SET connected = $2, queue_depth = $3, queue_capacity = $4,
		status_at = now() WHERE name = $1`, account, connected, depth, capacity)
	if err != nil {
		return fmt.Errorf("update status of account %s: %w", account, err)
	}
	return nil
}

// AccountStatus is one account as `stashd status` shows it.
type AccountStatus struct {
	Name          string     `json:"name"`
	Premium       bool       `json:"premium"`
	Connected     bool       `json:"connected"`
	QueueDepth    int        `json:"queue_depth"`
	QueueCapacity int        `json:"queue_capacity"`
	StatusAt      *time.Time `json:"status_at"`
	// Owner is the instance holding the account's lease ("" when nobody
	// does: released, or lapsed), Epoch the lease's acquisition count,
	// LeaseUntil when it lapses unless renewed (or when it was released),
	// LeaseTakenAt when the owner took it.
	Owner        string     `json:"owner"`
	Epoch        int64      `json:"epoch"`
	LeaseUntil   *time.Time `json:"lease_until"`
	LeaseTakenAt *time.Time `json:"lease_taken_at,omitempty"`
	// OwnerlessSeconds is how long the account has had no owner (its lease
	// lapsed or was released and nobody took it); 0 while it has one.
	OwnerlessSeconds float64 `json:"ownerless_seconds"`
	// ConfigFingerprint is the fingerprint of the account's configuration
	// its last lease holder wrote ("" when not recorded), and
	// ConfigMismatches the instances that found theirs differing from it.
	ConfigFingerprint string           `json:"config_fingerprint,omitempty"`
	ConfigMismatches  []ConfigMismatch `json:"config_mismatches,omitempty"`
}

// SourceStatus is one source as `stashd status` shows it.
type SourceStatus struct {
	ChatID       int64      `json:"chat_id"`
	Account      string     `json:"account"`
	Kind         string     `json:"kind"`
	Title        string     `json:"title"`
	State        string     `json:"state"`
	DirtyReason  string     `json:"dirty_reason,omitempty"`
	Watermark    int64      `json:"watermark"`
	LastSeen     int64      `json:"last_seen"`
	Lag          int64      `json:"lag"`
	LastScanAt   *time.Time `json:"last_scan_at"`
	CircuitUntil *time.Time `json:"circuit_until,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	Packages     int        `json:"packages"`
	// Access is "ok" or "inaccessible" (the account lost the chat), with
	// the error that said so.
	Access       string `json:"access"`
	AccessReason string `json:"access_reason,omitempty"`
	// Protected: the source protects its content; its documents cannot be
	// re-sent and are recorded as dead letters with that reason.
	Protected bool `json:"protected"`
	// ProtectedDocuments counts the source's documents recorded as dead
	// letters because their content is protected.
	ProtectedDocuments int `json:"protected_documents"`
	// UpgradedTo is the supergroup this basic group was upgraded to (a
	// source of its own, followed by the daemon); 0 when none.
	UpgradedTo int64 `json:"upgraded_to,omitempty"`
	// DeliveriesDue counts the queued deliveries due now of the source's
	// packages; a source is "synced" only with none, else "delivering".
	DeliveriesDue int `json:"deliveries_due"`
	// ReplacedDocuments counts the source's documents that edits replaced
	// (each replacement was mirrored as a document of its own).
	ReplacedDocuments int `json:"replaced_documents"`
	// DeletedAtSource counts the source's messages deleted before their
	// package was fetched (dead letters in state deleted).
	DeletedAtSource int `json:"deleted_at_source"`
}

// Status is the whole report.
type Status struct {
	Accounts    []AccountStatus `json:"accounts"`
	Sources     []SourceStatus  `json:"sources"`
	DeadLetters map[string]int  `json:"dead_letters"`
	Packages    int             `json:"packages"`
	Deliveries  map[string]int  `json:"deliveries"`
	// Backfills are the walks of routes added after packages were
	// catalogued (finished ones included).
	Backfills []BackfillStatus `json:"backfills,omitempty"`
	// Waiting counts deliveries held by delivery windows.
	Waiting []WaitingStatus `json:"waiting,omitempty"`
	// Deferred are the deliveries a failure put off (a destination no
	// account may post in, a failed send), by account and destination.
	Deferred []DeferredStatus `json:"deferred,omitempty"`
	// Partial are windows that closed with deliveries still waiting.
	Partial []WindowReport `json:"partial_windows,omitempty"`
	// Backlog is the delivery backlog due now, by destination, with the
	// time to drain it at the sending accounts' budgets.
	Backlog []DestinationBacklog `json:"backlog"`
	// Reconciles are the destinations' reconciliations after a rewind that
	// still hold their sends, and those given up.
	Reconciles []Reconcile `json:"reconciles,omitempty"`
	// RenamedNames are configured @usernames that no longer lead to the
	// chat they first resolved to (the chat is still followed).
	RenamedNames []ChatName `json:"renamed_names,omitempty"`
	// Logins are the accounts' login states as the daemon last found
	// them (an account not logged in is not run).
	Logins []AccountAuth `json:"logins"`
}

// BackfillStatus is one route backfill as `stashd status` shows it.
type BackfillStatus struct {
	Route     string     `json:"route"`
	Account   string     `json:"account"`
	Walked    int        `json:"walked"`
	Remaining int        `json:"remaining"`
	Matched   int        `json:"matched"`
	Delivered int        `json:"delivered"`
	Failed    int        `json:"failed"`
	LastError string     `json:"last_error,omitempty"`
	DoneAt    *time.Time `json:"done_at,omitempty"`
}

// ProtectedReasonPattern matches (SQL LIKE) the reason of a dead letter
// whose document has protected content (tg.ErrProtectedContent).
const ProtectedReasonPattern = "%protected content%"

// Status reads the report `stashd status` prints.
func (s *Store) Status(ctx context.Context) (Status, error) {
	var st Status
	logins, err := s.AccountAuths(ctx)
	if err != nil {
		return st, err
	}
	st.Logins = logins
	// A lapsed lease keeps its owner in the row; status shows it as no
	// owner, as the next acquirer will.
	rows, err := s.pool.Query(ctx, `SELECT name, is_premium, connected, queue_depth, queue_capacity, status_at,
			CASE WHEN lease_until > now() THEN coalesce(lease_owner, '') ELSE '' END, lease_epoch, lease_until, lease_taken_at,
			CASE WHEN lease_owner IS NOT NULL AND lease_until > now() OR lease_until IS NULL THEN 0
				ELSE extract(epoch FROM now() - lease_until)::float8 END,
			coalesce(config_fingerprint, '')
		FROM accounts ORDER BY name`)
	if err != nil {
		return st, fmt.Errorf("read accounts: %w", err)
	}
	st.Accounts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AccountStatus, error) {
		var a AccountStatus
		err := r.Scan(&a.Name, &a.Premium, &a.Connected, &a.QueueDepth, &a.QueueCapacity, &a.StatusAt,
			&a.Owner, &a.Epoch, &a.LeaseUntil, &a.LeaseTakenAt, &a.OwnerlessSeconds, &a.ConfigFingerprint)
		return a, err
	})
	if err != nil {
		return st, fmt.Errorf("read accounts: %w", err)
	}
	if err := s.configMismatches(ctx, st.Accounts); err != nil {
		return st, err
	}
	rows, err = s.pool.Query(ctx, `SELECT s.chat_id, s.account, s.kind, s.title,
			CASE WHEN s.circuit_until > now() THEN 'circuit_open' WHEN s.dirty THEN 'dirty' ELSE 'synced' END,
			s.dirty_reason, s.watermark, s.last_seen, s.last_scan_at,
			CASE WHEN s.circuit_until > now() THEN s.circuit_until END, s.last_error,
			(SELECT count(DISTINCT package_id) FROM source_messages m WHERE m.chat_id = s.chat_id AND m.package_id IS NOT NULL),
			s.access, s.access_reason, s.protected,
			(SELECT count(*) FROM dead_letters d WHERE d.chat_id = s.chat_id AND d.reason LIKE $1),
			s.upgraded_to
		FROM sources s ORDER BY s.account, s.chat_id`, ProtectedReasonPattern)
	if err != nil {
		return st, fmt.Errorf("read sources: %w", err)
	}
	st.Sources, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SourceStatus, error) {
		var x SourceStatus
		err := r.Scan(&x.ChatID, &x.Account, &x.Kind, &x.Title, &x.State, &x.DirtyReason, &x.Watermark,
			&x.LastSeen, &x.LastScanAt, &x.CircuitUntil, &x.LastError, &x.Packages,
			&x.Access, &x.AccessReason, &x.Protected, &x.ProtectedDocuments, &x.UpgradedTo)
		x.Lag = max(x.LastSeen-x.Watermark, 0)
		return x, err
	})
	if err != nil {
		return st, fmt.Errorf("read sources: %w", err)
	}
	dl, err := s.DeadLetterCounts(ctx)
	if err != nil {
		return st, err
	}
	st.DeadLetters = map[string]int{}
	for k, v := range dl {
		st.DeadLetters[string(k)] = v
	}
	dc, err := s.DeliveryCounts(ctx)
	if err != nil {
		return st, err
	}
	st.Deliveries = map[string]int{}
	for k, v := range dc {
		st.Deliveries[string(k)] = v
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM packages`).Scan(&st.Packages); err != nil {
		return st, fmt.Errorf("count packages: %w", err)
	}
	if err := s.sourceEventStatus(ctx, &st); err != nil {
		return st, err
	}
	if err := s.deferredStatus(ctx, &st); err != nil {
		return st, err
	}
	if err := s.windowStatus(ctx, &st); err != nil {
		return st, err
	}
	if err := s.backlogStatus(ctx, &st); err != nil {
		return st, err
	}
	bs, err := s.Backfills(ctx)
	if err != nil {
		return st, err
	}
	for _, b := range bs {
		st.Backfills = append(st.Backfills, BackfillStatus{Route: b.Name, Account: b.Account, Walked: b.Walked, Remaining: b.Remaining,
			Matched: b.Matched, Delivered: b.Delivered, Failed: b.Failed, LastError: b.LastError, DoneAt: b.DoneAt})
	}
	rs, err := s.Reconciles(ctx)
	if err != nil {
		return st, err
	}
	for _, r := range rs {
		if r.FinishedAt.IsZero() || r.GaveUp {
			st.Reconciles = append(st.Reconciles, r)
		}
	}
	return st, nil
}

// configMismatches fills in the accounts' configuration mismatches: those
// found against the configuration the account carries now, by instances
// still renewing them.
func (s *Store) configMismatches(ctx context.Context, accounts []AccountStatus) error {
	rows, err := s.pool.Query(ctx, `SELECT m.account, m.instance, m.holder, m.holder_fingerprint, m.fingerprint, m.differs, m.since, m.until
		FROM config_mismatches m JOIN accounts a ON a.name = m.account AND a.config_fingerprint = m.holder_fingerprint
		WHERE m.until > now()
		ORDER BY m.account, m.instance`)
	if err != nil {
		return fmt.Errorf("read configuration mismatches: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ConfigMismatch, error) {
		var m ConfigMismatch
		err := r.Scan(&m.Account, &m.Instance, &m.Holder, &m.HolderFingerprint, &m.Fingerprint, &m.Differs, &m.Since, &m.Until)
		return m, err
	})
	if err != nil {
		return fmt.Errorf("read configuration mismatches: %w", err)
	}
	for _, m := range found {
		for i := range accounts {
			if accounts[i].Name == m.Account {
				accounts[i].ConfigMismatches = append(accounts[i].ConfigMismatches, m)
			}
		}
	}
	return nil
}
