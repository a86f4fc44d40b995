package store

import (
	"context"
	"fmt"
	"time"
)

// AccountAuth is whether an account's TDLib session is logged in, as the
// daemon last found it.
type AccountAuth struct {
	Account  string `json:"account"`
	LoggedIn bool   `json:"logged_in"`
	// State is TDLib's authorization state when not logged in; Reason says
	// what happened and what to do.
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Since is when LoggedIn last changed.
	Since time.Time `json:"since"`
}

// SetAccountAuth records a's login state; Since moves only when LoggedIn
// changes. It reports whether it changed.
func (s *Store) SetAccountAuth(ctx context.Context, a AccountAuth) (bool, error) {
	var changed bool
	err := s.pool.QueryRow(ctx, `
		INSERT INTO account_auth AS t (account, logged_in, state, reason) VALUES ($1, $2, $3, $4)
		ON CONFLICT (account) DO UPDATE SET logged_in = EXCLUDED.logged_in, state = EXCLUDED.state,
			reason = EXCLUDED.reason, updated_at = now(),
			since = CASE WHEN t.logged_in = EXCLUDED.logged_in THEN t.since ELSE now() END
		RETURNING (xmax = 0) OR since = updated_at`, a.Account, a.LoggedIn, a.State, a.Reason).Scan(&changed)
	if err != nil {
		return false, fmt.Errorf("record login state of account %s: %w", a.Account, err)
	}
	return changed, nil
}

// AccountAuths returns every recorded login state, by account name.
func (s *Store) AccountAuths(ctx context.Context) ([]AccountAuth, error) {
	rows, err := s.pool.Query(ctx, `SELECT account, logged_in, state, reason, since FROM account_auth ORDER BY account`)
	if err != nil {
		return nil, fmt.Errorf("read login states: %w", err)
	}
	defer rows.Close()
	var out []AccountAuth
	for rows.Next() {
		var a AccountAuth
		if err := rows.Scan(&a.Account, &a.LoggedIn, &a.State, &a.Reason, &a.Since); err != nil {
			return nil, fmt.Errorf("read login states: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
