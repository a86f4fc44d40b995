package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrLeaseLost is returned by RenewLease when the lease is no longer the
// caller's: another owner took it (a new epoch) or it was released.
var ErrLeaseLost = errors.New("account lease lost")

// ErrStaleEpoch is returned by a fenced write that the database refused
// because the lease epoch it carries is no longer the account's: another
// instance took the account over. The writer must stop that account.
var ErrStaleEpoch = errors.New("stale lease epoch")

// staleEpochCode is the SQLSTATE the fence trigger raises (migration 012).
const staleEpochCode = "SD001"

// Lease is an account's lease row.
type Lease struct {
	Account string
	// Owner is the instance holding it; "" when released or never taken.
	Owner string
	// Epoch counts acquisitions; fenced writes carry it.
	Epoch int64
	// Until is when the lease lapses unless renewed (zero when never
	// taken); a clean release sets it to the release time.
	Until time.Time
	// TakenAt is when the current owner took it (zero when never taken).
	TakenAt time.Time
	// Now is the database's clock when the row was read: expiry is judged
	// by it, never by the reader's clock.
	Now time.Time
	// Config is the account's configuration as the instance ConfigBy had
	// it when it last took the lease (empty when not recorded; migration
	// 035).
	Config   AccountConfig
	ConfigBy string
}

// AccountConfig is what an account does as an instance is configured to
// run it, which every instance sharing the database must agree on.
type AccountConfig struct {
	// Fingerprint is a hash of Summary ("" when unknown).
	Fingerprint string `json:"fingerprint,omitempty"`
	// Summary is one "key: value" line per item.
	Summary string `json:"summary,omitempty"`
}

// Held reports whether someone holds an unexpired lease.
func (l Lease) Held() bool { return l.Owner != "" && l.Until.After(l.Now) }

// Ownerless is how long the account has had no owner: zero while someone
// holds an unexpired lease or when it was never leased, else the time since
// the lease lapsed or was released.
func (l Lease) Ownerless() time.Duration {
	if l.Held() || l.Until.IsZero() {
		return 0
	}
	return l.Now.Sub(l.Until)
}

// Acquired is the outcome of a successful AcquireLease.
type Acquired struct {
	Lease
	// PrevOwner held the lease before this acquisition ("" when it was
	// released cleanly or never taken); PrevUntil is when it lapsed.
	PrevOwner string
	PrevUntil time.Time
	// PrevConfig is the configuration the lease carried before, written by
	// PrevConfigBy.
	PrevConfig   AccountConfig
	PrevConfigBy string
}

const leaseColumns = `name, coalesce(lease_owner, ''), lease_epoch, lease_until, lease_taken_at, now(),
	coalesce(config_fingerprint, ''), coalesce(config_summary, ''), coalesce(config_owner, '')`

func scanLease(row pgx.Row) (Lease, error) {
	var l Lease
	var until, taken *time.Time
	if err := row.Scan(&l.Account, &l.Owner, &l.Epoch, &until, &taken, &l.Now,
		&l.Config.Fingerprint, &l.Config.Summary, &l.ConfigBy); err != nil {
		return Lease{}, err
	}
	if until != nil {
		l.Until = *until
	}
	if taken != nil {
		l.TakenAt = *taken
	}
	return l, nil
}

// AcquireLease takes account's lease for owner for ttl, with one
// conditional UPDATE, when it is free (released), expired, already owner's
// (a restart of the same instance takes it back at once), or held by
// deadOwner (a process the caller knows is gone; "" for none). Every
// acquisition increments the epoch. ok is false when another owner holds
// it; the lease is then returned as it stands. The lease carries no
// configuration (AcquireLeaseWith).
func (s *Store) AcquireLease(ctx context.Context, account, owner string, ttl time.Duration, deadOwner string) (Acquired, bool, error) {
	return s.AcquireLeaseWith(ctx, account, owner, ttl, deadOwner, AccountConfig{})
}

// AcquireLeaseWith is AcquireLease writing cfg, owner's configuration of
// the account, with the lease (replacing the previous holder's, which
// Acquired.PrevConfig returns).
func (s *Store) AcquireLeaseWith(ctx context.Context, account, owner string, ttl time.Duration, deadOwner string, cfg AccountConfig) (Acquired, bool, error) {
	if _, err := s.leases().Exec(ctx, `INSERT INTO accounts (name) VALUES ($1) ON CONFLICT DO NOTHING`, account); err != nil {
		return Acquired{}, false, fmt.Errorf("acquire lease of %s: %w", account, err)
	}
	var a Acquired
	var prevUntil, until, taken *time.Time
	err := s.leases().QueryRow(ctx, `UPDATE accounts a SET lease_owner = $2, lease_last_owner = $2, lease_until = now() + $3::interval,
			lease_epoch = a.lease_epoch + 1, lease_taken_at = now(),
			config_fingerprint = nullif($5, ''), config_summary = nullif($6, ''), config_owner = $2
		FROM (SELECT name, lease_owner, lease_until, config_fingerprint, config_summary, config_owner
			FROM accounts WHERE name = $1 FOR UPDATE) p
		WHERE a.name = p.name AND (p.lease_owner IS NULL OR p.lease_until IS NULL OR p.lease_until < now()
			OR p.lease_owner = $2 OR p.lease_owner = $4)
		RETURNING a.name, a.lease_owner, a.lease_epoch, a.lease_until, a.lease_taken_at, now(),
			coalesce(p.lease_owner, ''), p.lease_until,
			coalesce(p.config_fingerprint, ''), coalesce(p.config_summary, ''), coalesce(p.config_owner, '')`,
		account, owner, ttl.String(), deadOwner, cfg.Fingerprint, cfg.Summary).
		Scan(&a.Account, &a.Owner, &a.Epoch, &until, &taken, &a.Now, &a.PrevOwner, &prevUntil,
			&a.PrevConfig.Fingerprint, &a.PrevConfig.Summary, &a.PrevConfigBy)
	if errors.Is(err, pgx.ErrNoRows) {
		l, err := s.Lease(ctx, account)
		return Acquired{Lease: l}, false, err
	}
	if err != nil {
		return Acquired{}, false, fmt.Errorf("acquire lease of %s: %w", account, err)
	}
	a.Until, a.TakenAt = *until, *taken
	a.Config, a.ConfigBy = cfg, owner
	s.owners.took(account, a.Epoch, owner)
	if prevUntil != nil {
		a.PrevUntil = *prevUntil
	}
	return a, true, nil
}

// ClearConfigMismatches deletes the configuration mismatches of account
// that no longer hold once holder took its lease with configuration
// fingerprint: holder's own, those found against another configuration,
// and those their instances stopped renewing.
func (s *Store) ClearConfigMismatches(ctx context.Context, account, holder, fingerprint string) error {
	if _, err := s.leases().Exec(ctx, `DELETE FROM config_mismatches
		WHERE account = $1 AND (instance = $2 OR holder_fingerprint IS DISTINCT FROM nullif($3, '') OR until < now())`,
		account, holder, fingerprint); err != nil {
		return fmt.Errorf("clear the configuration mismatches of %s: %w", account, err)
	}
	return nil
}

// ConfigMismatch is an instance's configuration of an account differing
// from the one the account's lease holder wrote.
type ConfigMismatch struct {
	Account  string `json:"account"`
	Instance string `json:"instance"`
	Holder   string `json:"holder"`
	// HolderFingerprint and Fingerprint are the two configurations'.
	HolderFingerprint string `json:"holder_fingerprint"`
	Fingerprint       string `json:"fingerprint"`
	// Differs says how, item by item.
	Differs string `json:"differs"`
	// Since is when the instance first found this difference.
	Since time.Time `json:"since"`
	// Until is when the record lapses unless the instance renews it (by
	// the database's clock): an instance restarted or gone, under another
	// name from then on, leaves none behind for good.
	Until time.Time `json:"until"`
}

// RecordConfigMismatch records m, or renews it, until ttl from now (Since
// is the database's clock when the instance first found this pair of
// fingerprints), or, when m.Differs is "", deletes what m.Instance
// recorded for m.Account.
func (s *Store) RecordConfigMismatch(ctx context.Context, m ConfigMismatch, ttl time.Duration) error {
	var err error
	if m.Differs == "" {
		_, err = s.leases().Exec(ctx, `DELETE FROM config_mismatches WHERE account = $1 AND instance = $2`, m.Account, m.Instance)
	} else {
		_, err = s.leases().Exec(ctx, `INSERT INTO config_mismatches AS c (account, instance, holder, holder_fingerprint, fingerprint, differs, until)
			VALUES ($1, $2, $3, $4, $5, $6, now() + $7::interval)
			ON CONFLICT (account, instance) DO UPDATE SET holder = excluded.holder, differs = excluded.differs,
				holder_fingerprint = excluded.holder_fingerprint, fingerprint = excluded.fingerprint, until = excluded.until,
				since = CASE WHEN (c.holder_fingerprint, c.fingerprint) = (excluded.holder_fingerprint, excluded.fingerprint)
					THEN c.since ELSE now() END`,
			m.Account, m.Instance, m.Holder, m.HolderFingerprint, m.Fingerprint, m.Differs, ttl.String())
	}
	if err != nil {
		return fmt.Errorf("record the configuration mismatch of %s on %s: %w", m.Account, m.Instance, err)
	}
	return nil
}

// RenewLease extends owner's lease of account at epoch to now + ttl and
// returns the new expiry, or ErrLeaseLost when the lease is no longer
// owner's at that epoch.
func (s *Store) RenewLease(ctx context.Context, account, owner string, epoch int64, ttl time.Duration) (time.Time, error) {
	var until time.Time
	err := s.leases().QueryRow(ctx, `UPDATE accounts SET lease_until = now() + $4::interval
		WHERE name = $1 AND lease_owner = $2 AND lease_epoch = $3 RETURNING lease_until`,
		account, owner, epoch, ttl.String()).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("renew lease of %s at epoch %d: %w", account, epoch, ErrLeaseLost)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renew lease of %s: %w", account, err)
	}
	return until, nil
}

// ReleaseLease gives up owner's lease of account at epoch (owner NULL,
// lease_until now, epoch kept), so a standby takes it at once. Releasing a
// lease that is no longer owner's does nothing.
func (s *Store) ReleaseLease(ctx context.Context, account, owner string, epoch int64) error {
	_, err := s.leases().Exec(ctx, `UPDATE accounts SET lease_owner = NULL, lease_until = now()
		WHERE name = $1 AND lease_owner = $2 AND lease_epoch = $3`, account, owner, epoch)
	if err != nil {
		return fmt.Errorf("release lease of %s: %w", account, err)
	}
	return nil
}

// Lease returns account's lease row (an account never seen has an empty
// one).
func (s *Store) Lease(ctx context.Context, account string) (Lease, error) {
	l, err := scanLease(s.leases().QueryRow(ctx, `SELECT `+leaseColumns+` FROM accounts WHERE name = $1`, account))
	if errors.Is(err, pgx.ErrNoRows) {
		var now time.Time
		if err := s.leases().QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return Lease{}, fmt.Errorf("read lease of %s: %w", account, err)
		}
		return Lease{Account: account, Now: now}, nil
	}
	if err != nil {
		return Lease{}, fmt.Errorf("read lease of %s: %w", account, err)
	}
	return l, nil
}

// Leases returns every account's lease row, by name.
func (s *Store) Leases(ctx context.Context) ([]Lease, error) {
	rows, err := s.leases().Query(ctx, `SELECT `+leaseColumns+` FROM accounts ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) { return scanLease(r) })
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

// ReleaseAccountClaims drops the source claims of account's sources held
// by owners other than owner. A new lease holder calls it: the lease is
// exclusive, so those claims belong to a previous owner (maybe paused, not
// dead) and catch-up must not wait for them to expire.
func (s *Store) ReleaseAccountClaims(ctx context.Context, account, owner string) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE sources SET claim_owner = NULL, claim_until = NULL
		WHERE account = $1 AND claim_owner IS NOT NULL AND claim_owner <> $2`, account, owner)
	if err != nil {
		return 0, fmt.Errorf("release claims on the sources of %s: %w", account, err)
	}
	return int(tag.RowsAffected()), nil
}

// fenceKey carries a Fence in a context.
type fenceKey struct{}

// fence is what a fenced write carries: the writer's account and lease
// epoch, and what to call when the database refuses it.
type fence struct {
	account string
	epoch   int64
	stale   func()
}

// WithFence returns a context whose fenced writes (AdvanceWatermark,
// SaveSourceState, EnsureIntent, MarkSent, MarkSentByToken) carry account's
// lease epoch; the database refuses them with ErrStaleEpoch once the
// account has been taken at a later epoch. stale, when not nil, is called
// on every such refusal (the account run stops: its lease is gone). A
// context without a fence writes unfenced (the CLI, tests).
func WithFence(ctx context.Context, account string, epoch int64, stale func()) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence{account: account, epoch: epoch, stale: stale})
}

// fenceArgs returns the fence_account and fence_epoch values of a write
// under ctx: NULLs when ctx carries no fence. When s took the fence's
// lease at that epoch, fence_account names the owner it took it for too
// (after the account and U+001F; migration 028): an epoch is unique only
// while the catalogue never rewinds, and one brought back to an earlier
// epoch hands the later ones out again, to other owners.
func (s *Store) fenceArgs(ctx context.Context) (account *string, epoch *int64) {
	f, ok := ctx.Value(fenceKey{}).(fence)
	if !ok {
		return nil, nil
	}
	acc := f.account
	if owner, ok := s.owners.owner(f.account, f.epoch); ok {
		acc += "\x1f" + owner
	}
	return &acc, &f.epoch
}

// leaseOwners remembers, per account, the last lease a store took: its
// epoch and the owner it took it for.
type leaseOwners struct {
	mu   sync.Mutex
	last map[string]leaseTaken
}

type leaseTaken struct {
	epoch int64
	owner string
}

func (o *leaseOwners) took(account string, epoch int64, owner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last = make(map[string]leaseTaken)
	}
	o.last[account] = leaseTaken{epoch: epoch, owner: owner}
}

func (o *leaseOwners) owner(account string, epoch int64) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.last[account]
	return t.owner, ok && t.epoch == epoch && t.owner != ""
}

// fenced maps the fence trigger's refusal to ErrStaleEpoch (keeping the
// database's message, which names both epochs) and tells the fence's
// owner; other errors pass through.
func fenced(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != staleEpochCode {
		return err
	}
	if f, ok := ctx.Value(fenceKey{}).(fence); ok && f.stale != nil {
		f.stale()
	}
	return fmt.Errorf("%s: %w", pe.Message, ErrStaleEpoch)
}
