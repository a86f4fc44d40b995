package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// Waiting is a delivery held by a route's delivery window.
type Waiting struct {
	PackageID   int64
	Destination tg.ChatID
	Account     string
	Route       string
	OpensAt     time.Time
	// Parts are the source messages carrying the package, in part order.
	Parts     []tg.MessageKey
	Topic     int64
	PartCount int
	CreatedAt time.Time
}

// WaitDelivery records that w waits for its window; a delivery already
// waiting keeps its parts and takes the new route and opening time.
func (s *Store) WaitDelivery(ctx context.Context, w Waiting) error {
	ids := make([]int64, len(w.Parts))
	for i, k := range w.Parts {
		ids[i] = int64(k.Message)
	}
	var chat int64
	if len(w.Parts) > 0 {
		chat = int64(w.Parts[0].Chat)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO waiting_deliveries (package_id, destination_chat_id, account, route, opens_at,
			source_chat_id, source_topic_id, message_ids, part_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (package_id, destination_chat_id) DO UPDATE SET route = excluded.route, opens_at = excluded.opens_at`,
		w.PackageID, int64(w.Destination), w.Account, w.Route, w.OpensAt, chat, w.Topic, ids, w.PartCount)
	if err != nil {
		return fmt.Errorf("hold delivery of package %d to %d for its window: %w", w.PackageID, w.Destination, err)
	}
	return nil
}

// ClearWaiting removes the waiting row of (pkg, dest), once it is sent.
func (s *Store) ClearWaiting(ctx context.Context, pkg int64, dest tg.ChatID) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM waiting_deliveries WHERE package_id = $1 AND destination_chat_id = $2`, pkg, int64(dest)); err != nil {
		return fmt.Errorf("clear waiting delivery of package %d to %d: %w", pkg, dest, err)
	}
	return nil
}

// DueWaiting returns up to limit of account's waiting deliveries whose
// window opens at or before now, oldest first.
func (s *Store) DueWaiting(ctx context.Context, account string, now time.Time, limit int) ([]Waiting, error) {
	return s.waiting(ctx, `WHERE account = $1 AND opens_at <= $2 ORDER BY created_at, package_id, destination_chat_id LIMIT $3`, account, now, limit)
}

// AllWaiting returns every waiting delivery of account.
func (s *Store) AllWaiting(ctx context.Context, account string) ([]Waiting, error) {
	return s.waiting(ctx, `WHERE account = $1 ORDER BY created_at, package_id, destination_chat_id`, account)
}

func (s *Store) waiting(ctx context.Context, where string, args ...any) ([]Waiting, error) {
	rows, err := s.pool.Query(ctx, `SELECT package_id, destination_chat_id, account, route, opens_at, source_chat_id,
			source_topic_id, message_ids, part_count, created_at FROM waiting_deliveries `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read waiting deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Waiting, error) {
		var w Waiting
		var dest, chat int64
		var ids []int64
		err := r.Scan(&w.PackageID, &dest, &w.Account, &w.Route, &w.OpensAt, &chat, &w.Topic, &ids, &w.PartCount, &w.CreatedAt)
		w.Destination = tg.ChatID(dest)
		for _, id := range ids {
			w.Parts = append(w.Parts, tg.MessageKey{Chat: tg.ChatID(chat), Message: tg.MessageID(id)})
		}
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("read waiting deliveries: %w", err)
	}
	return out, nil
}

// WindowReport is a delivery window that closed with deliveries still
// waiting.
type WindowReport struct {
	Route    string    `json:"route"`
	Account  string    `json:"account"`
	Window   string    `json:"window"`
	ClosedAt time.Time `json:"closed_at"`
	Sent     int       `json:"sent"`
	Waiting  int       `json:"waiting"`
}

// RecordWindowReport keeps r for status.
func (s *Store) RecordWindowReport(ctx context.Context, r WindowReport) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO window_reports (route, account, hours, closed_at, sent, waiting)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (route, account, closed_at) DO UPDATE SET sent = excluded.sent, waiting = excluded.waiting`,
		r.Route, r.Account, r.Window, r.ClosedAt, r.Sent, r.Waiting)
	if err != nil {
		return fmt.Errorf("record window report of route %s: %w", r.Route, err)
	}
	return nil
}

// WaitingStatus counts the deliveries waiting for one route's window to
// one destination.
type WaitingStatus struct {
	Route       string    `json:"route"`
	Account     string    `json:"account"`
	Destination int64     `json:"destination"`
	Deliveries  int       `json:"deliveries"`
	Parts       int       `json:"parts"`
	OpensAt     time.Time `json:"opens_at"`
}

// windowStatus reads the waiting deliveries by route and destination, and
// the latest report of each route whose deliveries still wait.
func (s *Store) windowStatus(ctx context.Context, st *Status) error {
	rows, err := s.pool.Query(ctx, `SELECT route, account, destination_chat_id, count(*), sum(part_count), min(opens_at)
		FROM waiting_deliveries GROUP BY route, account, destination_chat_id ORDER BY route, account, destination_chat_id`)
	if err != nil {
		return fmt.Errorf("read waiting deliveries: %w", err)
	}
	st.Waiting, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (WaitingStatus, error) {
		var w WaitingStatus
		err := r.Scan(&w.Route, &w.Account, &w.Destination, &w.Deliveries, &w.Parts, &w.OpensAt)
		return w, err
	})
	if err != nil {
		return fmt.Errorf("read waiting deliveries: %w", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT DISTINCT ON (r.route, r.account) r.route, r.account, r.hours, r.closed_at, r.sent, r.waiting
		FROM window_reports r WHERE EXISTS (SELECT 1 FROM waiting_deliveries w WHERE w.route = r.route AND w.account = r.account)
		ORDER BY r.route, r.account, r.closed_at DESC`)
	if err != nil {
		return fmt.Errorf("read window reports: %w", err)
	}
	st.Partial, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (WindowReport, error) {
		var w WindowReport
		err := r.Scan(&w.Route, &w.Account, &w.Window, &w.ClosedAt, &w.Sent, &w.Waiting)
		return w, err
	})
	if err != nil {
		return fmt.Errorf("read window reports: %w", err)
	}
	return nil
}
