package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// RecordSendRate records the send budget account runs with, in messages a
// minute (0: none), for the backlog's drain estimates.
func (s *Store) RecordSendRate(ctx context.Context, account string, perMinute float64) error {
	if _, err := s.pool.Exec(ctx, `UPDATE accounts SET send_rate = $2 WHERE name = $1`, account, perMinute); err != nil {
		return fmt.Errorf("record send rate of account %s: %w", account, err)
	}
	return nil
}

// DestinationBacklog is the delivery backlog of one destination: the
// queued deliveries due now (not those held for a route's window or put
// off after a failure), and how long the accounts that hold them take to
// send them at their send budgets.
type DestinationBacklog struct {
	Destination int64 `json:"destination"`
	Deliveries  int   `json:"deliveries"`
	Parts       int   `json:"parts"`
	// Sends is how many send requests the deliveries take: a package of
	// up to tg.MaxAlbum parts goes as one album, a larger one in albums
	// of at most that many.
	Sends int `json:"sends"`
	// Accounts are those whose queues hold the deliveries: each sends its
	// own, at its own budget.
	Accounts []string `json:"accounts"`
	// SendRate is the Accounts' send budgets summed, in messages a minute;
	// 0 when none of them recorded one.
	SendRate float64 `json:"send_rate"`
	// DrainSeconds estimates the time to send the backlog: Sends × 60 s /
	// SendRate. It assumes the accounts spend their whole budgets on this
	// destination, so with backlogs to other destinations on the same
	// accounts (sent oldest first, interleaved) it is a lower bound. 0 when
	// SendRate is unknown.
	DrainSeconds float64 `json:"drain_seconds"`
}

// DeliveryBacklog returns the backlog of every destination with queued
// deliveries due, by destination.
func (s *Store) DeliveryBacklog(ctx context.Context) ([]DestinationBacklog, error) {
	rows, err := s.pool.Query(ctx, `WITH due AS (
			SELECT destination_chat_id, account, count(*) AS n, sum(part_count) AS parts,
				sum(ceil(part_count::float8 / $1)) AS sends
			FROM waiting_deliveries WHERE opens_at <= now() GROUP BY destination_chat_id, account)
		SELECT d.destination_chat_id, sum(d.n)::int, sum(d.parts)::int, sum(d.sends)::int, array_agg(d.account ORDER BY d.account),
			coalesce(sum(a.send_rate), 0)::float8
		FROM due d LEFT JOIN accounts a ON a.name = d.account
		GROUP BY d.destination_chat_id ORDER BY d.destination_chat_id`, tg.MaxAlbum)
	if err != nil {
		return nil, fmt.Errorf("read delivery backlog: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DestinationBacklog, error) {
		var b DestinationBacklog
		err := r.Scan(&b.Destination, &b.Deliveries, &b.Parts, &b.Sends, &b.Accounts, &b.SendRate)
		if b.SendRate > 0 {
			b.DrainSeconds = float64(b.Sends) * 60 / b.SendRate
		}
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("read delivery backlog: %w", err)
	}
	return out, nil
}

// SourceDeliveriesDue counts, by source, the queued deliveries due now of
// packages that source carries: a source is synced only when its
// catalogue is current and none of them waits.
func (s *Store) SourceDeliveriesDue(ctx context.Context) (map[int64]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT source_chat_id, count(*)::int FROM waiting_deliveries
		WHERE opens_at <= now() GROUP BY source_chat_id`)
	if err != nil {
		return nil, fmt.Errorf("count deliveries due by source: %w", err)
	}
	out := map[int64]int{}
	var chat int64
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&chat, &n}, func() error { out[chat] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count deliveries due by source: %w", err)
	}
	return out, nil
}

// SourceDelivering is the state of a source whose catalogue is current
// but whose packages still have deliveries due (status's "catalogue
// synced, N deliveries waiting").
const SourceDelivering = "delivering"

// backlogStatus adds the delivery backlog to st: per destination, and per
// source (a synced source with deliveries due reads as delivering).
func (s *Store) backlogStatus(ctx context.Context, st *Status) error {
	var err error
	if st.Backlog, err = s.DeliveryBacklog(ctx); err != nil {
		return err
	}
	due, err := s.SourceDeliveriesDue(ctx)
	if err != nil {
		return err
	}
	for i := range st.Sources {
		x := &st.Sources[i]
		x.DeliveriesDue = due[x.ChatID]
		if x.State == "synced" && x.DeliveriesDue > 0 {
			x.State = SourceDelivering
		}
	}
	return nil
}
