package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"stashd/tg"
)

// ClaimSources claims, among chats, the sources of account that are due
// (next scan time passed, circuit closed) and not claimed by another
// instance. Rows another transaction is claiming at this moment are
// skipped (FOR UPDATE SKIP LOCKED), so instances never wait on each other.
func (s *Store) ClaimSources(ctx context.Context, account, owner string, chats []tg.ChatID, ttl time.Duration) ([]Source, error) {
	ids, era := chatIDs(chats), s.Era()
	rows, err := s.pool.Query(ctx, `UPDATE sources SET claim_owner = $2, claim_until = now() + $3::interval
		WHERE chat_id IN (
			SELECT chat_id FROM sources
			WHERE chat_id = ANY($4) AND account = $1
				AND (claim_until IS NULL OR claim_until < now() OR claim_owner = $2)
				AND (circuit_until IS NULL OR circuit_until <= now())
				AND next_scan_at <= now()
			ORDER BY next_scan_at
			FOR UPDATE SKIP LOCKED)
		RETURNING `+sourceColumns, account, owner, ttl.String(), ids)
	if err != nil {
		return nil, fmt.Errorf("claim sources: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Source, error) { return scanSource(r) })
	if err != nil {
		return nil, fmt.Errorf("claim sources: %w", err)
	}
	for i := range out {
		out[i].Era = era
	}
	return out, nil
}

// ReopenInaccessible makes those of chats that account's sources recorded
// inaccessible due for a scan now, their circuit closed: TDLib reports the
// account a member again, and the scan that reads the source records it
// readable and revives what its loss exhausted (FinishScan). Their failure
// count stays, so a report that proves wrong reopens a circuit as long as
// before. It returns how many it reopened.
func (s *Store) ReopenInaccessible(ctx context.Context, account string, chats []tg.ChatID) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE sources SET circuit_until = NULL, next_scan_at = now(), updated_at = now()
		WHERE account = $1 AND chat_id = ANY($2) AND access = 'inaccessible'
			AND (circuit_until > now() OR next_scan_at > now())`, account, chatIDs(chats))
	if err != nil {
		return 0, fmt.Errorf("reopen sources the account is back in: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ScanOutcome is what one catch-up scan of a source found.
type ScanOutcome struct {
	// Found is the number of messages handed to ingest.
	Found int
	// Err is the scan's error; nil on success.
	Err error
	// Permanent says Err will not go away by itself (private, banned,
	// deleted): the circuit opens.
	Permanent bool
	// NoAccess says Err is a lost access (tg.ErrNoAccess): the source is
	// recorded as inaccessible with Err as its reason. A scan without error
	// that read the source (Read) records it accessible again.
	NoAccess bool
	// Protected is the chat's has_protected_content, when the scan read the
	// chat (ChatRead); otherwise the stored flag is kept.
	Protected, ChatRead bool
	// Read says the scan read the source from the server (it paged), and
	// so proved it readable: only such a scan records a source recorded
	// inaccessible readable again (FinishScan). One that trusted the
	// session's local view keeps the mark for a later scan to settle.
	Read bool
	// NotMember says the scan read the source from the server although
	// TDLib reported the account's status in it as "left": a public chat
	// the account reads without having joined it (AccessNotMember). A
	// later scan without error keeps that mark, unless Member.
	NotMember bool
	// Member says TDLib reported the account a member of the source since
	// the last "left" it reported: a scan without error records the access
	// ok, also over a not_member mark (the account joined, or a scan read
	// it before the report of its return came).
	Member bool
	// Account, when set, is the account that scanned: nothing is recorded
	// when the source is another's by now (TakeSource moved it while the
	// scan ran: its outcome is the old account's, not the source's).
	Account string
}

// ScanPolicy sets the scheduling that FinishScan applies.
type ScanPolicy struct {
	// ColdAfter empty scans in a row make a source cold.
	ColdAfter int
	// ColdDelay is the wait before a cold source is scanned again.
	ColdDelay time.Duration
	// RetryDelay is the wait after a transient error (doubling per failure,
	// up to MaxDelay).
	RetryDelay time.Duration
	// CircuitBase is the first open-circuit interval after a permanent error
	// (doubling per failure, up to MaxDelay).
	CircuitBase time.Duration
	// MaxDelay caps both growing intervals.
	MaxDelay time.Duration
}

// FinishScan records a scan's outcome, schedules the next one and releases
// the claim. A source with pending dead letters never counts as empty. A
// scan that read a source recorded inaccessible records it readable again
// (regainAccess), which makes its no_access letters due.
func (s *Store) FinishScan(ctx context.Context, chat tg.ChatID, owner string, o ScanOutcome, p ScanPolicy) (Source, error) {
	errText := ""
	if o.Err != nil {
		errText = o.Err.Error()
	}
	row := s.pool.QueryRow(ctx, `UPDATE sources SET
			scans = scans + 1,
			last_scan_at = now(),
			failures = CASE WHEN $3 = '' THEN 0 ELSE failures + 1 END,
			last_error = $3,
			empty_scans = CASE
				WHEN $3 <> '' THEN empty_scans
				WHEN $2 > 0 OR EXISTS (SELECT 1 FROM dead_letters d WHERE d.chat_id = sources.chat_id AND d.state = 'pending') THEN 0
				ELSE empty_scans + 1 END,
			circuit_until = CASE WHEN $4 THEN now() + least($6::interval * power(2, least(failures, 20)), $8::interval) ELSE NULL END,
			next_scan_at = CASE
				WHEN $4 THEN now() + least($6::interval * power(2, least(failures, 20)), $8::interval)
				WHEN $3 <> '' THEN now() + least($7::interval * power(2, least(failures, 20)), $8::interval)
				WHEN $2 = 0 AND empty_scans + 1 >= $9 THEN now() + $5::interval
				ELSE now() END,
			access = CASE WHEN $11 THEN 'inaccessible'
				WHEN access = 'inaccessible' THEN access
				WHEN $3 = '' AND ($14 OR access = 'not_member' AND NOT $15) THEN 'not_member'
				WHEN $3 = '' THEN 'ok' ELSE access END,
			access_reason = CASE WHEN $11 THEN $3 WHEN access = 'inaccessible' THEN access_reason
				WHEN $3 = '' THEN '' ELSE access_reason END,
			access_since = CASE WHEN $11 THEN coalesce(access_since, now()) WHEN access = 'inaccessible' THEN access_since
				WHEN $3 = '' THEN NULL ELSE access_since END,
			protected = CASE WHEN $12 THEN $13 ELSE protected END,
			claim_owner = NULL, claim_until = NULL, updated_at = now()
		WHERE chat_id = $1 AND (claim_owner = $10 OR claim_owner IS NULL) AND ($16 = '' OR account = $16)
		RETURNING `+sourceColumns,
		int64(chat), o.Found, errText, o.Permanent, p.ColdDelay.String(), p.CircuitBase.String(),
		p.RetryDelay.String(), p.MaxDelay.String(), p.ColdAfter, owner, o.NoAccess, o.ChatRead, o.Protected, o.NotMember, o.Member,
		o.Account)
	src, err := scanSource(row)
	if errors.Is(err, pgx.ErrNoRows) {
		// Claimed by another instance since (the claim expired), or moved
		// to another account: the outcome is no longer the source's.
		return Source{}, fmt.Errorf("finish scan of %d: the source is no longer this scan's: %w", chat, ErrNotFound)
	}
	if err != nil {
		return Source{}, fmt.Errorf("finish scan of %d: %w", chat, err)
	}
	if o.Err == nil && o.Read && src.Access == AccessLost {
		// The mark was kept above: it goes with the letters' revival, in
		// one transaction, so that a stop between the two loses neither.
		return s.regainAccess(ctx, chat, o.NotMember)
	}
	return src, nil
}

// regainAccess records chat, recorded inaccessible, as readable again
// (not_member when notMember) and makes its dead letters of class
// ClassNoAccess due now, for its account: the account can read the chat
// again, and nothing else would fetch them (the watermark is past their
// messages, the rescan passes over them as handled). A letter recorded
// while this runs either is seen by the revival, or marks the source
// inaccessible again after it (RecordDeadLetter), for the next scan.
func (s *Store) regainAccess(ctx context.Context, chat tg.ChatID, notMember bool) (Source, error) {
	var src Source
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		src, err = scanSource(tx.QueryRow(ctx, `UPDATE sources SET
				access = CASE WHEN $2 THEN 'not_member' ELSE 'ok' END, access_reason = '', access_since = NULL,
				updated_at = now()
			WHERE chat_id = $1 AND access = 'inaccessible'
			RETURNING `+sourceColumns, int64(chat), notMember))
		if errors.Is(err, pgx.ErrNoRows) {
			// Another scan regained it first.
			src, err = scanSource(tx.QueryRow(ctx, `SELECT `+sourceColumns+` FROM sources WHERE chat_id = $1`, int64(chat)))
			return err
		}
		if err != nil {
			return err
		}
		// A statement of its own, after the source's row is ours: its
		// snapshot sees a letter whose RecordDeadLetter held the row and
		// committed while the update above waited for it.
		_, err = tx.Exec(ctx, `UPDATE dead_letters SET account = $2, state = 'pending', next_attempt_at = now(),
				updated_at = now()
			WHERE chat_id = $1 AND state = 'exhausted' AND error_class = $3`, int64(chat), src.Account, ClassNoAccess)
		return err
	})
	if err != nil {
		return Source{}, fmt.Errorf("record access to %d regained: %w", chat, err)
	}
	return src, nil
}
