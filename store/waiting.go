package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// Waiting is a delivery in the queue: owed by a catalogued package to a
// destination, due at OpensAt (its route's window opening, or after a
// failure the time of its next try; zero: due at once), sent by Account's
// delivery stage.
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
	// Attempts counts the failed tries; LastError is the latest failure.
	Attempts  int
	LastError string
}

// QueueDelivery is QueueDeliveries for one delivery; it reports whether
// it queued w.
func (s *Store) QueueDelivery(ctx context.Context, w Waiting) (bool, error) {
	queued, err := s.QueueDeliveries(ctx, w.PackageID, []Waiting{w})
	return len(queued) == 1, err
}

// WaitDelivery records that w waits until w.OpensAt for w.Account to send
// it (a route's window, or another account taking the delivery over); a
// delivery already queued keeps its parts and place in the queue and takes
// the new account, route and time (and forgets its last error: what it
// waits for now is the window, or the other account). Another account
// starts its attempts from 0: the failures counted were the first one's.
func (s *Store) WaitDelivery(ctx context.Context, w Waiting) error {
	st := WaitDeliveryStatement(w)
	if _, err := s.pool.Exec(ctx, st.SQL, st.Args...); err != nil {
		return fmt.Errorf("hold delivery of package %d to %d: %w", w.PackageID, w.Destination, err)
	}
	return nil
}

// WaitDeliveryStatement is WaitDelivery as a statement of a unit (one that
// releases the delivery's lock: Lock.UnlockWith).
func WaitDeliveryStatement(w Waiting) Statement {
	ids, chat := waitingParts(w)
	return Statement{SQL: `INSERT INTO waiting_deliveries (package_id, destination_chat_id, account, route, opens_at,
			source_chat_id, source_topic_id, message_ids, part_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (package_id, destination_chat_id) DO UPDATE SET account = excluded.account, route = excluded.route,
			opens_at = excluded.opens_at, last_error = '',
			attempts = CASE WHEN waiting_deliveries.account = excluded.account THEN waiting_deliveries.attempts ELSE 0 END`,
		Args: []any{w.PackageID, int64(w.Destination), w.Account, w.Route, w.OpensAt, chat, w.Topic, ids, w.PartCount}}
}

func waitingParts(w Waiting) (ids []int64, chat int64) {
	ids = make([]int64, len(w.Parts))
	for i, k := range w.Parts {
		ids[i] = int64(k.Message)
	}
	if len(w.Parts) > 0 {
		chat = int64(w.Parts[0].Chat)
	}
	return ids, chat
}

// DeferDelivery puts the queued delivery of pkg to dest off until at after
// a failure (cause), counting the attempt; it keeps its place among the
// deliveries due after at.
func (s *Store) DeferDelivery(ctx context.Context, pkg int64, dest tg.ChatID, at time.Time, cause string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE waiting_deliveries SET opens_at = $3, attempts = attempts + 1, last_error = $4
		WHERE package_id = $1 AND destination_chat_id = $2`, pkg, int64(dest), at, cause); err != nil {
		return fmt.Errorf("defer delivery of package %d to %d: %w", pkg, dest, err)
	}
	return nil
}

// PutOffDelivery puts the queued delivery of pkg to dest off until at
// without counting an attempt: Telegram's pacing (a flood wait) held it,
// no failure of its own. cause is recorded as its last error; it keeps its
// place among the deliveries due after at.
func (s *Store) PutOffDelivery(ctx context.Context, pkg int64, dest tg.ChatID, at time.Time, cause string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE waiting_deliveries SET opens_at = $3, last_error = $4
		WHERE package_id = $1 AND destination_chat_id = $2`, pkg, int64(dest), at, cause); err != nil {
		return fmt.Errorf("put off delivery of package %d to %d: %w", pkg, dest, err)
	}
	return nil
}

// DeliveryPromised reports whether pkg's delivery to every one of dests is
// complete or queued: nothing more is owed by whoever brings its parts.
func (s *Store) DeliveryPromised(ctx context.Context, pkg int64, dests []tg.ChatID) (bool, error) {
	ids := chatIDs(dests)
	var owed int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM unnest($2::bigint[]) d(dest)
		WHERE NOT EXISTS (SELECT 1 FROM waiting_deliveries w WHERE w.package_id = $1 AND w.destination_chat_id = d.dest)
		AND (SELECT count(*) FROM deliveries x WHERE x.package_id = $1 AND x.destination_chat_id = d.dest AND x.state = 'sent')
			< (SELECT part_count FROM packages WHERE id = $1)`, pkg, ids).Scan(&owed)
	if err != nil {
		return false, fmt.Errorf("check deliveries of package %d: %w", pkg, err)
	}
	return owed == 0, nil
}

// QueuedDeliveries counts the deliveries in the queue of account ("" for
// every account).
func (s *Store) QueuedDeliveries(ctx context.Context, account string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM waiting_deliveries WHERE $1 = '' OR account = $1`, account).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued deliveries: %w", err)
	}
	return n, nil
}

// ClearWaiting removes the waiting row of (pkg, dest), once it is sent.
func (s *Store) ClearWaiting(ctx context.Context, pkg int64, dest tg.ChatID) error {
	st := ClearWaitingStatement(pkg, dest)
	if _, err := s.pool.Exec(ctx, st.SQL, st.Args...); err != nil {
		return fmt.Errorf("clear waiting delivery of package %d to %d: %w", pkg, dest, err)
	}
	return nil
}

// ClearWaitingStatement is ClearWaiting as a statement of a unit (one that
// releases the delivery's lock: Lock.UnlockWith).
func ClearWaitingStatement(pkg int64, dest tg.ChatID) Statement {
	return Statement{SQL: `DELETE FROM waiting_deliveries WHERE package_id = $1 AND destination_chat_id = $2`,
		Args: []any{pkg, int64(dest)}}
}

// ClearWaitingUnder is ClearWaitingStatement for a delivery given up
// unsent: its row goes only while l, the delivery's lock, is still its
// holder's (lockStillHeld). After a takeover the new holder may have sent
// some of it, and the rest needs the row. cleared tells whether the row
// went.
func ClearWaitingUnder(l *Lock, pkg int64, dest tg.ChatID, cleared *bool) Statement {
	return Statement{SQL: `DELETE FROM waiting_deliveries WHERE package_id = $1 AND destination_chat_id = $2 AND ` + lockStillHeld(3),
		Args: []any{pkg, int64(dest), l.name, l.owner},
		Read: func(rows pgx.Rows) error {
			rows.Close()
			*cleared = rows.CommandTag().RowsAffected() > 0
			return rows.Err()
		}}
}

// TakeWaiting moves to account to, under route, the deliveries queued for
// account from whose source is one of sources and destination one of
// dests, and returns how many it moved, with the intents their sends left
// (not recorded sent: a send of one may still be on its way, and land
// after the new account read the destination for it). Their put-off times
// stay; their attempts count afresh, as for a delivery handed over. The
// same statement keeps the intents' tokens in late_sends as watched by to
// for window (LateSendsWatched reads them back when to starts again), so
// that no take leaves its watch unwritten, and deletes the rows whose
// watch has ended.
func (s *Store) TakeWaiting(ctx context.Context, from, to, route string, sources, dests []tg.ChatID, window time.Duration) (int, []TakenIntent, error) {
	rows, err := s.pool.Query(ctx, `WITH moved AS (
			UPDATE waiting_deliveries SET account = $2, route = $5, attempts = 0
			WHERE account = $1 AND source_chat_id = ANY($3::bigint[]) AND destination_chat_id = ANY($4::bigint[])
			RETURNING package_id, destination_chat_id),
		taken AS (
			SELECT m.package_id, m.destination_chat_id, d.token, d.account
			FROM moved m LEFT JOIN deliveries d ON d.package_id = m.package_id
				AND d.destination_chat_id = m.destination_chat_id AND d.state = 'intent'),
		watched AS (
			INSERT INTO late_sends (token, destination_chat_id, sender, account, until)
			SELECT token, destination_chat_id, account, $2, now() + $6 * interval '1 microsecond'
			FROM taken WHERE token IS NOT NULL
			ON CONFLICT (token) DO UPDATE SET destination_chat_id = excluded.destination_chat_id,
				sender = excluded.sender, account = excluded.account, until = excluded.until),
		ended AS (
			DELETE FROM late_sends WHERE `+lateSendEnded+`
				AND token NOT IN (SELECT token FROM taken WHERE token IS NOT NULL))
		SELECT package_id, destination_chat_id, token, account FROM taken`,
		from, to, chatIDs(sources), chatIDs(dests), route, window.Microseconds())
	if err != nil {
		return 0, nil, fmt.Errorf("move the deliveries queued for %s to %s: %w", from, to, err)
	}
	defer rows.Close()
	type key struct {
		pkg, dest int64
	}
	moved := map[key]bool{}
	var intents []TakenIntent
	for rows.Next() {
		var k key
		var token, account *string
		if err := rows.Scan(&k.pkg, &k.dest, &token, &account); err != nil {
			return 0, nil, fmt.Errorf("move the deliveries queued for %s to %s: %w", from, to, err)
		}
		moved[k] = true
		if token != nil {
			intents = append(intents, TakenIntent{Destination: tg.ChatID(k.dest), Token: *token, Account: *account, Left: window})
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("move the deliveries queued for %s to %s: %w", from, to, err)
	}
	return len(moved), intents, nil
}

// TakenIntent is an intent of a delivery TakeWaiting moved: its send may
// have left the account that wrote it and not landed yet.
type TakenIntent struct {
	Destination tg.ChatID
	Token       string
	// Account is the account that wrote it, and may have sent it.
	Account string
	// Left is how long from now its token is still watched for.
	Left time.Duration
}

// chatIDs is chats as the bigint[] a query takes.
func chatIDs(chats []tg.ChatID) []int64 {
	out := make([]int64, len(chats))
	for i, c := range chats {
		out[i] = int64(c)
	}
	return out
}

// NextPutOff returns when the first of account's deliveries a failure put
// off until after now falls due (along migration 031's index by due
// time); ok is false when none is put off.
func (s *Store) NextPutOff(ctx context.Context, account string, now time.Time) (at time.Time, ok bool, err error) {
	var next *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(opens_at) FROM waiting_deliveries
		WHERE account = $1 AND last_error <> '' AND opens_at > $2`, account, now).Scan(&next); err != nil {
		return time.Time{}, false, fmt.Errorf("read when the next put-off delivery is due: %w", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return *next, true, nil
}

// DueWaiting returns up to limit of account's queued deliveries due at or
// before now, oldest first, but for those to the destinations except.
func (s *Store) DueWaiting(ctx context.Context, account string, now time.Time, limit int, except ...tg.ChatID) ([]Waiting, error) {
	return s.waiting(ctx, dueWaitingSQL, account, now, limit, chatIDs(except))
}

// waitingColumns are the columns of a Waiting, as waiting() scans them.
const waitingColumns = `package_id, destination_chat_id, account, route, opens_at, source_chat_id,
	source_topic_id, message_ids, part_count, created_at, attempts, last_error`

// dueWaitingSQL reads DueWaiting's batch, merged by age from three
// classes of the queue, each read along an index of its own: the oldest
// due deliveries queued to go at once (no route, no failure: migration
// 036's queue index); those with a route (waiting for its window, or
// handed over by another account) and those a failure put off (migration
// 031), each class read only when one of its deliveries is due (the first
// along its index by when they are due is). So deliveries waiting for a
// window that opens later, or put off by a failure for later, cost a
// batch nothing, however many head the queue; once due they are read by
// age as the others are. Within a class read, those not due yet, and
// those to the destinations excepted, are read past one by one in the
// queue order.
const dueWaitingSQL = `SELECT ` + waitingColumns + ` FROM (
	(SELECT ` + waitingColumns + ` FROM waiting_deliveries
		WHERE account = $1 AND last_error = '' AND route = '' AND opens_at <= $2 AND destination_chat_id <> ALL($4::bigint[])
		ORDER BY created_at, package_id, destination_chat_id LIMIT $3)
	UNION ALL
	(SELECT ` + waitingColumns + ` FROM waiting_deliveries
		WHERE account = $1 AND last_error = '' AND route <> '' AND opens_at <= $2 AND destination_chat_id <> ALL($4::bigint[])
			AND (SELECT opens_at FROM waiting_deliveries WHERE account = $1 AND last_error = '' AND route <> ''
				ORDER BY opens_at LIMIT 1) <= $2
		ORDER BY created_at, package_id, destination_chat_id LIMIT $3)
	UNION ALL
	(SELECT ` + waitingColumns + ` FROM waiting_deliveries
		WHERE account = $1 AND last_error <> '' AND opens_at <= $2 AND destination_chat_id <> ALL($4::bigint[])
			AND (SELECT opens_at FROM waiting_deliveries WHERE account = $1 AND last_error <> ''
				ORDER BY opens_at LIMIT 1) <= $2
		ORDER BY created_at, package_id, destination_chat_id LIMIT $3)
) AS due ORDER BY created_at, package_id, destination_chat_id LIMIT $3`

// AllWaiting returns every waiting delivery of account.
func (s *Store) AllWaiting(ctx context.Context, account string) ([]Waiting, error) {
	return s.waiting(ctx, `SELECT `+waitingColumns+` FROM waiting_deliveries
		WHERE account = $1 ORDER BY created_at, package_id, destination_chat_id`, account)
}

func (s *Store) waiting(ctx context.Context, sql string, args ...any) ([]Waiting, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read waiting deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Waiting, error) {
		var w Waiting
		var dest, chat int64
		var ids []int64
		err := r.Scan(&w.PackageID, &dest, &w.Account, &w.Route, &w.OpensAt, &chat, &w.Topic, &ids, &w.PartCount, &w.CreatedAt, &w.Attempts, &w.LastError)
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

// windowStatus reads the waiting deliveries by route and destination
// (those a failure put off are deferredStatus's), and the latest report
// of each route whose deliveries still wait.
func (s *Store) windowStatus(ctx context.Context, st *Status) error {
	rows, err := s.pool.Query(ctx, `SELECT route, account, destination_chat_id, count(*), sum(part_count), min(opens_at)
		FROM waiting_deliveries WHERE route <> '' AND NOT (last_error <> '' AND opens_at > now())
		GROUP BY route, account, destination_chat_id ORDER BY route, account, destination_chat_id`)
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

// DeferredStatus counts the queued deliveries of one account to one
// destination that a failure put off: they wait until OpensAt (the
// earliest of them), and LastError is why.
type DeferredStatus struct {
	Account     string    `json:"account"`
	Destination int64     `json:"destination"`
	Deliveries  int       `json:"deliveries"`
	OpensAt     time.Time `json:"opens_at"`
	LastError   string    `json:"last_error"`
}

// deferredStatus reads the deliveries put off after a failure, by
// account and destination.
func (s *Store) deferredStatus(ctx context.Context, st *Status) error {
	rows, err := s.pool.Query(ctx, `SELECT account, destination_chat_id, count(*), min(opens_at), max(last_error)
		FROM waiting_deliveries WHERE last_error <> '' AND opens_at > now()
		GROUP BY account, destination_chat_id ORDER BY destination_chat_id, account`)
	if err != nil {
		return fmt.Errorf("read deferred deliveries: %w", err)
	}
	st.Deferred, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeferredStatus, error) {
		var d DeferredStatus
		err := r.Scan(&d.Account, &d.Destination, &d.Deliveries, &d.OpensAt, &d.LastError)
		return d, err
	})
	if err != nil {
		return fmt.Errorf("read deferred deliveries: %w", err)
	}
	return nil
}

// RouteBacklog counts the queued deliveries of one account and route
// (route "" for those waiting only for the send budget).
type RouteBacklog struct {
	Route      string
	Deliveries int
	Parts      int
}

// QueuedByRoute counts account's queued deliveries by route, in the
// database: the queue may be far larger than what a process should read.
func (s *Store) QueuedByRoute(ctx context.Context, account string) ([]RouteBacklog, error) {
	rows, err := s.pool.Query(ctx, `SELECT route, count(*), coalesce(sum(part_count), 0) FROM waiting_deliveries
		WHERE account = $1 GROUP BY route ORDER BY route`, account)
	if err != nil {
		return nil, fmt.Errorf("count queued deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RouteBacklog, error) {
		var b RouteBacklog
		err := r.Scan(&b.Route, &b.Deliveries, &b.Parts)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("count queued deliveries: %w", err)
	}
	return out, nil
}

// HoldDestination puts off until at every delivery of account's queue to
// dest due sooner, recording cause as their last error (status shows it):
// the destination refuses them all alike (no account may post there), so
// one refused send holds the whole backlog instead of each delivery being
// tried. It returns how many it put off.
func (s *Store) HoldDestination(ctx context.Context, account string, dest tg.ChatID, at time.Time, cause string) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE waiting_deliveries SET opens_at = $3, last_error = $4
		WHERE account = $1 AND destination_chat_id = $2 AND opens_at < $3`, account, int64(dest), at, cause)
	if err != nil {
		return 0, fmt.Errorf("hold deliveries to %d: %w", dest, err)
	}
	return int(tag.RowsAffected()), nil
}

// UnwritableDeliveries counts, by destination, the queued deliveries held
// because no account may post there: their last attempt was refused with
// tg.ErrNoWriteAccess. A hold that ran out and waits for its next try
// counts too, so the count stays steady until the deliveries go.
func (s *Store) UnwritableDeliveries(ctx context.Context) (map[int64]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT destination_chat_id, count(*)::int FROM waiting_deliveries
		WHERE strpos(last_error, $1) > 0 GROUP BY destination_chat_id`, tg.ErrNoWriteAccess.Error())
	if err != nil {
		return nil, fmt.Errorf("count deliveries held for write access: %w", err)
	}
	out := map[int64]int{}
	var dest int64
	var n int
	_, err = pgx.ForEachRow(rows, []any{&dest, &n}, func() error {
		out[dest] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count deliveries held for write access: %w", err)
	}
	return out, nil
}

// ResumeDeliveries makes the queued deliveries to dest that were put off
// for cause (an error text, such as tg.ErrTopicClosed's) due at now: what
// held them has gone (the topic was reopened). It returns how many.
func (s *Store) ResumeDeliveries(ctx context.Context, dest tg.ChatID, cause string, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE waiting_deliveries SET opens_at = $3
		WHERE destination_chat_id = $1 AND opens_at > $3 AND strpos(last_error, $2) > 0`, int64(dest), cause, now)
	if err != nil {
		return 0, fmt.Errorf("resume deliveries to %d: %w", dest, err)
	}
	return int(tag.RowsAffected()), nil
}
