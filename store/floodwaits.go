package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// FloodWaitScope is what a recorded flood wait holds of its account.
type FloodWaitScope string

const (
	// FloodWaitAll holds every request of the account.
	FloodWaitAll FloodWaitScope = "all"
	// FloodWaitSends holds the account's sends.
	FloodWaitSends FloodWaitScope = "send"
	// FloodWaitChat holds the account's sends to one chat.
	FloodWaitChat FloodWaitScope = "chat"
)

// FloodWait is a flood wait of an account that has not ended yet.
type FloodWait struct {
	Scope FloodWaitScope
	// Chat is the chat a FloodWaitChat holds the sends to; 0 otherwise.
	Chat tg.ChatID
	// Left is how long the wait still runs, by the database's clock.
	Left time.Duration
}

// RecordFloodWait records that a flood wait of scope holds account for
// d from now (see migration 033); a later end already recorded stays.
// The write is not fenced: the wait is Telegram's, whoever runs the
// account.
func (s *Store) RecordFloodWait(ctx context.Context, account string, scope FloodWaitScope, chat tg.ChatID, d time.Duration) error {
	if scope != FloodWaitChat {
		chat = 0
	}
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO flood_waits AS f (account, scope, chat_id, until)
		VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
		ON CONFLICT (account, scope, chat_id) DO UPDATE SET until = greatest(f.until, EXCLUDED.until)`,
		account, string(scope), int64(chat), d.Seconds()); err != nil {
		return fmt.Errorf("record the flood wait of account %s: %w", account, err)
	}
	return nil
}

// FloodWaits returns the flood waits of account that still run, and
// deletes those that have ended.
func (s *Store) FloodWaits(ctx context.Context, account string) ([]FloodWait, error) {
	if _, err := s.pool.Exec(ctx, `DELETE FROM flood_waits WHERE account = $1 AND until <= clock_timestamp()`, account); err != nil {
		return nil, fmt.Errorf("forget the ended flood waits of account %s: %w", account, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT scope, chat_id, extract(epoch FROM until - clock_timestamp())::float8
		FROM flood_waits WHERE account = $1 AND until > clock_timestamp() ORDER BY scope, chat_id`, account)
	if err != nil {
		return nil, fmt.Errorf("read the flood waits of account %s: %w", account, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FloodWait, error) {
		var w FloodWait
		var scope string
		var chat int64
		var left float64
		err := r.Scan(&scope, &chat, &left)
		w.Scope, w.Chat, w.Left = FloodWaitScope(scope), tg.ChatID(chat), time.Duration(math.Ceil(left*1e6))*time.Microsecond
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the flood waits of account %s: %w", account, err)
	}
	return out, nil
}

// IntentDestinations returns the destinations account has delivery
// intents open to: parts whose send was written ahead and never recorded
// as sent, any of which may be pending in the account's TDLib database,
// which re-sends it when the account's client starts again. Those are the
// account's own intents, and those of the deliveries queued for it: one
// taken over from an account away (TakeWaiting) is sent with the intent
// that account wrote, whose row still names it. Asked only at an
// account's start under a live wait of its sends, it reads the deliveries
// once.
func (s *Store) IntentDestinations(ctx context.Context, account string) ([]tg.ChatID, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination_chat_id FROM deliveries
			WHERE account = $1 AND state = 'intent'
		UNION
		SELECT w.destination_chat_id FROM waiting_deliveries w
			JOIN deliveries d ON d.package_id = w.package_id AND d.destination_chat_id = w.destination_chat_id
			WHERE w.account = $1 AND d.state = 'intent'
		ORDER BY destination_chat_id`, account)
	if err != nil {
		return nil, fmt.Errorf("read the open delivery intents of account %s: %w", account, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tg.ChatID, error) {
		var chat int64
		err := r.Scan(&chat)
		return tg.ChatID(chat), err
	})
	if err != nil {
		return nil, fmt.Errorf("read the open delivery intents of account %s: %w", account, err)
	}
	return out, nil
}
