package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// Backfill is the walk of one route, added after packages were catalogued,
// over one account's share of them (packages whose origin source it
// watches).
type Backfill struct {
	RouteKey string
	Account  string
	Name     string
	// Upto is the last package id catalogued before the route was first
	// seen; later packages are routed as they are ingested.
	Upto int64
	// Cursor is the last package id walked.
	Cursor int64
	// Walked, Matched, Delivered and Failed count packages: looked at,
	// matching the route, with at least one part sent, given up.
	Walked, Matched, Delivered, Failed int
	// Remaining is how many of the account's packages up to Upto are
	// still to walk (filled by Backfills).
	Remaining int
	LastError string
	CreatedAt time.Time
	DoneAt    *time.Time
}

// Done reports whether the walk has finished.
func (b Backfill) Done() bool { return b.DoneAt != nil }

// EnsureBackfill returns the backfill of route key for account, starting
// one when there is none: it then walks the packages catalogued so far
// (already done when there are none of the account's). It reports whether
// it started one.
func (s *Store) EnsureBackfill(ctx context.Context, key, account, name string) (Backfill, bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO route_backfills (route_key, account, name, upto, done_at)
		SELECT $1, $2, $3, u.upto, CASE WHEN u.upto = 0 THEN now() END
		FROM (SELECT coalesce(max(p.id), 0) AS upto FROM packages p
			JOIN sources s ON s.chat_id = p.origin_chat_id WHERE s.account = $2) u
		ON CONFLICT (route_key, account) DO NOTHING`, key, account, name)
	if err != nil {
		return Backfill{}, false, fmt.Errorf("start backfill of route %s: %w", name, err)
	}
	bs, err := s.backfills(ctx, `WHERE b.route_key = $1 AND b.account = $2`, key, account)
	if err != nil {
		return Backfill{}, false, err
	}
	if len(bs) == 0 {
		return Backfill{}, false, fmt.Errorf("backfill of route %s: %w", name, ErrNotFound)
	}
	return bs[0], tag.RowsAffected() == 1, nil
}

// Backfills returns every route backfill, newest first.
func (s *Store) Backfills(ctx context.Context) ([]Backfill, error) {
	return s.backfills(ctx, "")
}

func (s *Store) backfills(ctx context.Context, where string, args ...any) ([]Backfill, error) {
	rows, err := s.pool.Query(ctx, `SELECT b.route_key, b.account, b.name, b.upto, b.cursor, b.walked, b.matched,
			b.delivered, b.failed, b.last_error, b.created_at, b.done_at,
			CASE WHEN b.done_at IS NOT NULL THEN 0 ELSE (SELECT count(*) FROM packages p JOIN sources s ON s.chat_id = p.origin_chat_id
				WHERE s.account = b.account AND p.id > b.cursor AND p.id <= b.upto) END
		FROM route_backfills b `+where+` ORDER BY b.created_at DESC, b.name, b.account`, args...)
	if err != nil {
		return nil, fmt.Errorf("read backfills: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Backfill, error) {
		var b Backfill
		err := r.Scan(&b.RouteKey, &b.Account, &b.Name, &b.Upto, &b.Cursor, &b.Walked, &b.Matched,
			&b.Delivered, &b.Failed, &b.LastError, &b.CreatedAt, &b.DoneAt, &b.Remaining)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("read backfills: %w", err)
	}
	return out, nil
}

// BackfillPackages returns up to limit packages of the backfill's walk
// after its cursor, in id order.
func (s *Store) BackfillPackages(ctx context.Context, b Backfill, limit int) ([]Package, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.id, p.content_hash, p.name, p.format, p.total_size, p.part_count,
			p.origin_chat_id, p.origin_message_id, p.origin_topic_id
		FROM packages p JOIN sources s ON s.chat_id = p.origin_chat_id
		WHERE s.account = $1 AND p.id > $2 AND p.id <= $3 ORDER BY p.id LIMIT $4`, b.Account, b.Cursor, b.Upto, limit)
	if err != nil {
		return nil, fmt.Errorf("list packages to backfill: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Package, error) {
		var p Package
		var oc, om int64
		err := r.Scan(&p.ID, &p.ContentHash, &p.Name, &p.Format, &p.TotalSize, &p.PartCount, &oc, &om, &p.OriginTopic)
		p.Origin = tg.MessageKey{Chat: tg.ChatID(oc), Message: tg.MessageID(om)}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list packages to backfill: %w", err)
	}
	return out, nil
}

// BackfillStep is the outcome of walking one package.
type BackfillStep struct {
	Matched, Delivered, Failed bool
	Err                        string
}

// AdvanceBackfill moves b's cursor to pkg, counting step; the walk is done
// once the cursor reaches Upto.
func (s *Store) AdvanceBackfill(ctx context.Context, b Backfill, pkg int64, step BackfillStep) error {
	one := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	_, err := s.pool.Exec(ctx, `UPDATE route_backfills SET cursor = $3, walked = walked + 1,
			matched = matched + $4, delivered = delivered + $5, failed = failed + $6,
			last_error = CASE WHEN $7 = '' THEN last_error ELSE $7 END, updated_at = now(),
			done_at = CASE WHEN $3 >= upto THEN now() END
		WHERE route_key = $1 AND account = $2 AND cursor < $3`,
		b.RouteKey, b.Account, pkg, one(step.Matched), one(step.Delivered), one(step.Failed), step.Err)
	if err != nil {
		return fmt.Errorf("advance backfill of route %s: %w", b.Name, err)
	}
	return nil
}

// PartSources returns the source message of each part of pkg, in order.
func (s *Store) PartSources(ctx context.Context, pkg int64) ([]tg.MessageKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT source_chat_id, source_message_id FROM package_parts WHERE package_id = $1 ORDER BY idx`, pkg)
	if err != nil {
		return nil, fmt.Errorf("read parts of package %d: %w", pkg, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tg.MessageKey, error) {
		var c, m int64
		err := r.Scan(&c, &m)
		return tg.MessageKey{Chat: tg.ChatID(c), Message: tg.MessageID(m)}, err
	})
	if err != nil {
		return nil, fmt.Errorf("read parts of package %d: %w", pkg, err)
	}
	return out, nil
}

// FinishBackfill marks b's walk done: no package of it is left after the
// cursor.
func (s *Store) FinishBackfill(ctx context.Context, b Backfill) error {
	_, err := s.pool.Exec(ctx, `UPDATE route_backfills SET done_at = now(), updated_at = now()
		WHERE route_key = $1 AND account = $2 AND done_at IS NULL`, b.RouteKey, b.Account)
	if err != nil {
		return fmt.Errorf("finish backfill of route %s: %w", b.Name, err)
	}
	return nil
}
