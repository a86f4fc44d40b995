package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// DeliveryState is where a delivery stands.
type DeliveryState string

// Delivery states.
const (
	// DeliveryIntent: written before the send; the destination message id is
	// not known yet. After a crash the destination is searched for the token
	// before anything is sent again.
	DeliveryIntent DeliveryState = "intent"
	// DeliverySent: the destination message id is recorded.
	DeliverySent DeliveryState = "sent"
	// DeliveryFailed: given up (the package stays catalogued).
	DeliveryFailed DeliveryState = "failed"
)

// Delivery is one part of one package sent to one destination.
type Delivery struct {
	PackageID     int64
	Destination   tg.ChatID
	PartIndex     int
	Token         string
	State         DeliveryState
	DestMessageID tg.MessageID
	Account       string
	// CreatedAt is when the intent was written: a message carrying its token
	// cannot be older, which bounds reconciliation's look into the
	// destination.
	CreatedAt time.Time
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// EnsureIntent returns the delivery row for (package, destination, part),
// writing an intent with a fresh token if there is none, and reports whether
// it wrote it. Under a fence (WithFence) it is refused with ErrStaleEpoch
// once the account's lease moved on. It never resets an existing row: a later caller sees the first
// one's token and state, and an intent it did not write may already have
// been sent (the sender crashed before recording it).
func (s *Store) EnsureIntent(ctx context.Context, pkg int64, dest tg.ChatID, part int, account string) (Delivery, bool, error) {
	ins, err := s.EnsureIntents(ctx, pkg, dest, []int{part}, account)
	if err != nil {
		return Delivery{}, false, err
	}
	return ins[0].Delivery, ins[0].Fresh, nil
}

func (s *Store) getDelivery(ctx context.Context, pkg int64, dest tg.ChatID, part int) (Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, deliveryColumns+`
		WHERE package_id = $1 AND destination_chat_id = $2 AND part_idx = $3`, pkg, int64(dest), part))
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, fmt.Errorf("delivery %d/%d/%d: %w", pkg, dest, part, ErrNotFound)
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("read delivery: %w", err)
	}
	return d, nil
}

const deliveryColumns = `SELECT package_id, destination_chat_id, part_idx, token, state, dest_message_id, account, created_at FROM deliveries`

// scanDelivery reads a row of deliveryColumns.
func scanDelivery(row pgx.Row) (Delivery, error) {
	var d Delivery
	var dest int64
	var state string
	var msg *int64
	if err := row.Scan(&d.PackageID, &dest, &d.PartIndex, &d.Token, &state, &msg, &d.Account, &d.CreatedAt); err != nil {
		return Delivery{}, err
	}
	d.Destination, d.State = tg.ChatID(dest), DeliveryState(state)
	if msg != nil {
		d.DestMessageID = tg.MessageID(*msg)
	}
	return d, nil
}

// MarkSent records the destination message of a delivery and returns the
// message the delivery records: destMsg, or the one recorded before when
// the delivery was sent already (a copy that landed first, then destMsg
// is a second copy). It is the first write after Telegram confirms a
// send, so a crash right after leaves no doubt about whether the part is
// in the destination. Under a fence
// (WithFence) it is refused with ErrStaleEpoch once the lease moved on.
func (s *Store) MarkSent(ctx context.Context, d Delivery, destMsg tg.MessageID) (tg.MessageID, error) {
	recorded, err := s.MarkSentAll(ctx, []Delivery{d}, []tg.MessageID{destMsg})
	if err != nil {
		return 0, err
	}
	return recorded[0], nil
}

// MarkSentAll is MarkSent for the messages of one album, in one unit of
// the group commit: ds[i] was sent as destMsgs[i]. It returns the message
// recorded for each.
func (s *Store) MarkSentAll(ctx context.Context, ds []Delivery, destMsgs []tg.MessageID) ([]tg.MessageID, error) {
	stmts, out := s.markSentStatements(ctx, ds, destMsgs)
	if err := s.Commit(ctx, stmts...); err != nil {
		return nil, markSentError(ctx, ds, err)
	}
	return out, nil
}

// MarkSentAndUnlock is MarkSentAll with stmts (the end of the delivery the
// lock guarded: its queue row) and the lock's release in the same unit
// (UnlockWith): a delivery's last send is recorded, its queue row cleared
// and its lock let go in one round trip.
func (l *Lock) MarkSentAndUnlock(ctx context.Context, ds []Delivery, destMsgs []tg.MessageID, stmts ...Statement) ([]tg.MessageID, error) {
	marks, out := l.s.markSentStatements(ctx, ds, destMsgs)
	if err := l.UnlockWith(ctx, append(marks, stmts...)...); err != nil {
		return nil, markSentError(ctx, ds, err)
	}
	return out, nil
}

func markSentError(ctx context.Context, ds []Delivery, err error) error {
	d := ds[0]
	return fmt.Errorf("record delivery of package %d to %d: %w", d.PackageID, d.Destination, fenced(ctx, err))
}

// markSentStatements are MarkSentAll's statements; out holds the message
// recorded for each once they have run.
func (s *Store) markSentStatements(ctx context.Context, ds []Delivery, destMsgs []tg.MessageID) (stmts []Statement, out []tg.MessageID) {
	fa, fe := s.fenceArgs(ctx)
	out = make([]tg.MessageID, len(ds))
	stmts = make([]Statement, len(ds))
	for i, d := range ds {
		// When the update finds the row sent, the row says which message
		// was recorded. It is read FOR SHARE: a record committed by
		// another session after this statement's snapshot (the session's
		// report of a second copy of the part) is then read as it is
		// now, not as the snapshot had it, an intent. The account is the
		// one that sent (an intent written ahead names the account that
		// wrote it).
		stmts[i] = Statement{SQL: `WITH upd AS (
				UPDATE deliveries SET state = 'sent', dest_message_id = $4, sent_at = now(), error = '',
					fence_account = $5, fence_epoch = $6, account = coalesce(nullif($7, ''), account)
				WHERE package_id = $1 AND destination_chat_id = $2 AND part_idx = $3 AND state <> 'sent'
				RETURNING dest_message_id),
			cur AS (
				SELECT dest_message_id FROM deliveries
				WHERE package_id = $1 AND destination_chat_id = $2 AND part_idx = $3 AND NOT EXISTS (SELECT FROM upd)
				FOR SHARE)
			SELECT dest_message_id FROM upd
			UNION ALL
			SELECT dest_message_id FROM cur`,
			Args: []any{d.PackageID, int64(d.Destination), d.PartIndex, int64(destMsgs[i]), fa, fe, d.Account},
			Read: func(rows pgx.Rows) error {
				var recorded *int64
				if err := scanOne(rows, &recorded); err != nil {
					return err
				}
				out[i] = destMsgs[i]
				if recorded != nil {
					out[i] = tg.MessageID(*recorded)
				}
				return nil
			}}
	}
	return stmts, out
}

// MarkSentByToken records destMsg in dest as the delivery whose intent
// holds token, unless that delivery is recorded already; it reports whether
// it recorded one. It serves sends whose outcome reaches a later session
// (TDLib re-sends pending messages after a restart) and carries only the
// caption to tell which delivery it is. account, when not empty, is the
// account whose session reported the send (the one that sent it); empty
// keeps the account the row names.
func (s *Store) MarkSentByToken(ctx context.Context, token string, dest tg.ChatID, destMsg tg.MessageID, account string) (bool, error) {
	return s.markSentByToken(ctx, token, dest, destMsg, account, false)
}

// markSentByToken is MarkSentByToken; recovered marks the record as
// rebuilt from a copy a reconciliation found (recovered_at).
func (s *Store) markSentByToken(ctx context.Context, token string, dest tg.ChatID, destMsg tg.MessageID, account string, recovered bool) (bool, error) {
	fa, fe := s.fenceArgs(ctx)
	tag, err := s.pool.Exec(ctx, `UPDATE deliveries SET state = 'sent', dest_message_id = $3, sent_at = now(), error = '',
			fence_account = $4, fence_epoch = $5, account = coalesce(nullif($6, ''), account),
			recovered_at = CASE WHEN $7 THEN now() END
		WHERE token = $1 AND destination_chat_id = $2 AND state <> 'sent'`,
		token, int64(dest), int64(destMsg), fa, fe, account, recovered)
	if err != nil {
		return false, fmt.Errorf("record delivery of token %s to %d: %w", token, dest, fenced(ctx, err))
	}
	return tag.RowsAffected() == 1, nil
}

// DeliveryCounts returns the number of deliveries by state.
func (s *Store) DeliveryCounts(ctx context.Context) (map[DeliveryState]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM deliveries GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	out := map[DeliveryState]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count deliveries: %w", err)
		}
		out[DeliveryState(st)] = n
	}
	return out, rows.Err()
}

// DeliveryByToken returns the delivery to dest whose intent holds token,
// and false when there is none. It tells a message carrying the token
// that lands after its delivery was recorded (a pending send TDLib
// re-sent) whether it is the recorded copy or a second one.
func (s *Store) DeliveryByToken(ctx context.Context, token string, dest tg.ChatID) (Delivery, bool, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, deliveryColumns+`
		WHERE token = $1 AND destination_chat_id = $2`, token, int64(dest)))
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, fmt.Errorf("read delivery of token %s to %d: %w", token, dest, err)
	}
	return d, true, nil
}

// Intent is a delivery row as EnsureIntents returns it.
type Intent struct {
	Delivery
	// Fresh: this call wrote the intent, so no message can carry its token.
	Fresh bool
	// Copy is a copy of the part that a reconciliation after the
	// catalogue rewound found in the destination with no delivery left to
	// name it (RecordCopy); 0 for none. That copy is the delivery.
	Copy tg.MessageID
}

// EnsureIntents is EnsureIntent for parts of pkg to dest, in one round
// trip, and also answers FoundCopy for each part not sent yet. It returns
// the intents in parts' order.
func (s *Store) EnsureIntents(ctx context.Context, pkg int64, dest tg.ChatID, parts []int, account string) ([]Intent, error) {
	// A unit of the group commit, which shares its round trip and commit
	// with the other writes of the moment.
	w := s.newIntentWrite(ctx, pkg, dest, parts, account, nil)
	err := s.Commit(ctx, w.stmt)
	if err != nil {
		return nil, fmt.Errorf("write delivery intents: %w", fenced(ctx, err))
	}
	out := make([]Intent, len(parts))
	for i, p := range parts {
		in, ok := w.byPart[p]
		if !ok {
			// Written by a transaction that committed after this
			// statement's snapshot: read it now.
			d, err := s.getDelivery(ctx, pkg, dest, p)
			if err != nil {
				return nil, err
			}
			in = Intent{Delivery: d}
			if d.State != DeliverySent {
				if in.Copy, _, err = s.FoundCopy(ctx, pkg, p, dest); err != nil {
					return nil, err
				}
			}
		}
		out[i] = in
	}
	return out, nil
}
